// `allocmark trace record`: runs a program with the recording preload (harness/trace/
// record_preload.cpp) in front of the chosen allocator, reads the record stream it writes on a
// high descriptor (kRecordFd, named by ALLOCMARK_TRACE_FD: out of the way of programs that use 3
// and up) as it arrives (checked event by event, so a fault is found where it happens), and
// writes the trace file with its header: program, arguments, machine, allocator, threads, counts.
// The program keeps the terminal: its standard input, output and error are the driver's.
#pragma once

#include <string>
#include <vector>

#include "harness/matrix/plan.h"
#include "harness/trace/format.h"

namespace allocmark::runner {

struct TraceRecording {
  std::vector<std::string> command;  // argv; argv[0] looked up on PATH when it has no '/'
  matrix::ResolvedAllocator allocator;  // glibc: nothing preloaded after the recorder
  bool phases = false;  // give the program a phase descriptor (ALLOCMARK_PHASE_FD), its marks kept
  std::string out;      // the trace file
};

// The descriptor the program's recorder writes the stream to (ALLOCMARK_TRACE_FD): 1000, or the
// highest the descriptor limit allows when it is lower.
int record_fd();

struct RecordedTrace {
  trace::Trace trace;  // as written, header included
  int exit_code = -1;  // the program's, -1 when a signal ended it
  int exit_signal = 0;
  // Not "": no trace was written, and why: the stream holds bytes the recorder did not write (the
  // program wrote to its descriptor), or the program's last image was not recorded (an exec of a
  // statically linked or set-uid program). The program ran to its end either way.
  std::string lost;
};

// The trace file could not be written (disk full, ...): exit 3, nothing left behind.
class TraceWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws std::runtime_error when the program cannot be started or nothing was recorded (the
// recorder never loaded), TraceWriteError when the file cannot be written.
RecordedTrace record_trace(const TraceRecording& recording);

}  // namespace allocmark::runner
