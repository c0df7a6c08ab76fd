// The gate's statistics and rule on hand-made runs whose verdicts are worked out by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "harness/gate/baseline.h"
#include "harness/gate/confirm.h"
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

Verdict one(const RunSummary& b, const RunSummary& a, const std::string& metric = "peak_rss_bytes", RuleSettings rule = {}) {
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
  Verdict v = one(run_with("peak_rss_bytes", mib({100, 101, 102})), run_with("peak_rss_bytes", mib({111, 112, 113})));
  EXPECT_EQ(v.verdict, "regressed") << v.reason;
  EXPECT_NEAR(v.change, 11.0 / 101, 1e-9);
  EXPECT_DOUBLE_EQ(v.band, 0.05);  // tolerance dominates a tight baseline (3 x 1/101 < 5%)
}

TEST(Rule, NoiseInsideTheBandPasses) {
  EXPECT_EQ(one(run_with("peak_rss_bytes", mib({100, 101, 102})), run_with("peak_rss_bytes", mib({100.5, 101, 104}))).verdict, "pass");
}

TEST(Rule, OverlappingRepetitionsAreNoEvidence) {
  Verdict v = one(run_with("peak_rss_bytes", mib({100, 101, 102})), run_with("peak_rss_bytes", mib({95, 112, 113})));
  EXPECT_EQ(v.verdict, "pass");
  EXPECT_NE(v.reason.find("overlap"), std::string::npos) << v.reason;
}

TEST(Rule, LessThanAHugePageIsNotAMemoryRegression) {
  Verdict v = one(run_with("peak_rss_bytes", mib({10, 10.1, 10.2})), run_with("peak_rss_bytes", mib({11, 11.1, 11.2})));
  EXPECT_EQ(v.verdict, "pass");
  EXPECT_NE(v.reason.find("huge page"), std::string::npos);
}

TEST(Rule, HugePagesFromNoneAreJudgedByTheAbsoluteFloor) {
  const std::string huge = "anon_huge_bytes";
  // A phase that held no huge page and now holds 100 MiB of them moved beyond every band.
  Verdict v = one(run_with(huge, {0, 0, 0}), run_with(huge, mib({100, 102, 104})), huge);
  EXPECT_EQ(v.verdict, "regressed") << v.reason;
  EXPECT_EQ(one(run_with(huge, {0, 0, 0}), run_with(huge, {0, 0, 0}), huge).verdict, "pass");
  // Less than one huge page more is not a memory regression, from none or not.
  v = one(run_with(huge, {0, 0, 0}), run_with(huge, mib({1, 1, 1})), huge);
  EXPECT_EQ(v.verdict, "pass");
  EXPECT_NE(v.reason.find("huge page"), std::string::npos) << v.reason;
  EXPECT_EQ(one(run_with(huge, mib({100, 102, 104})), run_with(huge, {0, 0, 0}), huge).verdict, "improved");
  EXPECT_EQ(one(run_with(huge, mib({100, 102, 104})), run_with(huge, mib({130, 132, 134})), huge).verdict, "regressed");
}

TEST(Rule, AThpAxisCellIgnoresTheMachinesThpModeButNotTheRestOfTheMachine) {
  // How the records say the cell got its mode, never its name: prctl for the axis' never.
  auto on = [](RunSummary r, const std::string& allocator, const std::string& thp) {
    r.cells[0].allocator = allocator;
    r.cells[0].thp_how = allocator.find("@thp=never") != std::string::npos ? "prctl" : "machine";
    r.machine["thp_enabled"] = thp;
    return r;
  };
  const RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  const RunSummary now = run_with("peak_rss_bytes", mib({100, 101, 102}));
  // The cell says its own mode (never: set per process): the machine's mode is no difference.
  EXPECT_EQ(one(on(base, "jemalloc@thp=never", "madvise"), on(now, "jemalloc@thp=never", "always")).verdict, "pass");
  // Off the axis the cell ran under the machine's mode: another mode is another machine.
  Verdict v = one(on(base, "jemalloc", "madvise"), on(now, "jemalloc", "always"));
  EXPECT_EQ(v.verdict, "not comparable");
  EXPECT_NE(v.reason.find("thp_enabled"), std::string::npos) << v.reason;
  // Any other difference still counts for axis cells.
  RunSummary other = on(now, "jemalloc@thp=never", "always");
  other.machine["cpu_model"] = "Y";
  v = one(on(base, "jemalloc@thp=never", "madvise"), other);
  EXPECT_EQ(v.verdict, "not comparable");
  EXPECT_NE(v.reason.find("cpu_model"), std::string::npos) << v.reason;
  EXPECT_EQ(v.reason.find("thp_enabled"), std::string::npos) << v.reason;
  // A cell named like the axis that ran under the machine's mode (a variant called g@thp=always,
  // from before such names were refused) is judged like its twin: the machine differs.
  RunSummary named_base = on(base, "g@thp=always", "madvise"), named_now = on(now, "g@thp=always", "always");
  ASSERT_EQ(named_base.cells[0].thp_how, "machine");
  v = one(named_base, named_now);
  EXPECT_EQ(v.verdict, "not comparable");
  EXPECT_EQ(v.verdict, one(on(base, "g", "madvise"), on(now, "g", "always")).verdict);
  // Only when both runs set the mode themselves: a baseline that does not say how counts as machine.
  RunSummary unknown = on(base, "jemalloc@thp=never", "madvise");
  unknown.cells[0].thp_how.clear();
  EXPECT_EQ(one(unknown, on(now, "jemalloc@thp=never", "always")).verdict, "not comparable");
}

