// `allocmark advise`: from a folder of one program's cells under several allocators, the allocator
// with the lowest peak RSS, the fastest, and the best trade-off, each with its margin over the
// runner-up and its spread over repetitions. Every figure comes from the results model.
#pragma once

#include <string>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::results {

struct Candidate {
  std::string allocator;
  std::size_t ok = 0, cells = 0;  // repetitions recorded ok, of all recorded
  Spread peak_rss_bytes, wall_s;  // over the ok repetitions (whole cell: max peak over phases, summed wall)
  double tradeoff = 0;            // tradeoff_score against the best median of each
};

struct Pick {
  std::string allocator, runner_up;
  double value = 0, runner_up_value = 0;
  double margin = 0;        // relative_margin(value, runner_up_value)
  double spread = 0;        // relative_range of the winner's repetitions
  bool has_spread = false;  // false for the trade-off, a score of medians
  bool within_spread = false;  // the margin is smaller than either one's spread: no clear winner
};

struct Advice {
  std::string workload;
  std::vector<Candidate> candidates;  // every allocator, in recorded order
  std::vector<std::string> failed;    // allocators without an ok repetition, with why
  Pick lowest_peak_rss, fastest, tradeoff;
  bool any = false;  // false: no allocator had an ok repetition
};

Advice advise(const Model& model);
std::string render_advice(const Advice& advice);

// The three picks as every rendering words them: what was picked ("lowest peak RSS"), the pick, and
// "ALLOCATOR (VALUE; 3.1 % better than B, its repetitions spread 1.2 %)" with its no-clear-winner
// note. Empty when no allocator ran the program.
struct PickLine {
  std::string what;
  const Pick* pick;
  std::string text;
};
std::vector<PickLine> pick_lines(const Advice& advice);

}  // namespace allocmark::results
