// Which allocator leads, per workload and thread count, on peak RSS, on RSS above idle per live
// byte and on throughput, and by how much: the first table of `allocmark report`. Computed from
// the results model's whole-cell groups (workload x threads x allocator: peak RSS and peak live the
// maxima over phases, ops/s total ops over total time), never from charts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::report {

struct Contender {
  std::string allocator;  // the group's allocator label
  results::Spread spread;
};

// Whether the leader's lead stands out of the repetitions' spread.
enum class Noise {
  separated,      // every repetition of the leader beats every repetition of the runner-up
  overlapping,    // their min-max ranges overlap: the order may be noise
  one_repetition, // one of them has a single repetition: no spread to judge by
  no_contest,     // fewer than two allocators have this figure
};

struct Verdict {
  std::string workload;  // label, as in the groups
  int threads = 0;
  std::string host;      // only when the grouping had to split by host
  results::Metric metric;
  bool lower_is_better = true;  // the metric row's direction
  std::optional<Contender> leader, runner_up;
  std::size_t contenders = 0;  // allocators with at least one ok repetition of this figure
  // How many times better the leader's median is than the runner-up's: runner-up / leader where
  // lower is better, leader / runner-up for throughput, so always >= 1; nullopt where a median is
  // zero or negative and a ratio means nothing.
  std::optional<double> lead;
  Noise noise = Noise::no_contest;
};

// The metrics a verdict is given on (their directions are the metric table's).
const std::vector<results::Metric>& verdict_metrics();

// One Verdict per (workload, threads[, host]) and verdict metric, in the grouping's order. The
// grouping must have the workload, threads and allocator dimensions and not phase
// (model.group({workload, threads, allocator})).
std::vector<Verdict> verdicts(const results::Grouping& grouping);

std::string_view noise_text(Noise noise);

}  // namespace allocmark::report