TEST(Rule, ThroughputRegressesDownwardAndImprovesUpward) {
  EXPECT_EQ(one(run_with("ops_per_s", {100, 101, 102}), run_with("ops_per_s", {80, 81, 82}), "ops_per_s").verdict, "regressed");
  EXPECT_EQ(one(run_with("ops_per_s", {100, 101, 102}), run_with("ops_per_s", {120, 121, 122}), "ops_per_s").verdict, "improved");
  EXPECT_EQ(one(run_with("peak_rss_bytes", mib({100, 101, 102})), run_with("peak_rss_bytes", mib({80, 81, 82}))).verdict, "improved");
}

TEST(Rule, EachNotComparableCauseSaysWhich) {
  Verdict few = one(run_with("peak_rss_bytes", mib({100, 101})), run_with("peak_rss_bytes", mib({150, 151, 152})));
  EXPECT_EQ(few.verdict, "not comparable");
  EXPECT_NE(few.reason.find("fewer than 3 repetitions"), std::string::npos);
  Verdict noisy = one(run_with("peak_rss_bytes", mib({100, 120, 140})), run_with("peak_rss_bytes", mib({150, 151, 152})));
  EXPECT_EQ(noisy.verdict, "not comparable");
  EXPECT_NE(noisy.reason.find("spread is too wide"), std::string::npos);

  RunSummary other = run_with("peak_rss_bytes", mib({111, 112, 113}));
  other.machine["cpu_model"] = "Y";
  GateResult r = judge(run_with("peak_rss_bytes", mib({100, 101, 102})), other, {"peak_rss_bytes"}, "", {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.verdicts[0].verdict, "not comparable");
  EXPECT_NE(r.verdicts[0].reason.find("cpu_model"), std::string::npos);
  RuleSettings allow;
  allow.allow_mismatch = true;
  r = judge(run_with("peak_rss_bytes", mib({100, 101, 102})), other, {"peak_rss_bytes"}, "", allow);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.verdicts[0].verdict, "regressed");
}

TEST(Rule, ChangesUnderTestAreListedAndStrictRefusesThem) {
  RunSummary before = run_with("peak_rss_bytes", mib({100, 101, 102}), "");
  RunSummary after = run_with("peak_rss_bytes", mib({100, 101, 102}), "background_thread:true");
  Verdict v = one(before, after);
  EXPECT_EQ(v.verdict, "pass");
  EXPECT_TRUE(v.changed.contains("env"));
  RuleSettings strict;
  strict.strict = true;
  EXPECT_EQ(one(before, after, "peak_rss_bytes", strict).verdict, "not comparable");
}

