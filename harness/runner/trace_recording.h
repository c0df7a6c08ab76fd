// `allocmark trace record`: runs a program with the recording preload (harness/trace/
// record_preload.cpp) in front of the chosen allocator, reads the record stream it writes on fd 3
// as it arrives (checked chunk by chunk, so a recorder fault is found where it happens), and
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

struct RecordedTrace {
  trace::Trace trace;  // as written, header included
  int exit_code = -1;  // the program's, -1 when a signal ended it
  int exit_signal = 0;
};

// Throws std::runtime_error when the program cannot be started or the file written, and
// trace::TraceError when the stream does not parse (nothing is written then).
RecordedTrace record_trace(const TraceRecording& recording);

}  // namespace allocmark::runner
