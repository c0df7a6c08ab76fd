// The report stream's events (a cell's process to the driver, one JSON object a line on fd 3): each
// event's name and each key an event carries, one table that every writer (worker/worker.cpp,
// program/preload_report.cpp, and the driver's own events for a program cell in
// runner/program_phases.cpp and runner/program_launcher.cpp) and every reader (runner/record.cpp,
// the launchers, runner/status.cpp, runner/probe.cpp) names them by. The stream is internal (the
// record is the interface), but a key spelled two ways is a figure lost without a word, and the
// two sides are separate processes, one of them preloaded into a user's program. A phase figure an
// event carries (a program's exit: its peak and end RSS) is the field table's (phase_keys.h).
// Each row's name is its spelling on the wire: event::start is "start", event_key::t_ns "t_ns".
// record/event_keys_test.cpp holds every row to a use through the table and no spelling by hand.
#pragma once

namespace allocmark::record {

// X(name, description): the value of an event's "event" key; who sends it and what it carries.
#define ALLOCMARK_EVENTS(X)                                                                                         \
  X(probe, "the worker (--probe): library, version, options; error when it is not the allocator asked for")       \
  X(start, "the worker and the companion at load: library, version, options, pid, t_ns")                          \
  X(baseline, "the worker after setup: idle_rss_bytes, alloc_stats, pinned_cpus, placement, t_ns")               \
  X(phase_begin, "the worker before a phase: phase (its name), t_ns")                                             \
  X(phase_end, "the worker after a phase, the driver at a program's mark: phase (its record, with its edges)")    \
  X(done, "the worker after the last phase, the driver for a program: alloc_stats, contention, options, t_ns")   \
  X(program_exit, "the companion as a program exits: t_ns, peak and end RSS, numa_resident_bytes, "              \
                  "system_anon_huge_bytes, alloc_stats, contention (pid and the RSS only, from _exit)")           \
  X(error, "either, when the cell cannot go on: error")

// X(name, description): a key of an event, the events that carry it above.
#define ALLOCMARK_EVENT_KEYS(X)                                                                                      \
  X(event, "which event: a row of ALLOCMARK_EVENTS")                                                                \
  X(pid, "the process that sent it (the driver ignores a program's other processes)")                              \
  X(t_ns, "CLOCK_MONOTONIC when it was sent")                                                                       \
  X(library, "the object that serves malloc (dladdr)")                                                              \
  X(version, "the allocator's own version string")                                                                  \
  X(options, "option values read back from the allocator")                                                          \
  X(error, "why the cell cannot go on")                                                                             \
  X(idle_rss_bytes, "RSS after setup, before the first phase")                                                     \
  X(alloc_stats, "the allocator's native statistics")                                                               \
  X(contention, "the allocator's lock counters")                                                                    \
  X(pinned_cpus, "the CPU each workload thread was pinned to, or null")                                             \
  X(placement, "the placement policy as run and what it gave")                                                      \
  X(phase, "phase_begin: its name; phase_end: its record")                                                          \
  X(t_begin_ns, "phase_end's phase: CLOCK_MONOTONIC at its start (the record holds start_ms from the spawn)")       \
  X(t_end_ns, "phase_end's phase: CLOCK_MONOTONIC at its end (the record holds end_ms)")                            \
  X(numa_resident_bytes, "a program's resident bytes by node number at its exit (numa_maps), null entries unread")  \
  X(system_anon_huge_bytes, "the system's AnonHugePages by node number at a program's exit, null entries unread")

namespace event {
#define ALLOCMARK_EVENT_NAME(name, description) inline constexpr const char name[] = #name;
ALLOCMARK_EVENTS(ALLOCMARK_EVENT_NAME)
#undef ALLOCMARK_EVENT_NAME
}  // namespace event

namespace event_key {
#define ALLOCMARK_EVENT_KEY(name, description) inline constexpr const char name[] = #name;
ALLOCMARK_EVENT_KEYS(ALLOCMARK_EVENT_KEY)
#undef ALLOCMARK_EVENT_KEY
}  // namespace event_key

}  // namespace allocmark::record
