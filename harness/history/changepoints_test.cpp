// Change points in a history (changepoints.h): series made here with a fixed generator, so each
// test sees the same figures on every machine and standard library.
#include "harness/history/changepoints.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace allocmark::history {
namespace {

// Normal noise by Box-Muller over mt19937_64, whose output the standard fixes (the standard
// library's normal_distribution is not).
class Noise {
 public:
  explicit Noise(std::uint64_t seed) : engine_(seed) {}
  double normal() {
    const double u1 = (double(engine_() >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = (double(engine_() >> 11) + 0.5) / 9007199254740992.0;
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 engine_;
};

// levels[i] is commit i's true value; each of its repetitions spreads `spread` (relative sd).
std::vector<SeriesPoint> series_of(const std::vector<double>& levels, double spread, int reps,
                                   std::uint64_t seed) {
  Noise noise(seed);
  std::vector<SeriesPoint> series;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    SeriesPoint point{"c" + std::to_string(i), {}};
    for (int r = 0; r < reps; ++r) point.values.push_back(levels[i] * (1 + spread * noise.normal()));
    series.push_back(std::move(point));
  }
  return series;
}

// 1e8 (a peak RSS of about 100 MB) for n commits, times factor from commit `at` on.
std::vector<double> step_levels(std::size_t n, std::size_t at, double factor) {
  std::vector<double> levels(n, 1e8);
  for (std::size_t i = at; i < n; ++i) levels[i] *= factor;
  return levels;
}

TEST(ChangePoints, CleanSeriesHasNoChangePoint) {
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto series = series_of(std::vector<double>(100, 1e8), 0.01, 5, seed);
    EXPECT_TRUE(find_change_points(series).empty()) << "seed " << seed;
    EXPECT_EQ(last_stable_segment(series), 0u);
  }
}

TEST(ChangePoints, SingleStepIsFoundWhereItIsWithItsSize) {
  const auto series = series_of(step_levels(60, 30, 1.10), 0.01, 5, 7);
  const auto points = find_change_points(series);
  ASSERT_EQ(points.size(), 1u);
  const ChangePoint& cp = points[0];
  EXPECT_EQ(cp.index, 30u);
  EXPECT_EQ(cp.from_commit, "c29");
  EXPECT_EQ(cp.to_commit, "c30");
  EXPECT_NEAR(cp.relative_step, 0.10, 0.01);
  EXPECT_NEAR(cp.after_median / cp.before_median - 1, cp.relative_step, 1e-12);
  EXPECT_LE(cp.ci_low, 0.10);
  EXPECT_GE(cp.ci_high, 0.10);
  EXPECT_LT(cp.ci_high - cp.ci_low, 0.02);  // repetitions spread 1%: the interval is narrow
  EXPECT_LT(cp.p_value, 0.01);
  EXPECT_EQ(last_stable_segment(series), 30u);
}

TEST(ChangePoints, TwoStepsAreBothFound) {
  std::vector<double> levels = step_levels(70, 20, 1.10);
  for (std::size_t i = 45; i < levels.size(); ++i) levels[i] *= 0.92;
  const auto points = find_change_points(series_of(levels, 0.01, 5, 11));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].index, 20u);
  EXPECT_EQ(points[1].index, 45u);
  EXPECT_NEAR(points[0].relative_step, 0.10, 0.01);
  EXPECT_NEAR(points[1].relative_step, -0.08, 0.01);
  EXPECT_LT(points[1].ci_low, points[1].ci_high);
}

