// Change points in a history (issue 44; docs/validation.md "Change points in a history"): where a
// metric's series over commits stepped, found offline by E-divisive with means (Matteson & James
// 2014) as MongoDB's signal-processing-algorithms and Apache Otava (Hunter) run it: the energy
// statistic with alpha = 1 picks the best split of a window, splits are added one at a time while a
// permutation test says the best remaining one is real, and the permutations come from a fixed seed
// so the same history always gives the same answer. Pure: figures in, change points out.
//
// What it reports (measured in docs/validation.md): a step at its commit (a +3% step at 1% spread,
// 5 repetitions a commit, at most a commit or two off, reliably once about 5 commits follow it); a
// slow drift as a staircase of steps inside it whose sizes compound to the drift; nothing in a clean
// series but for about alpha of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace allocmark::history {

// One commit's repetitions of one metric, the series in commit order (oldest first).
struct SeriesPoint {
  std::string commit;
  std::vector<double> values;
};

struct ChangePointOptions {
  double alpha = 0.01;            // a split is kept when the permutation p-value is below this
  int permutations = 199;         // the smallest reachable p is 1 / (permutations + 1)
  std::size_t min_segment = 3;    // commits on each side of a split, at least (2 is used if smaller)
  std::uint64_t seed = 1;         // the permutations' and the bootstrap's random stream
  double min_relative_step = 0.0; // significant steps smaller than this (|after/before - 1|) are dropped
};

struct ChangePoint {
  std::size_t index;                   // first point of the new segment
  std::string from_commit, to_commit;  // the commit range: last point before, first point after
  // Medians of the per-commit medians of the segments on either side (to the neighbouring change
  // points); relative_step = after/before - 1 (NaN when the before median is 0).
  double before_median, after_median, relative_step;
  // A 95% interval of relative_step: a two-level bootstrap that resamples the commits of each
  // segment and then each drawn commit's repetitions, so both commit-to-commit and run-to-run
  // noise widen it (kConfidenceLevel).
  double ci_low, ci_high;
  double p_value;  // the permutation test's, (exceeding + 1) / (permutations + 1)
};

inline constexpr double kConfidenceLevel = 0.95;

// The fewest commits a series needs before find_change_points can split it (shorter: no change).
std::size_t min_commits(const ChangePointOptions& options = {});

// The change points of a series, in index order. Points without values are not allowed (they
// throw std::invalid_argument): the caller leaves out commits it has no figure for.
std::vector<ChangePoint> find_change_points(const std::vector<SeriesPoint>& series,
                                            const ChangePointOptions& options = {});

// The last stable segment's start (for the gate's creep check): the index after the last change
// point, 0 if none.
std::size_t last_stable_segment(const std::vector<SeriesPoint>& series,
                                const ChangePointOptions& options = {});

}  // namespace allocmark::history