TEST(Rule, AMissingCellFailsTheGate) {
  RunSummary empty;
  empty.machine = run_with("peak_rss_bytes", {}).machine;
  GateResult r = judge(run_with("peak_rss_bytes", mib({100, 101, 102})), empty, {"peak_rss_bytes"}, "", {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.verdicts[0].verdict, "missing");
}

TEST(Rule, ARerunKeepsOnlyTheFlagsItRepeats) {
  RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  GateResult first = judge(base, run_with("peak_rss_bytes", mib({111, 112, 113})), {"peak_rss_bytes"}, "", {});
  ASSERT_EQ(first.verdicts[0].verdict, "regressed");
  EXPECT_EQ(first.verdicts[0].allocator, "jemalloc");
  EXPECT_EQ(first.verdicts[0].threads, 2);

  GateResult confirmed = confirm(first, judge(base, run_with("peak_rss_bytes", mib({110, 112, 114})), {"peak_rss_bytes"}, "", {}), {});
  EXPECT_EQ(confirmed.exit_code, 1);
  EXPECT_EQ(confirmed.verdicts[0].verdict, "regressed");
  EXPECT_NE(confirmed.verdicts[0].reason.find("confirmed by the rerun"), std::string::npos);

  // The rerun is back inside the band: a one-off, reported as such, and the gate passes.
  GateResult refuted = confirm(first, judge(base, run_with("peak_rss_bytes", mib({100, 101.5, 102})), {"peak_rss_bytes"}, "", {}), {});
  EXPECT_EQ(refuted.exit_code, 0);
  EXPECT_EQ(refuted.verdicts[0].verdict, "pass");
  EXPECT_NE(refuted.verdicts[0].reason.find("not confirmed"), std::string::npos) << refuted.verdicts[0].reason;
  EXPECT_NE(refuted.summary.find("PASS"), std::string::npos);

  // A rerun that moved the other way does not confirm either; nor does one that lacks the cell.
  EXPECT_EQ(confirm(first, judge(base, run_with("peak_rss_bytes", mib({80, 81, 82})), {"peak_rss_bytes"}, "", {}), {}).verdicts[0].verdict, "pass");
  RunSummary empty;
  empty.machine = base.machine;
  EXPECT_EQ(confirm(first, judge(base, empty, {"peak_rss_bytes"}, "", {}), {}).verdicts[0].verdict, "pass");
}

namespace {

// A reading of `now` as the gate makes it with --history: against the baseline, then for creep
// against `segment` (the first reading and a confirming rerun's alike).
GateResult read_with_history(const RunSummary& base, const RunSummary& now, const std::vector<double>& segment) {
  GateResult r = judge(base, now, {"peak_rss_bytes"}, "", {});
  judge_creep(r, now, {{"jemalloc size_mix t2 churn", "peak_rss_bytes", "0123456789abcdef", segment}}, {});
  return r;
}

}  // namespace

TEST(Rule, ACreepStandsOnlyWhereTheRerunShowsItAgainstTheSameSegment) {
  const RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  const std::vector<double> segment = mib({92, 92.5, 93, 92, 92.5, 93, 92.2, 92.7, 93.1});
  const GateResult first = read_with_history(base, run_with("peak_rss_bytes", mib({103, 103.5, 104})), segment);
  ASSERT_EQ(first.verdicts[0].verdict, "regressed");
  EXPECT_TRUE(first.verdicts[0].by_creep);

  const GateResult kept = confirm(first, read_with_history(base, run_with("peak_rss_bytes", mib({102, 103, 103.5})), segment));
  EXPECT_EQ(kept.exit_code, 1);
  EXPECT_NE(kept.verdicts[0].reason.find("; creep confirmed by the rerun: +"), std::string::npos) << kept.verdicts[0].reason;

  const GateResult cleared = confirm(first, read_with_history(base, run_with("peak_rss_bytes", mib({92.5, 93, 93.5})), segment));
  EXPECT_EQ(cleared.exit_code, 0);
  EXPECT_EQ(cleared.verdicts[0].verdict, "pass");
  EXPECT_FALSE(cleared.verdicts[0].by_creep);
  EXPECT_EQ(cleared.verdicts[0].reason.rfind("first run cumulative +", 0), 0u) << cleared.verdicts[0].reason;
  EXPECT_NE(cleared.verdicts[0].reason.find("creep not confirmed by the rerun"), std::string::npos);

  // A rerun that regresses against the baseline shows the creep too; one that lacks the cell does not.
  EXPECT_EQ(confirm(first, read_with_history(base, run_with("peak_rss_bytes", mib({112, 113, 114})), segment)).exit_code, 1);
  RunSummary empty;
  empty.machine = base.machine;
  EXPECT_EQ(confirm(first, read_with_history(base, empty, segment)).verdicts[0].verdict, "pass");
  // A creep whose cell --confirm could not rerun was not judged twice: not comparable, as a regression's.
  const GateResult refused = confirm(first, {}, {{"jemalloc size_mix t2", "the results ran another setup"}});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.verdicts[0].reason.rfind("first run cumulative +", 0), 0u) << refused.verdicts[0].reason;
  EXPECT_NE(refused.verdicts[0].reason.find("--confirm did not rerun it: the results ran another setup"), std::string::npos);
}

