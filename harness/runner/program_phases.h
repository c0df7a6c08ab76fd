// The phases of a program cell, measured from the driver: a program cannot measure itself, so the
// driver closes a phase when the program writes `phase NAME` to its phase descriptor (fd 4, named
// by ALLOCMARK_PHASE_FD): it reads the program's VmHWM, VmRSS and counters from /proc/PID, then
// resets the high-water mark (clear_refs 5) for the next phase. The last phase is closed by the
// preload companion's exit report (VmHWM read by the process itself as it exits) and the wait4
// totals. A program that marks nothing is one phase, "run"; one that marks phases has a "startup"
// phase before its first mark, and a mark repeated opens NAME#2 (trace/phase_marks.h, the rule a
// replayed trace's marks follow too). The driver answers each line with "ok\n" once the edge is measured
// (or "error\n"), so a program that reads the answer before going on has exact phase edges.
// Each phase also gets `nodes`: the program's resident bytes per NUMA node at its end (numa_maps,
// read by the driver at a mark and by the companion at exit) and the whole system's huge-page
// bytes per node then (node meminfo, read by each of them too); the per-thread figures a worker
// records (threads, ops, sampled blocks, latency) are null, since allocmark does not see inside.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "harness/metrics/proc.h"
#include "harness/trace/phase_marks.h"

namespace allocmark::runner {

class ProgramPhases {
 public:
  // `node_ids`: the machine's NUMA nodes (topology::detect), one `nodes` entry each.
  ProgramPhases(pid_t pid, int64_t start_ns, std::vector<int> node_ids);
  // Bytes read from the phase pipe; returns the phase_end events of the phases this closed.
  std::vector<nlohmann::json> feed(const char* data, std::size_t size, int64_t now_ns);
  // The program has been reaped: its pid may name another process now, so marks still to be read
  // close their phases without reading /proc (figures null, not exact).
  void program_ended() { ended_ = true; }
  // After the program exited: the last phase_end, from the companion's `program_exit` event and
  // the wait4 totals of the whole run. A program that left without running its exit handlers
  // (_exit, a signal) has no exit event: then the last phase's peak is `sampled_peak` (the
  // parent's samples over the phase, 0 for none) and not exact.
  nlohmann::json finish(const nlohmann::json& exit_event, const rusage& totals, int64_t end_ns, uint64_t sampled_peak);
  // When the phase now running began (CLOCK_MONOTONIC ns).
  int64_t current_begin_ns() const { return begin_ns_; }
  // Lines on the phase pipe that were not `phase NAME` (the first 10, each cut at 256 bytes, as
  // valid UTF-8): reported in the record, never guessed at.
  const std::vector<std::string>& bad_lines() const { return bad_lines_; }
  // The answers to the lines fed so far, in order ("ok\n" or "error\n" each), for the phase
  // socket; taking them empties the queue.
  std::string take_answers() { return std::exchange(answers_, std::string()); }

 private:
  nlohmann::json close_phase(const std::string& next, int64_t now_ns);
  // `anon_huge`: the program's AnonHugePages now (absent once it has exited); `thp_now`: the
  // system's THP events now.
  nlohmann::json phase_event(int64_t end_ns, const nlohmann::json& peak, const nlohmann::json& end_rss, bool exact,
                             std::optional<uint64_t> anon_huge, const std::optional<metrics::ThpEvents>& thp_now,
                             const metrics::TaskCounters& now, const metrics::SchedSnapshot* sched_now,
                             const nlohmann::json& resident_by_node, const nlohmann::json& system_huge_by_node) const;

  pid_t pid_;
  bool ended_ = false;
  std::vector<int> node_ids_;
  std::string current_ = trace::kUnmarkedPhase;
  bool marked_ = false;
  trace::PhaseNames names_;  // a mark repeated (or named `startup`) opens NAME#2: names stay unique
  int64_t begin_ns_;
  bool reset_ok_ = true;  // the high-water mark of the current phase started at its beginning
  metrics::TaskCounters at_begin_{};
  std::optional<metrics::ThpEvents> thp_at_begin_;  // the system's THP events at the phase start
  // The program's threads at the current phase's start (empty at spawn: every thread is new).
  metrics::SchedSnapshot sched_at_begin_, sched_now_;
  std::string partial_;
  std::vector<std::string> bad_lines_;
  std::string answers_;
};

}  // namespace allocmark::runner
