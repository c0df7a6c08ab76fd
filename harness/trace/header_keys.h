// The keys of a trace file's JSON header (docs/traces.md, "header"): one row each, which the
// recorder writes them by (runner/trace_recording.cpp) and every reader reads them by (the
// summary, `trace record`'s closing line). A header key spelled twice is a field one side never
// finds; trace/header_keys_test.cpp holds docs/traces.md to the table.
#pragma once

namespace allocmark::trace {

// X(name, description): each row's name is its spelling in the file.
#define ALLOCMARK_TRACE_HEADER_KEYS(X)                                                                \
  X(program, "the recorded command's program")                                                       \
  X(arguments, "its arguments")                                                                       \
  X(cwd, "the directory it ran in")                                                                   \
  X(allocator, "the allocator it ran on: name and library")                                           \
  X(machine, "the host, as meta.json describes it")                                                   \
  X(recorded_at, "when the recording started (UTC)")                                                  \
  X(wall_s, "how long the program ran")                                                               \
  X(exit_code, "its exit status, or null after a signal")                                             \
  X(exit_signal, "the signal that ended it, or null")                                                 \
  X(ended, "whether it ended by exit or _exit (a trace that did not is incomplete)")                  \
  X(images, "the program images (executable and libraries) whose calls were recorded")               \
  X(threads, "how many threads made calls")                                                           \
  X(events, "how many events the file holds")                                                         \
  X(objects, "blocks allocated")                                                                      \
  X(unknown_frees, "frees of blocks allocated before the recorder started")                           \
  X(lost_events, "events lost past the recorder's caps (a trace with any is incomplete)")             \
  X(phases, "the program's phase names, in order")                                                    \
  X(calls, "per function: calls and requested bytes")

namespace header_key {
#define ALLOCMARK_TRACE_HEADER_KEY(name, description) inline constexpr const char name[] = #name;
ALLOCMARK_TRACE_HEADER_KEYS(ALLOCMARK_TRACE_HEADER_KEY)
#undef ALLOCMARK_TRACE_HEADER_KEY
}  // namespace header_key

}  // namespace allocmark::trace