TEST(Rule, ABaselineFlagTheRerunClearsIsJudgedForCreepOnBothReadings) {
  const RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  const std::vector<double> segment = mib({92, 92.5, 93, 92, 92.5, 93, 92.2, 92.7, 93.1});
  // Regressed against the baseline at first (so creep does not turn it), inside the band on the rerun.
  const GateResult first = read_with_history(base, run_with("peak_rss_bytes", mib({110, 111, 112})), segment);
  ASSERT_EQ(first.verdicts[0].verdict, "regressed");
  ASSERT_FALSE(first.verdicts[0].by_creep);
  const GateResult crept = confirm(first, read_with_history(base, run_with("peak_rss_bytes", mib({103, 103.5, 104})), segment));
  EXPECT_EQ(crept.verdicts[0].verdict, "regressed");
  EXPECT_TRUE(crept.verdicts[0].by_creep);
  EXPECT_NE(crept.verdicts[0].reason.find("not confirmed by the rerun: pass +"), std::string::npos) << crept.verdicts[0].reason;
  EXPECT_NE(crept.verdicts[0].reason.find(", creep confirmed by the rerun: +"), std::string::npos) << crept.verdicts[0].reason;
  // Without a history's segment the same rerun clears it, as ever.
  const GateResult plain = judge(base, run_with("peak_rss_bytes", mib({110, 111, 112})), {"peak_rss_bytes"}, "", {});
  EXPECT_EQ(confirm(plain, judge(base, run_with("peak_rss_bytes", mib({103, 103.5, 104})), {"peak_rss_bytes"}, "", {})).exit_code, 0);
}

TEST(Baseline, RoundTripsAndRejectsTruncatedFiles) {
  std::string path = ::testing::TempDir() + "/RoundTrips-baseline.json";
  std::string text = baseline_json(run_with("peak_rss_bytes", mib({100, 101, 102})), "dir").dump(1);
  std::ofstream(path) << text;
  RunSummary back = read_baseline(path);
  ASSERT_EQ(back.cells.size(), 1u);
  EXPECT_EQ(back.cells[0].values["peak_rss_bytes"].size(), 3u);
  std::ofstream(path) << text.substr(0, text.size() / 2);
  EXPECT_THROW(read_baseline(path), GateError);
  std::ofstream(path) << R"({"allocmark_baseline": 1, "machine": {}, "cells": [{"allocator": "a"}]})";
  try {
    read_baseline(path);
    FAIL();
  } catch (const GateError& e) {
    EXPECT_NE(std::string(e.what()).find("baseline.json: cells[0]: no \"workload\""), std::string::npos) << e.what();
  }
}

namespace {

// A file of this test's own in the temporary folder (ctest runs tests side by side); its path.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" + name;
}

// A baseline file holding `text`; its path.
std::string baseline_file(const std::string& name, const std::string& text) {
  std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// What read_baseline says of the baseline `text` ("" if it reads it).
std::string baseline_refusal(const std::string& text) {
  try {
    read_baseline(baseline_file("refused.json", text));
    return "";
  } catch (const GateError& e) {
    return e.what();
  }
}

std::string one_cell_baseline(const std::string& values, const std::string& extra_cell = "") {
  return R"({"allocmark_baseline": 1, "machine": {}, "cells": [{"allocator": "glibc", "workload": "size_mix",
    "threads": 1, "phase": "fill", "values": )" + values + "}" + extra_cell + "]}";
}

}  // namespace

TEST(Baseline, AbsurdValuesAreRefusedNamingTheCellAndMetric) {
  EXPECT_EQ(baseline_refusal(one_cell_baseline(R"({"peak_rss": [1e8, 1.1e8, 1.2e8], "ops_per_s": [0, 0, 0]})")), "");
  // A process may hold no huge page; it never holds a negative number of them.
  EXPECT_EQ(baseline_refusal(one_cell_baseline(R"({"peak_rss": [1e8, 1e8, 1e8], "anon_huge_bytes": [0, 0, 0]})")), "");
  EXPECT_NE(baseline_refusal(one_cell_baseline(R"({"peak_rss": [1e8, 1e8, 1e8], "anon_huge_bytes": [0, -1, 0]})")).find(
                "is not a anon_huge_bytes: expected bytes of 0 or more"),
            std::string::npos);
  for (const char* values : {R"({"peak_rss": [1e8, 0, 1e8]})", R"({"peak_rss": [1e8, -5, 1e8]})",
                             R"({"peak_rss": [1e308, 1e8, 1e8]})", R"({"ops_per_s": [-1, 2, 3]})",
                             R"({"ops_per_s": [1e300, 2, 3]})", R"({"end_rss": [0, 0, 0]})"}) {
    std::string why = baseline_refusal(one_cell_baseline(values));
    EXPECT_NE(why.find("cells[0] (glibc size_mix t1 fill).values."), std::string::npos) << values << ": " << why;
    EXPECT_NE(why.find("is not a"), std::string::npos) << why;
  }
}

