// What differs between kinds of cell: how the measured process starts, which of its events count,
// and what its record adds. run_cell_here (cell_runner.cpp) owns what every cell shares: the
// process group, the timeout and the stop request, RSS sampling, the report and phase pipes, the
// end of leftovers, classification and the host. A launcher is chosen once per cell (launcher_for);
// a new kind of cell is one file implementing CellLauncher and one line in launcher_for.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/matrix/plan.h"
#include "harness/runner/cell_runner.h"
#include "harness/runner/process.h"
#include "harness/runner/record.h"
#include "harness/runner/timeline.h"

namespace allocmark::runner {

// How the cell's process ended, as the shared loop saw it.
struct ProcessEnd {
  int wait_status = 0;
  rusage usage{};
  int64_t start_ns = 0, exit_ns = 0;  // CLOCK_MONOTONIC at spawn and at reaping
  bool timed_out = false, interrupted = false;
  std::size_t outlived_by = 0;  // processes it left running, ended by the driver
};

class CellLauncher {
 public:
  virtual ~CellLauncher() = default;
  // Prepares what the cell needs and starts its process, output to the cell's log. Throws
  // std::runtime_error when it cannot be started at all.
  virtual Spawned start() = 0;
  // The process runs since start_ns: for launchers that measure it from outside.
  virtual void began(int64_t start_ns) { (void)start_ns; }
  // One event of the report stream (fd 3).
  virtual void take_event(const nlohmann::json& event, RecordBuilder& builder) = 0;
  // Bytes from the phase pipe (only a Spawned with a phase_fd has one), their edges at edge_ns.
  virtual void take_phase_marks(const char* data, std::size_t n, int64_t edge_ns, RecordBuilder& builder) {
    (void)data, (void)n, (void)edge_ns, (void)builder;
  }
  // The process has been reaped, and what it left running ended.
  virtual void exited() {}
  // Both pipes are read to their end: what this kind of cell adds to the record.
  virtual void complete(RecordBuilder& builder, const ProcessEnd& end, const Timeline& timeline) {
    (void)builder, (void)end, (void)timeline;
  }
  // The process group is dead, so nothing writes any more: remove what the cell leaves behind.
  virtual void clean_up() {}
};

// The measuring worker (allocmark-worker) with the allocator preloaded: workload cells.
std::unique_ptr<CellLauncher> worker_launcher(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path);
// The user's command with the allocator and the preload companion: program cells (docs/programs.md).
std::unique_ptr<CellLauncher> program_launcher(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path);

// The launcher for this cell's kind.
std::unique_ptr<CellLauncher> launcher_for(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path);

}  // namespace allocmark::runner
