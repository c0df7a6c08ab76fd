// Runs one cell in a fresh worker process: fork+exec with the allocator preloaded, RSS sampled
// from /proc/PID by this (parent) process on its own clock, phases read from the worker's report
// pipe. Crashes, hangs, kills and bad exits become a status and a reason, never a lost matrix.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/matrix/plan.h"

namespace allocmark::runner {

struct RunnerOptions {
  std::string worker_path;
  std::string log_dir;  // the worker's stdout+stderr go to log_dir/<n>.log
  double timeout_s = 300;
  int sample_ms = 10;
  int max_timeline_points = 2000;
  bool pin_threads = true;
  // Called about once a second while a cell runs (for a live progress line); may be empty.
  std::function<void()> on_tick;
};

// Set from a SIGINT/SIGTERM handler: the cell in flight is killed and reported as interrupted.
extern std::atomic<bool> g_interrupted;

// Environment for a worker: the driver's own minus every allocator setting, plus the variant's.
std::vector<std::string> worker_environment(const matrix::ResolvedAllocator& allocator);

struct CellOutcome {
  nlohmann::json record;    // one results.jsonl object
  bool interrupted = false; // do not record: the cell did not finish
};

CellOutcome run_cell(const matrix::Cell& cell, const RunnerOptions& options, int cell_index);

// Preloads `allocator` into a worker that only reports which library serves malloc and the
// allocator's version and options. Returns the probe object ({"library","version","options"} or
// {"error"}).
nlohmann::json probe_allocator(const matrix::ResolvedAllocator& allocator, const std::string& worker_path);

// Text of the last `max_bytes` of a file, for error messages.
std::string tail_of_file(const std::string& path, std::size_t max_bytes);

}  // namespace allocmark::runner