TEST(Baseline, NothingToJudgeAgainstIsRefused) {
  EXPECT_NE(baseline_refusal(R"({"allocmark_baseline": 1, "machine": {}, "cells": []})").find("cells: empty"), std::string::npos);
  std::string failed = R"j({"allocmark_baseline": 1, "machine": {}, "cells": [{"allocator": "glibc", "workload": "size_mix",
    "threads": 1, "phase": "(cell)", "not_ok": 3, "values": {}}]})j";
  EXPECT_NE(baseline_refusal(failed).find("no cell holds a value"), std::string::npos) << baseline_refusal(failed);
}

TEST(Baseline, DuplicateCellsAreRefusedNamingBoth) {
  std::string again = R"(, {"allocator": "glibc", "workload": "size_mix", "threads": 1, "phase": "fill", "values": {"peak_rss": [1e8]}})";
  std::string why = baseline_refusal(one_cell_baseline(R"({"peak_rss": [1e8]})", again));
  EXPECT_NE(why.find("cells[1]: the same cell as cells[0] (glibc size_mix t1 fill)"), std::string::npos) << why;
}

TEST(Baseline, MalformedFieldsAreNamedWithWhatIsExpected) {
  std::string why = baseline_refusal(R"({"allocmark_baseline": 1, "machine": {}, "cells": [{"allocator": "glibc",
    "workload": "size_mix", "threads": "two", "phase": "fill", "values": {}}]})");
  EXPECT_NE(why.find("refused.json: cells[0].threads: expected an integer from 1 to"), std::string::npos) << why;
  why = baseline_refusal(one_cell_baseline(R"({"peak_rss": [1e8, "big"]})"));
  EXPECT_NE(why.find("cells[0] (glibc size_mix t1 fill).values.peak_rss[1]: expected a number, found \"big\""), std::string::npos) << why;
  why = baseline_refusal(R"({"allocmark_baseline": 1, "machine": {}, "cells": [{"workload": "w"}]})");
  EXPECT_NE(why.find("cells[0]: no \"allocator\""), std::string::npos) << why;
  try {
    read_baseline(::testing::TempDir());
    FAIL();
  } catch (const GateError& e) {
    EXPECT_NE(std::string(e.what()).find("a folder; BASELINE (--baseline) takes the baseline file"), std::string::npos) << e.what();
  }
}

TEST(Rule, AGateThatComparedNothingIsAnErrorSayingWhy) {
  RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  GateResult none = judge(base, base, {"peak_rss_bytes"}, "nosuchphase", {});
  EXPECT_TRUE(none.verdicts.empty());
  try {
    require_judgement(none, base, "base.json", {"peak_rss_bytes"}, "nosuchphase");
    FAIL();
  } catch (const GateError& e) {
    EXPECT_NE(std::string(e.what()).find("--phase nosuchphase: base.json has no such phase (its phases: churn)"), std::string::npos)
        << e.what();
  }
  none = judge(base, base, {"ops_per_s"}, "", {});
  EXPECT_THROW(require_judgement(none, base, "base.json", {"ops_per_s"}, ""), GateError);
  // A phase that did no operations has no throughput: nothing to judge, not a pass.
  RunSummary idle = run_with("ops_per_s", {0, 0, 0});
  EXPECT_TRUE(judge(idle, idle, {"ops_per_s"}, "", {}).verdicts.empty());
  GateResult judged = judge(base, base, {"peak_rss_bytes"}, "", {});
  EXPECT_NO_THROW(require_judgement(judged, base, "base.json", {"peak_rss_bytes"}, ""));
}

