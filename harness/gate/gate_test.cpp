// The gate's statistics and rule on hand-made runs whose verdicts are worked out by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/gate/baseline.h"
#include "harness/gate/mann_whitney.h"
#include "harness/gate/verdict.h"

using namespace allocmark::gate;

namespace {

constexpr double MiB = 1024.0 * 1024.0;

std::vector<double> mib(std::vector<double> v) {
  for (auto& x : v) x *= MiB;
  return v;
}

RunSummary run_with(const std::string& metric, std::vector<double> values, const std::string& env = "") {
  RunSummary r;
  r.machine = {{"cpu_model", "X"}, {"cpus_usable", 2}};
  GateCell c;
  c.allocator = "jemalloc";
  c.workload = "size_mix";
  c.threads = 2;
  c.phase = "churn";
  c.under_test = {{"env", {{"MALLOC_CONF", env}}}, {"version", "5.3.0"}};
  c.values[metric] = std::move(values);
  r.cells.push_back(c);
  return r;
}

Verdict one(const RunSummary& b, const RunSummary& a, const std::string& metric = "peak_rss", RuleSettings rule = {}) {
  GateResult r = judge(b, a, {metric}, "", rule);
  EXPECT_EQ(r.verdicts.size(), 1u);
  return r.verdicts.empty() ? Verdict{} : r.verdicts[0];
}

}  // namespace