// A slow drift has no one step: E-divisive cuts it into a staircase of steps inside the drift,
// each a real difference between the segments beside it, which together add up to the drift. So
// a drift is reported, where it happened, rather than missed (docs/validation.md, issue 44).
TEST(ChangePoints, SlowDriftIsReportedAsStepsInsideItThatAddUpToIt) {
  std::vector<double> levels(100, 1e8);
  for (std::size_t i = 30; i < 100; ++i) levels[i] *= 1 + 0.005 * double(std::min<std::size_t>(i - 29, 40));
  const auto points = find_change_points(series_of(levels, 0.01, 5, 5));
  ASSERT_FALSE(points.empty());
  double total = 1;
  for (const auto& cp : points) {
    EXPECT_GE(cp.index, 30u - 3);
    EXPECT_LE(cp.index, 70u + 3);
    EXPECT_GT(cp.relative_step, 0);
    total *= 1 + cp.relative_step;
  }
  EXPECT_NEAR(total, 1.20, 0.04);
}

TEST(ChangePoints, IdenticalValuesDoNotDivideByZero) {
  std::vector<SeriesPoint> flat;
  for (int i = 0; i < 40; ++i) flat.push_back({"c" + std::to_string(i), {100.0, 100.0, 100.0}});
  EXPECT_TRUE(find_change_points(flat).empty());

  std::vector<SeriesPoint> zeros = flat;
  for (auto& p : zeros) p.values = {0.0, 0.0};
  EXPECT_TRUE(find_change_points(zeros).empty());

  // Exact values on both sides of an exact step: found, with an interval of that one value.
  std::vector<SeriesPoint> step = flat;
  for (int i = 20; i < 40; ++i) step[i].values = {110.0, 110.0, 110.0};
  const auto points = find_change_points(step);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].index, 20u);
  EXPECT_NEAR(points[0].relative_step, 0.10, 1e-12);
  EXPECT_EQ(points[0].ci_low, points[0].relative_step);
  EXPECT_EQ(points[0].ci_high, points[0].relative_step);
}

TEST(ChangePoints, FewerThanTwoSegmentsOfPointsGiveNone) {
  ChangePointOptions options;
  options.min_segment = 4;
  const auto series = series_of(step_levels(7, 4, 2.0), 0.01, 5, 3);
  EXPECT_TRUE(find_change_points(series, options).empty());
  EXPECT_TRUE(find_change_points({}).empty());
  EXPECT_EQ(last_stable_segment({}), 0u);
}

TEST(ChangePoints, SameSeedGivesTheSameResult) {
  std::vector<double> levels = step_levels(80, 25, 1.04);
  for (std::size_t i = 55; i < levels.size(); ++i) levels[i] *= 1.06;
  const auto series = series_of(levels, 0.01, 5, 13);
  ChangePointOptions options;
  options.seed = 42;
  const auto a = find_change_points(series, options);
  const auto b = find_change_points(series, options);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].index, b[k].index);
    EXPECT_EQ(a[k].p_value, b[k].p_value);
    EXPECT_EQ(a[k].ci_low, b[k].ci_low);
    EXPECT_EQ(a[k].ci_high, b[k].ci_high);
  }
}

TEST(ChangePoints, StepsBelowTheMinimumAreDroppedAndTheirSegmentsMerge) {
  std::vector<double> levels = step_levels(80, 25, 1.03);
  for (std::size_t i = 55; i < levels.size(); ++i) levels[i] *= 1.10;
  const auto series = series_of(levels, 0.005, 5, 17);
  ASSERT_EQ(find_change_points(series).size(), 2u);
  ChangePointOptions options;
  options.min_relative_step = 0.05;
  const auto points = find_change_points(series, options);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].index, 55u);
  EXPECT_NEAR(points[0].before_median, 1.03e8, 0.01e8);  // the merged segment's median
}

TEST(ChangePoints, ACommitWithoutValuesIsRefused) {
  std::vector<SeriesPoint> series(10, SeriesPoint{"c", {1.0}});
  series[4].values.clear();
  EXPECT_THROW(find_change_points(series), std::invalid_argument);
  series[4].values = {std::nan("")};
  EXPECT_THROW(find_change_points(series), std::invalid_argument);
}

}  // namespace
}  // namespace allocmark::history