TEST(Rule, WhatIsNotComparableFailsTheGateEvenWhenTheMachineMayDiffer) {
  RuleSettings allow;
  allow.allow_mismatch = true;
  GateResult r = judge(run_with("peak_rss_bytes", mib({100, 101})), run_with("peak_rss_bytes", mib({100, 101, 102})), {"peak_rss_bytes"}, "", allow);
  EXPECT_EQ(r.verdicts[0].verdict, "not comparable");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Rule, ANotComparableRowKeepsTheMediansChange) {
  Verdict few = one(run_with("peak_rss_bytes", mib({100, 100})), run_with("peak_rss_bytes", mib({150, 150, 150})));
  EXPECT_EQ(few.verdict, "not comparable");
  EXPECT_DOUBLE_EQ(few.change, 0.5);
  EXPECT_FALSE(few.judged());
  const std::string md = render_gate(judge(run_with("peak_rss_bytes", mib({100, 100})), run_with("peak_rss_bytes", mib({150, 150, 150})),
                                           {"peak_rss_bytes"}, "", {}),
                                     "markdown");
  EXPECT_NE(md.find("| +50.0% (not judged) | - | - |"), std::string::npos) << md;
}

TEST(Render, MarkdownOpensWithTheVerdictAndFoldsThePasses) {
  RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  GateCell quiet = base.cells[0];
  quiet.phase = "fill";
  base.cells.push_back(quiet);
  RunSummary now = base;
  now.cells[0].values["peak_rss_bytes"] = mib({150, 151, 152});
  const GateResult r = judge(base, now, {"peak_rss_bytes"}, "", {});
  const std::string md = render_gate(r, "markdown");
  EXPECT_EQ(md.rfind("**gate: FAIL (1 regressed, 1 pass)**\n", 0), 0u) << md;
  const auto regressed = md.find("| regressed | jemalloc size\\_mix t2 churn |"), details = md.find("<details><summary>1 pass</summary>\n\n");
  const auto pass = md.find("| pass | jemalloc size\\_mix t2 fill |");
  ASSERT_NE(regressed, std::string::npos) << md;
  ASSERT_NE(details, std::string::npos) << md;
  EXPECT_LT(regressed, details);
  EXPECT_GT(pass, details);
  EXPECT_LT(pass, md.find("</details>"));
  // A terminal keeps every row in order and ends on the verdict line.
  const std::string table = render_gate(r, "table");
  EXPECT_LT(table.find("regressed"), table.find("pass "));
  EXPECT_NE(table.rfind("\ngate: FAIL (1 regressed, 1 pass)\n"), std::string::npos) << table;
}

TEST(Render, ChangedParametersAreADiffSaidOnce) {
  RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  base.cells[0].under_test["params"] = {{"live_mib", "64"}, {"ops", "1000"}, {"sizes", "16-256:60,256-4K:40"}};
  GateCell fill = base.cells[0];
  fill.phase = "fill";
  base.cells.push_back(fill);
  RunSummary now = base;
  for (auto& c : now.cells) c.under_test["params"]["live_mib"] = "80";
  const std::string md = render_gate(judge(base, now, {"peak_rss_bytes"}, "", {}), "markdown");
  EXPECT_NE(md.find("- jemalloc size\\_mix t2: params live\\_mib 64 -> 80\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("sizes"), std::string::npos) << md;  // the parameters that did not change are not repeated
  std::vector<std::string> diffs;
  for (const auto& c : field_changes(nlohmann::json{{"env", {{"A", "x y"}}}, {"library", "/a.so"}},
                                     nlohmann::json{{"env", nlohmann::json::object()}, {"library", "/b.so"}, {"version", "5"}}))
    diffs.push_back(c.text());
  EXPECT_EQ(diffs, (std::vector<std::string>{"env A \"x y\" -> (none)", "library /a.so -> /b.so", "version (none) -> 5"}));
}

TEST(Baseline, NewFilesUseTheTableNamesAndFormat1FilesStillRead) {
  const nlohmann::json written = baseline_json(run_with("peak_rss_bytes", mib({100, 101, 102})), "dir");
  EXPECT_EQ(written["allocmark_baseline"], 2);
  EXPECT_TRUE(written["cells"][0]["values"].contains("peak_rss_bytes"));
  const std::string old = R"({"allocmark_baseline": 1, "machine": {}, "cells": [{"allocator": "glibc", "workload": "size_mix",
    "threads": 1, "phase": "fill", "values": {"peak_rss": [1e8], "rss_over_live": [1.1], "end_rss": [9e7]}}]})";
  const RunSummary back = read_baseline(baseline_file("old.json", old));
  EXPECT_EQ(back.cells[0].values.size(), 3u);
  for (const char* name : {"peak_rss_bytes", "rss_above_idle_over_live", "end_rss_bytes"}) EXPECT_EQ(back.cells[0].values.count(name), 1u) << name;
  EXPECT_EQ(back.baseline_format, 1);  // the command notes an old format
  std::string both = old;
  both.replace(both.find("\"end_rss\""), 9, "\"peak_rss_bytes\"");
  EXPECT_NE(baseline_refusal(both).find("'peak_rss' and 'peak_rss_bytes' are one metric"), std::string::npos) << baseline_refusal(both);
  std::string format2 = old;
  format2.replace(format2.find("\"allocmark_baseline\": 1"), 23, "\"allocmark_baseline\": 2");
  EXPECT_NE(baseline_refusal(format2).find("unknown metric 'end_rss' (expected peak_rss_bytes"), std::string::npos) << baseline_refusal(format2);
  EXPECT_NE(baseline_refusal(format2).find("format 1 files name it end_rss, format 2 files end_rss_bytes"), std::string::npos);
  format2.replace(format2.find("\"allocmark_baseline\": 2"), 23, "\"allocmark_baseline\": 3");
  EXPECT_NE(baseline_refusal(format2).find("not an allocmark baseline of format 1 to 2"), std::string::npos) << baseline_refusal(format2);
}

