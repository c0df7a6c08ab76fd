// Which allocator to run, and how sure: the one ranking that the report's first screen, the
// terminal's end-of-run summary and `advise` all print. Computed from the results model, per
// workload and thread count (a "scope") and across the run, on the figures that mean something for
// the workload:
//   - peak RSS and held RSS of whole cells: held RSS is the return curve's +100 ms point (RSS 100 ms
//     after the last phase, the worker idle: rss_after_100ms_bytes) where every cell of the scope
//     has one, else the last phase's end RSS for all of them; its `what` names the point;
//   - RSS above idle per live byte, unless a contender sits below its floor of 1.0 (the workload's
//     allocations were never all touched, so the ratio ranks nothing);
//   - time: for percall the ns/op of each benchmark (its `ns_per_op.*` workload metrics), for
//     workloads with phases that do work the ops/s of each such phase (left out: idle phases,
//     whole-cell rates, and phases whose rate the workload's own schedule fixes, as it declares
//     them: ops_per_s_not_a_speed in model.h), for a program its wall time.
//     The headline is one figure per cell: the geometric mean over those benchmarks or phases of
//     its time relative to the best median (1.0: the best everywhere), so repetitions give it a
//     spread like any measured figure.
// Each figure ranks the allocators by median over ok repetitions and says whether the leader's
// lead stands out of the repetitions' spread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::results {

enum class Certainty {
  clear,           // every repetition of the leader is better than every one of the runner-up
  within_noise,    // their min-max ranges overlap: the order may be noise
  one_repetition,  // one of them has a single repetition: no spread to judge by
  alone,           // one allocator has this figure
  mixed,           // across the run only: each beats the other beyond noise somewhere
};
// "clear", "within noise", "one repetition", "alone"; and the sentence that explains it.
std::string_view certainty_name(Certainty c);
std::string_view certainty_text(Certainty c);

// The kinds of figure a scope is ranked on; the headline kinds first.
enum class Figure { peak_rss, held_rss, rss_over_live, time, phase_ops_per_s, benchmark_ns_per_op };

// The held RSS figure's names: which point of a cell it is read at.
inline constexpr std::string_view kHeldAt100ms = "held RSS (+100 ms)";
inline constexpr std::string_view kHeldAtEnd = "held RSS (end)";
// A phase every allocator ran in less than this (seconds, medians) is ranked on its own but left
// out of the time headline: at a few hundred µs its rate is the machine's timer and scheduler
// (a 4 ms tick), not the allocator. The RSS sampling period's default, 10 ms.
inline constexpr double kShortestTimedPhaseS = 0.010;

struct Standing {
  std::string allocator;  // the model's group label
  Spread spread;          // the figure's values over ok repetitions (time: the per-cell scores)
  // Times worse than the leader's median, >= 1: median / best for lower-is-better figures, best /
  // median for ops/s.
  double relative = 1;
};

struct Ranking {
  Figure figure;
  std::string what;  // "peak RSS", "time (geomean of 6 phases' ops/s)", "ops/s l.i0", "ns/op malloc_free_64"
  // The metric whose unit and format the values have; nullopt for unitless scores and workload
  // metrics (ns/op, written as nanoseconds).
  std::optional<Metric> metric;
  bool lower_is_better = true;
  std::vector<Standing> standings;  // best first; equal medians keep the matrix's order
  Certainty certainty = Certainty::alone;
  // Why the figure is shown but not ranked ("" where it is ranked): standings are then in matrix order.
  std::string not_ranked;
  // Peak and held RSS: the allocators whose RSS above the leader's (more than one huge page) is
  // matched at least half by more transparent huge pages than the leader holds, by the huge-page
  // bytes at the end of the phase the figure comes from, with both amounts. Huge pages replace
  // small pages, so the huge-page surplus can exceed the RSS difference; it says the difference
  // is a matter of page size, not which part is. Empty where no difference is.
  struct HugeShare {
    std::string allocator;
    double rss_above = 0, huge_above = 0;  // bytes above the leader's medians
  };
  std::vector<HugeShare> mostly_huge_pages;
  // The leader's lead over the runner-up (runner-up's relative - 1); 0 with fewer than two.
  double margin() const { return standings.size() > 1 ? standings[1].relative - 1 : 0.0; }
  const Standing* leader() const { return standings.empty() || !not_ranked.empty() ? nullptr : &standings[0]; }
};

struct ScopeRecommendation {
  std::string workload;  // label, as in the model's groups
  int threads = 0;
  std::string host;      // only where the run spans hosts
  std::size_t repetitions = 0;  // the most ok repetitions any allocator has here
  std::vector<Ranking> headline;  // peak RSS, held RSS, RSS/live, time: those the scope has
  std::vector<Ranking> details;   // per phase or per benchmark, behind the time headline
  const Ranking* find(Figure f) const;
};

// One headline figure across every scope that has it: each allocator's geometric mean of its
// relative standing (1.0: the best in every scope), counted where it is ranked.
struct AcrossStanding {
  std::string allocator;
  double relative = 1;    // geomean over the scopes it ran in
  std::size_t scopes = 0;  // where it ran
  std::size_t best = 0;    // where it led
  std::size_t clearly_best = 0;  // ... beyond noise
};
struct AcrossRanking {
  Figure figure;
  std::string what;
  std::vector<AcrossStanding> standings;  // best first, only allocators that ran in every scope
  std::size_t scopes = 0;
  // clear: the leader beats the runner-up beyond noise somewhere and is never beaten by it beyond
  // noise; mixed: each beats the other beyond noise somewhere (which one depends on the workload);
  // one_repetition: every scope had one; within_noise otherwise.
  Certainty certainty = Certainty::alone;
  double margin() const { return standings.size() > 1 ? standings[1].relative / standings[0].relative - 1 : 0.0; }
};

struct Recommendation {
  std::vector<ScopeRecommendation> scopes;  // in order of first appearance
  std::vector<AcrossRanking> across;        // peak RSS, held RSS, time (where more than one scope)
};

Recommendation recommend(const Model& model);

// Compares two figures' repetitions: which one is better beyond noise, if either.
Certainty separation(const Spread& better, const Spread& worse, bool lower_is_better);

}  // namespace allocmark::results
