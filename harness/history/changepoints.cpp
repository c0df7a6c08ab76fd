// E-divisive with means over per-commit medians (changepoints.h).
//
// Why medians of each commit's repetitions, not every repetition: the null hypothesis a history
// can test is "these commits are exchangeable", not "these repetitions are": repetitions of one
// commit share its build, its machine state and its moment, so commits differ by more than their
// repetitions spread. A statistic over every repetition with repetitions permuted takes that
// commit-to-commit noise for steps (false changes); over every repetition with whole commits
// permuted it is valid but costs (commits x repetitions)^2 per split for little gain, and one
// outlying repetition pulls it. The median of each commit keeps the commit as the unit, shrinks the
// run-to-run spread by about sqrt(repetitions), ignores a stray repetition, and makes a split
// O(commits^2). docs/validation.md (issue 44) measures the choice on series resampled from real
// peak RSS: a +3% step at 1% spread is found within 5 commits and 100 clean commits give no change.
// The repetitions still matter: the confidence interval of each step resamples them.
//
// Cost: O(n^2) per window scan, times (permutations + 1) per change point found, plus one scan
// that stops early for the last, insignificant candidate, plus 1000 bootstrap draws per change
// point. Measured (-O2, this 2-core machine, 5 repetitions, 5 steps): 100 commits 48 ms, 300
// commits 0.2 s, 500 commits 0.43 s.
#include "harness/history/changepoints.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace allocmark::history {
namespace {

// splitmix64: the permutations must be the same on every standard library, and std::shuffle's
// draws are implementation-defined.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n): the high half of a 128-bit product (Lemire), bias below 2^-32 for our n.
  std::size_t below(std::size_t n) {
    return static_cast<std::size_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
  template <typename T>
  void shuffle(T* first, std::size_t n) {
    for (std::size_t i = n; i > 1; --i) std::swap(first[i - 1], first[below(i)]);
  }

 private:
  std::uint64_t state_;
};

double median_in_place(std::vector<double>& v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

std::vector<double> commit_medians(const std::vector<SeriesPoint>& series) {
  std::vector<double> medians;
  medians.reserve(series.size());
  for (const auto& point : series) {
    if (point.values.empty())
      throw std::invalid_argument("change points: commit " + point.commit + " has no values");
    for (double v : point.values)
      if (!std::isfinite(v))
        throw std::invalid_argument("change points: commit " + point.commit + " has a value that is not finite");
    std::vector<double> copy = point.values;
    medians.push_back(median_in_place(copy));
  }
  return medians;
}

// Szekely-Rizzo's energy distance of X (n points) and Y (m points) scaled by nm/(n+m), the Q-hat
// of Matteson & James with alpha = 1, from the sums of |a - b| across and within the two sides.
double q_hat(double across, double within_x, double within_y, double n, double m) {
  double e = 2.0 * across / (n * m);
  if (n > 1) e -= within_x / (n * (n - 1) / 2);
  if (m > 1) e -= within_y / (m * (m - 1) / 2);
  return n * m / (n + m) * e;
}

struct Split {
  std::size_t index = 0;  // first point of the right side, within the window
  double q = -std::numeric_limits<double>::infinity();
};

// The split of v[0, len) with the largest Q-hat, both sides at least min_segment long. Moving one
// point at a time from the right side to the left updates the three sums with two O(len) sums, so
// every split is scored in O(len^2) in all, without the len x len distance matrix.
Split best_split(const double* v, std::size_t len, std::size_t min_segment) {
  Split best;
  if (len < 2 * min_segment) return best;
  double across = 0, within_x = 0, within_y = 0;
  for (std::size_t i = 0; i < len; ++i)
    for (std::size_t j = i + 1; j < len; ++j) within_y += std::fabs(v[i] - v[j]);
  for (std::size_t t = 0; t + min_segment < len; ++t) {
    double to_left = 0, to_right = 0;
    for (std::size_t i = 0; i < t; ++i) to_left += std::fabs(v[i] - v[t]);
    for (std::size_t j = t + 1; j < len; ++j) to_right += std::fabs(v[j] - v[t]);
    within_x += to_left;
    within_y -= to_right;
    across += to_right - to_left;
    const std::size_t tau = t + 1;
    if (tau < min_segment) continue;
    const double q = q_hat(across, within_x, within_y, double(tau), double(len - tau));
    if (q > best.q) best = {tau, q};
  }
  return best;
}

// Window bounds: 0, the change points found so far, the series' end.
std::vector<std::size_t> windows_of(const std::vector<std::size_t>& cuts, std::size_t n) {
  std::vector<std::size_t> bounds{0};
  bounds.insert(bounds.end(), cuts.begin(), cuts.end());
  bounds.push_back(n);
  return bounds;
}

// The best split over every window, its index in series coordinates.
Split best_candidate(const std::vector<double>& v, const std::vector<std::size_t>& bounds,
                     std::size_t min_segment) {
  Split best;
  for (std::size_t w = 0; w + 1 < bounds.size(); ++w) {
    Split s = best_split(v.data() + bounds[w], bounds[w + 1] - bounds[w], min_segment);
    if (s.q > best.q) best = {bounds[w] + s.index, s.q};
  }
  return best;
}

// The permutation test of Matteson & James as ecp and signal-processing-algorithms run it: shuffle
// the points inside each window found so far, take the best Q-hat over all windows, and count how
// often chance does at least as well as the candidate. Stops as soon as the count rules the
// candidate out, so the last, insignificant candidate costs a few permutations, not all.
double permutation_p(const std::vector<double>& v, const std::vector<std::size_t>& bounds,
                     double observed, const ChangePointOptions& options, Random& random) {
  const int permutations = std::max(options.permutations, 1);
  const double rule_out = options.alpha * (permutations + 1);
  const double tie = observed - 1e-12 * std::fabs(observed);  // rounding never counts as a win
  int at_least = 0;
  std::vector<double> shuffled = v;
  for (int p = 0; p < permutations; ++p) {
    for (std::size_t w = 0; w + 1 < bounds.size(); ++w)
      random.shuffle(shuffled.data() + bounds[w], bounds[w + 1] - bounds[w]);
    if (best_candidate(shuffled, bounds, options.min_segment).q >= tie) ++at_least;
    if (at_least + 1 >= rule_out) return 1.0;
  }
  return (at_least + 1.0) / (permutations + 1.0);
}

struct Cut {
  std::size_t index;
  double p_value;
};

// Splits added one at a time, the best over all windows first, while each is significant.
std::vector<Cut> divide(const std::vector<double>& v, const ChangePointOptions& options) {
  std::vector<Cut> cuts;
  Random random(options.seed);
  for (;;) {
    std::vector<std::size_t> indices;
    for (const auto& c : cuts) indices.push_back(c.index);
    const auto bounds = windows_of(indices, v.size());
    const Split candidate = best_candidate(v, bounds, options.min_segment);
    if (!std::isfinite(candidate.q)) break;
    const double p = permutation_p(v, bounds, candidate.q, options, random);
    if (!(p < options.alpha)) break;
    cuts.insert(std::upper_bound(cuts.begin(), cuts.end(), candidate.index,
                                 [](std::size_t i, const Cut& c) { return i < c.index; }),
                Cut{candidate.index, p});
  }
  return cuts;
}

double median_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  std::vector<double> part(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to));
  return median_in_place(part);
}