// The baseline file and its machine fingerprint are interfaces (committed baselines): their keys
// as written, and read back.
TEST(Baseline, TheFileKeepsItsKeysAndTheMachineFingerprintItsFields) {
  auto keys = [](const nlohmann::json& object) {
    std::set<std::string> out;
    for (const auto& [key, value] : object.items()) out.insert(key);
    return out;
  };
  RunSummary run = run_with("peak_rss_bytes", mib({100, 101, 102}));
  run.cells[0].thp_how = "prctl";
  run.cells[0].setups = {cell_setup("jemalloc", "/lib/libjemalloc.so", {{"MALLOC_CONF", ""}}, {})};  // its under_test env
  const nlohmann::json written = baseline_json(run, "dir");
  EXPECT_EQ(keys(written), (std::set<std::string>{"allocmark_baseline", "allocmark_commit", "cells", "machine", "settings", "source"}));
  EXPECT_EQ(keys(written["cells"][0]), (std::set<std::string>{"allocator", "allocator_config", "not_ok", "phase", "thp_how", "threads",
                                                               "under_test", "values", "workload"}));
  const RunSummary back = read_baseline(baseline_file("written.json", written.dump()));
  ASSERT_EQ(back.cells.size(), 1u);
  EXPECT_EQ(back.cells[0].id(), "jemalloc size_mix t2 churn");
  EXPECT_EQ(back.cells[0].thp_how, "prctl");
  EXPECT_EQ(back.cells[0].setups, run.cells[0].setups);
  EXPECT_EQ(back.machine, run.machine);
  const nlohmann::json machine = {{"host", "h"}, {"arch", "x86_64"}, {"cpu_model", "X"}, {"kernel", "k"}, {"numa", {{"nodes", 2}}}};
  EXPECT_EQ(machine_fingerprint(machine), (nlohmann::json{{"cpu_model", "X"}, {"cpus_usable", nullptr}, {"glibc_version", nullptr},
                                                           {"kernel", "k"}, {"overcommit_memory", nullptr}, {"thp_enabled", nullptr}}));
}

TEST(Render, RecordTextIsEscapedForMarkdownAndTerminals) {
  RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  base.cells[0].allocator = "<img src=x onerror=alert(1)>";
  base.cells[0].phase = "\x1b[2Jwipe";
  RunSummary now = base;
  now.cells[0].under_test["env"]["MALLOC_CONF"] = "<script>alert(1)</script>";
  GateResult r = judge(base, now, {"peak_rss_bytes"}, "", {});
  std::string md = render_gate(r, "markdown");
  EXPECT_EQ(md.find("<img"), std::string::npos) << md;
  EXPECT_EQ(md.find("<script>"), std::string::npos) << md;
  EXPECT_NE(md.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos) << md;
  EXPECT_NE(md.find("&lt;script&gt;"), std::string::npos) << md;
  std::string table = render_gate(r, "table");
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_NE(table.find("\\x1b[2Jwipe"), std::string::npos) << table;
}