TEST(MannWhitney, ExactOneSidedPValues) {
  // 3 vs 3: U takes 0..9 with counts 1,1,2,3,3,3,3,2,1,1 over the 20 splits.
  EXPECT_DOUBLE_EQ(mann_whitney_greater_p({1, 2, 3}, {4, 5, 6}), 1.0 / 20);
  EXPECT_DOUBLE_EQ(mann_whitney_greater_p({1, 2, 4}, {3, 5, 6}), 2.0 / 20);   // U = 8
  EXPECT_DOUBLE_EQ(mann_whitney_greater_p({100, 101, 102}, {95, 112, 113}), 7.0 / 20);  // U = 6
  EXPECT_DOUBLE_EQ(mann_whitney_greater_p({4, 5, 6}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(smallest_reachable_p(3, 3), 0.05);
  EXPECT_DOUBLE_EQ(smallest_reachable_p(2, 2), 1.0 / 6);
  // Ties count half: identical samples are no evidence.
  EXPECT_GT(mann_whitney_greater_p({5, 5, 5}, {5, 5, 5}), 0.5);
  // Large samples use the normal approximation: 20 vs 20 completely separated is overwhelming.
  std::vector<double> lo, hi;
  for (int i = 0; i < 20; ++i) {
    lo.push_back(i);
    hi.push_back(100 + i);
  }
  EXPECT_LT(mann_whitney_greater_p(lo, hi), 1e-6);
}

TEST(Rule, ClearSeparatedRegressionTrips) {
  Verdict v = one(run_with("peak_rss", mib({100, 101, 102})), run_with("peak_rss", mib({111, 112, 113})));
  EXPECT_EQ(v.verdict, "regressed") << v.reason;
  EXPECT_NEAR(v.change, 11.0 / 101, 1e-9);
  EXPECT_DOUBLE_EQ(v.band, 0.05);  // tolerance dominates a tight baseline (3 x 1/101 < 5%)
}

TEST(Rule, NoiseInsideTheBandPasses) {
  EXPECT_EQ(one(run_with("peak_rss", mib({100, 101, 102})), run_with("peak_rss", mib({100.5, 101, 104}))).verdict, "pass");
}

TEST(Rule, OverlappingRepetitionsAreNoEvidence) {
  Verdict v = one(run_with("peak_rss", mib({100, 101, 102})), run_with("peak_rss", mib({95, 112, 113})));
  EXPECT_EQ(v.verdict, "pass");
  EXPECT_NE(v.reason.find("overlap"), std::string::npos) << v.reason;
}

TEST(Rule, LessThanAHugePageIsNotAMemoryRegression) {
  Verdict v = one(run_with("peak_rss", mib({10, 10.1, 10.2})), run_with("peak_rss", mib({11, 11.1, 11.2})));
  EXPECT_EQ(v.verdict, "pass");
  EXPECT_NE(v.reason.find("huge page"), std::string::npos);
}

TEST(Rule, ThroughputRegressesDownwardAndImprovesUpward) {
  EXPECT_EQ(one(run_with("ops_per_s", {100, 101, 102}), run_with("ops_per_s", {80, 81, 82}), "ops_per_s").verdict, "regressed");
  EXPECT_EQ(one(run_with("ops_per_s", {100, 101, 102}), run_with("ops_per_s", {120, 121, 122}), "ops_per_s").verdict, "improved");
  EXPECT_EQ(one(run_with("peak_rss", mib({100, 101, 102})), run_with("peak_rss", mib({80, 81, 82}))).verdict, "improved");
}

TEST(Rule, EachNotComparableCauseSaysWhich) {
  Verdict few = one(run_with("peak_rss", mib({100, 101})), run_with("peak_rss", mib({150, 151, 152})));
  EXPECT_EQ(few.verdict, "not comparable");
  EXPECT_NE(few.reason.find("fewer than 3 repetitions"), std::string::npos);
  Verdict noisy = one(run_with("peak_rss", mib({100, 120, 140})), run_with("peak_rss", mib({150, 151, 152})));
  EXPECT_EQ(noisy.verdict, "not comparable");
  EXPECT_NE(noisy.reason.find("spread is too wide"), std::string::npos);

  RunSummary other = run_with("peak_rss", mib({111, 112, 113}));
  other.machine["cpu_model"] = "Y";
  GateResult r = judge(run_with("peak_rss", mib({100, 101, 102})), other, {"peak_rss"}, "", {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.verdicts[0].verdict, "not comparable");
  EXPECT_NE(r.verdicts[0].reason.find("cpu_model"), std::string::npos);
  RuleSettings allow;
  allow.allow_mismatch = true;
  r = judge(run_with("peak_rss", mib({100, 101, 102})), other, {"peak_rss"}, "", allow);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.verdicts[0].verdict, "regressed");
}

TEST(Rule, ChangesUnderTestAreListedAndStrictRefusesThem) {
  RunSummary before = run_with("peak_rss", mib({100, 101, 102}), "");
  RunSummary after = run_with("peak_rss", mib({100, 101, 102}), "background_thread:true");
  Verdict v = one(before, after);
  EXPECT_EQ(v.verdict, "pass");
  EXPECT_TRUE(v.changed.contains("env"));
  RuleSettings strict;
  strict.strict = true;
  EXPECT_EQ(one(before, after, "peak_rss", strict).verdict, "not comparable");
}

TEST(Rule, AMissingCellFailsTheGate) {
  RunSummary empty;
  empty.machine = run_with("peak_rss", {}).machine;
  GateResult r = judge(run_with("peak_rss", mib({100, 101, 102})), empty, {"peak_rss"}, "", {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.verdicts[0].verdict, "missing");
}

TEST(Rule, ARerunKeepsOnlyTheFlagsItRepeats) {
  RunSummary base = run_with("peak_rss", mib({100, 101, 102}));
  GateResult first = judge(base, run_with("peak_rss", mib({111, 112, 113})), {"peak_rss"}, "", {});
  ASSERT_EQ(first.verdicts[0].verdict, "regressed");
  EXPECT_EQ(first.verdicts[0].allocator, "jemalloc");
  EXPECT_EQ(first.verdicts[0].threads, 2);

  GateResult confirmed = confirm(first, judge(base, run_with("peak_rss", mib({110, 112, 114})), {"peak_rss"}, "", {}), {});
  EXPECT_EQ(confirmed.exit_code, 1);
  EXPECT_EQ(confirmed.verdicts[0].verdict, "regressed");
  EXPECT_NE(confirmed.verdicts[0].reason.find("confirmed by the rerun"), std::string::npos);

  // The rerun is back inside the band: a one-off, reported as such, and the gate passes.
  GateResult refuted = confirm(first, judge(base, run_with("peak_rss", mib({100, 101.5, 102})), {"peak_rss"}, "", {}), {});
  EXPECT_EQ(refuted.exit_code, 0);
  EXPECT_EQ(refuted.verdicts[0].verdict, "pass");
  EXPECT_NE(refuted.verdicts[0].reason.find("not confirmed"), std::string::npos) << refuted.verdicts[0].reason;
  EXPECT_NE(refuted.summary.find("PASS"), std::string::npos);

  // A rerun that moved the other way does not confirm either; nor does one that lacks the cell.
  EXPECT_EQ(confirm(first, judge(base, run_with("peak_rss", mib({80, 81, 82})), {"peak_rss"}, "", {}), {}).verdicts[0].verdict, "pass");
  RunSummary empty;
  empty.machine = base.machine;
  EXPECT_EQ(confirm(first, judge(base, empty, {"peak_rss"}, "", {}), {}).verdicts[0].verdict, "pass");
}

TEST(Baseline, RoundTripsAndRejectsTruncatedFiles) {
  std::string path = ::testing::TempDir() + "/baseline.json";
  std::string text = baseline_json(run_with("peak_rss", mib({100, 101, 102})), "dir").dump(1);
  std::ofstream(path) << text;
  RunSummary back = read_baseline(path);
  ASSERT_EQ(back.cells.size(), 1u);
  EXPECT_EQ(back.cells[0].values["peak_rss"].size(), 3u);
  std::ofstream(path) << text.substr(0, text.size() / 2);
  EXPECT_THROW(read_baseline(path), GateError);
  std::ofstream(path) << R"({"allocmark_baseline": 1, "machine": {}, "cells": [{"allocator": "a"}]})";
  try {
    read_baseline(path);
    FAIL();
  } catch (const GateError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed baseline"), std::string::npos) << e.what();
  }
}