double relative(double before, double after) {
  if (before == 0) return after == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  return after / before - 1;
}

// The step of each cut between its neighbouring segments (ignoring those cuts it drops).
std::vector<double> steps_of(const std::vector<double>& v, const std::vector<Cut>& cuts) {
  std::vector<double> steps;
  for (std::size_t k = 0; k < cuts.size(); ++k) {
    const std::size_t from = k == 0 ? 0 : cuts[k - 1].index;
    const std::size_t to = k + 1 == cuts.size() ? v.size() : cuts[k + 1].index;
    steps.push_back(relative(median_of(v, from, cuts[k].index), median_of(v, cuts[k].index, to)));
  }
  return steps;
}

// Significant but too small to matter: the smallest goes first and its neighbours merge, since
// a step's size depends on the segments beside it.
void drop_small_steps(const std::vector<double>& v, std::vector<Cut>& cuts, double min_step) {
  while (!cuts.empty() && min_step > 0) {
    const auto steps = steps_of(v, cuts);
    std::size_t smallest = 0;
    for (std::size_t k = 1; k < steps.size(); ++k)
      if (std::fabs(steps[k]) < std::fabs(steps[smallest])) smallest = k;
    if (!(std::fabs(steps[smallest]) < min_step)) return;  // NaN (a zero before) stays
    cuts.erase(cuts.begin() + static_cast<std::ptrdiff_t>(smallest));
  }
}