TEST(Confirm, ARerunRunsWhatTheBaselineNamesAndNeverWhatTheResultsDo) {
  // A program cell: the baseline ran /bin/true; the results claim to have run something else.
  const nlohmann::json params{{"command", "/bin/true"}, {"cwd", ""}, {"input", ""}};
  RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  base.cells[0].allocator = "glibc";
  base.cells[0].workload = "program:tool";
  base.cells[0].threads = 1;
  base.cells[0].under_test = {{"env", nlohmann::json::object()}, {"params", params}};
  base.cells[0].setups = {cell_setup("glibc", "", nlohmann::json::object(), params)};
  base.settings = {{"timeout_s", 30}, {"sample_ms", 10}, {"pin", "none"}};
  RunSummary honest = base;
  honest.cells[0].values["peak_rss_bytes"] = mib({150, 151, 152});
  RunSummary planted = honest;
  nlohmann::json foreign = params;
  foreign["command"] = "sh -c 'id > marker'";
  planted.cells[0].setups = {cell_setup("glibc", "", nlohmann::json::object(), foreign)};

  const allocmark::matrix::MatrixFile variants;
  const std::optional<allocmark::matrix::MatrixFile> no_matrix;
  GateResult flagged = judge(base, honest, {"peak_rss_bytes"}, "", {});
  ASSERT_EQ(flagged.verdicts[0].verdict, "regressed");

  ConfirmationPlan plan = plan_confirmation(flagged.verdicts, {base, "base.json", honest, "now", variants, no_matrix});
  EXPECT_TRUE(plan.not_rerun.empty());
  ASSERT_EQ(plan.plan.cells.size(), 3u);  // the baseline's 3 repetitions
  EXPECT_EQ(plan.plan.cells[0].params.at("command"), "/bin/true");
  EXPECT_EQ(plan.plan.settings.timeout_s, 30);

  plan = plan_confirmation(flagged.verdicts, {base, "base.json", planted, "now", variants, no_matrix});
  EXPECT_TRUE(plan.plan.cells.empty());
  ASSERT_EQ(plan.not_rerun.count("glibc program:tool t1"), 1u);
  EXPECT_NE(plan.not_rerun["glibc program:tool t1"].find("params command /bin/true -> \"sh -c 'id > marker'\""), std::string::npos)
      << plan.not_rerun["glibc program:tool t1"];
  GateResult judged = confirm(flagged, {}, plan.not_rerun);
  EXPECT_EQ(judged.verdicts[0].verdict, "not comparable");
  EXPECT_NE(judged.verdicts[0].reason.find("--confirm did not rerun it"), std::string::npos);
  EXPECT_EQ(judged.exit_code, 2);

  // A matrix the user names that disagrees with the baseline: not rerun either.
  allocmark::matrix::MatrixFile matrix;
  matrix.path = "team.toml";
  matrix.programs["tool"] = allocmark::matrix::program_from_params("program:tool", {{"command", "/bin/false"}});
  plan = plan_confirmation(flagged.verdicts, {base, "base.json", honest, "now", variants, std::optional(matrix)});
  EXPECT_TRUE(plan.plan.cells.empty());
  EXPECT_NE(plan.not_rerun["glibc program:tool t1"].find("differs between the baseline and --confirm-matrix team.toml"),
            std::string::npos);
}

TEST(Confirm, ALibraryOfAnotherMachineIsTheOneItsAllocatorResolvesToHere) {
  const nlohmann::json params{{"command", "/bin/true"}, {"cwd", ""}, {"input", ""}};
  const allocmark::matrix::MatrixFile variants;
  const std::optional<allocmark::matrix::MatrixFile> no_matrix;
  const std::string here = allocmark::matrix::resolve_allocator("jemalloc", {}, "test").library;
  RunSummary base = run_with("peak_rss_bytes", mib({100, 101, 102}));
  base.cells[0].allocator = "jemalloc";
  base.cells[0].workload = "program:tool";
  base.cells[0].threads = 1;
  base.cells[0].under_test = {{"env", nlohmann::json::object()}, {"params", params}};
  base.cells[0].setups = {cell_setup("jemalloc", "/elsewhere/libjemalloc.so.2", nlohmann::json::object(), params)};
  base.settings = {{"timeout_s", 30}, {"pin", "none"}};
  RunSummary now = base;
  now.cells[0].values["peak_rss_bytes"] = mib({150, 151, 152});
  now.cells[0].setups = {cell_setup("jemalloc", here, nlohmann::json::object(), params)};
  GateResult flagged = judge(base, now, {"peak_rss_bytes"}, "", {});
  ConfirmationPlan plan = plan_confirmation(flagged.verdicts, {base, "base.json", now, "now", variants, no_matrix});
  EXPECT_TRUE(plan.not_rerun.empty()) << plan.not_rerun.begin()->second;
  ASSERT_FALSE(plan.plan.cells.empty());
  EXPECT_EQ(plan.plan.cells[0].allocator.library, here);
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_NE(plan.notes[0].find("/elsewhere/libjemalloc.so.2 is not on this machine"), std::string::npos) << plan.notes[0];
}