// One bootstrap draw of a segment's median: commits drawn with replacement, then each drawn
// commit's repetitions drawn with replacement, the median of the drawn commits' medians.
double resampled_median(const std::vector<SeriesPoint>& series, std::size_t from, std::size_t to,
                        Random& random, std::vector<double>& scratch) {
  std::vector<double> medians;
  medians.reserve(to - from);
  for (std::size_t k = from; k < to; ++k) {
    const auto& values = series[from + random.below(to - from)].values;
    scratch.resize(values.size());
    for (double& x : scratch) x = values[random.below(values.size())];
    medians.push_back(median_in_place(scratch));
  }
  return median_in_place(medians);
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double at = q * double(sorted.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(at));
  const std::size_t upper = std::min(lower + 1, sorted.size() - 1);
  return sorted[lower] + (at - double(lower)) * (sorted[upper] - sorted[lower]);
}

// kConfidenceLevel percentile interval of the relative step over 1000 resamples.
std::pair<double, double> step_interval(const std::vector<SeriesPoint>& series, std::size_t from,
                                        std::size_t at, std::size_t to, Random& random) {
  constexpr int kResamples = 1000;
  std::vector<double> steps, scratch;
  steps.reserve(kResamples);
  for (int r = 0; r < kResamples; ++r) {
    const double before = resampled_median(series, from, at, random, scratch);
    const double after = resampled_median(series, at, to, random, scratch);
    const double step = relative(before, after);
    if (!std::isnan(step)) steps.push_back(step);
  }
  if (steps.empty()) return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  std::sort(steps.begin(), steps.end());
  const double tail = (1 - kConfidenceLevel) / 2;
  return {quantile_sorted(steps, tail), quantile_sorted(steps, 1 - tail)};
}

std::vector<ChangePoint> describe(const std::vector<SeriesPoint>& series, const std::vector<double>& v,
                                  const std::vector<Cut>& cuts, std::uint64_t seed) {
  // Its own stream, so the intervals do not depend on how many permutations the search drew.
  Random random(seed ^ 0x5bd1e9955bd1e995ULL);
  std::vector<ChangePoint> points;
  for (std::size_t k = 0; k < cuts.size(); ++k) {
    const std::size_t from = k == 0 ? 0 : cuts[k - 1].index;
    const std::size_t at = cuts[k].index;
    const std::size_t to = k + 1 == cuts.size() ? v.size() : cuts[k + 1].index;
    ChangePoint cp{};
    cp.index = at;
    cp.from_commit = series[at - 1].commit;
    cp.to_commit = series[at].commit;
    cp.before_median = median_of(v, from, at);
    cp.after_median = median_of(v, at, to);
    cp.relative_step = relative(cp.before_median, cp.after_median);
    std::tie(cp.ci_low, cp.ci_high) = step_interval(series, from, at, to, random);
    cp.p_value = cuts[k].p_value;
    points.push_back(std::move(cp));
  }
  return points;
}

}  // namespace

std::size_t min_commits(const ChangePointOptions& options) {
  // A side of one commit has no within-side spread to weigh a split against.
  return 2 * std::max<std::size_t>(options.min_segment, 2);
}

std::vector<ChangePoint> find_change_points(const std::vector<SeriesPoint>& series,
                                            const ChangePointOptions& options) {
  const std::vector<double> medians = commit_medians(series);
  ChangePointOptions used = options;
  used.min_segment = min_commits(options) / 2;
  if (medians.size() < min_commits(options)) return {};
  std::vector<Cut> cuts = divide(medians, used);
  drop_small_steps(medians, cuts, used.min_relative_step);
  return describe(series, medians, cuts, used.seed);
}

std::size_t last_stable_segment(const std::vector<SeriesPoint>& series,
                                const ChangePointOptions& options) {
  const auto points = find_change_points(series, options);
  return points.empty() ? 0 : points.back().index;
}

}  // namespace allocmark::history
