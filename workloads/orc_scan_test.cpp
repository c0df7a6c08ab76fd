// orc_scan in-process with 1-4 threads (1: one thread reads and drives; 2+: readers hand stripes
// to drivers, which free them): live-byte accounting is exact and matches what the workload
// holds, the live set stays under the target, phases come in order, one seed gives one sequence.
#include "workloads/orc_scan.h"

#include <gtest/gtest.h>

#include "workloads/test_support.h"

using namespace allocmark::workloads;

// Named after the file: its helpers and tests share a unity batch with other files (cmake/allocmark_build_speed.cmake).
namespace orc_scan_test {
namespace {
Params small_params(int64_t seed = 1, std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> o{{"target", "48M"},        {"volume", "48M"},       {"classes", "128K-128K,4K-400K,256K-1M"},
                                       {"class_bytes", "4M"},    {"huge_sizes", "2M,4M"}, {"stripe_bytes", "2M"},
                                       {"max_read", "512K"},     {"streams", "8"},        {"max_stream_buffer", "64K"},
                                       {"seed", std::to_string(seed)}};
  for (auto& [k, v] : extra) o[k] = v;
  return test_support::preset("orc_scan", "quick", o);
}

// Runs each phase in lock step and records, after each, the accounted live bytes and what the
// workload says it holds.
struct ScanRun {
  std::vector<test_support::PhaseOutcome> phases;
  std::vector<uint64_t> held;
  std::vector<nlohmann::json> metrics;
  uint64_t hash = 0;
};

ScanRun run_scan(const Params& params, int threads) {
  OrcScan w(params, threads, WorkloadEnv{});
  LiveBytes live(threads);
  ScanRun r;
  for (std::size_t phase = 0; phase < w.phases().size(); ++phase) {
    // One phase at a time so the workload's own figures can be read between phases.
    struct OnePhase : Workload {
      OrcScan& w;
      std::size_t phase;
      std::vector<std::string> names{"one"};
      OnePhase(OrcScan& w, std::size_t phase) : w(w), phase(phase) {}
      const std::vector<std::string>& phases() const override { return names; }
      uint64_t run_phase(std::size_t, ThreadContext& ctx) override { return w.run_phase(phase, ctx); }
    } one(w, phase);
    r.phases.push_back(test_support::run_all_phases(one, live, threads)[0]);
    r.held.push_back(w.held_bytes());
    r.metrics.push_back(w.phase_metrics(phase));
  }
  r.hash = w.trace_hash();
  return r;
}
}  // namespace

TEST(OrcScan, PhasesInDocumentedOrder) {
  OrcScan w(small_params(), 1, WorkloadEnv{});
  EXPECT_EQ(w.phases(), (std::vector<std::string>{"warmup", "steady", "drain"}));
  EXPECT_EQ(find_workload("orc_scan")->phases, w.phases());
}

TEST(OrcScan, LiveAccountingIsExactAndStaysUnderTheTarget) {
  for (int threads : {1, 2, 3, 4}) {
    ScanRun r = run_scan(small_params(), threads);
    const uint64_t target = 48u << 20;
    for (std::size_t p = 0; p < 3; ++p) {
      // Between phases the accounted total equals what the workload holds, byte for byte.
      EXPECT_EQ(static_cast<uint64_t>(r.phases[p].live_after), r.held[p]) << threads << " phase " << p;
      // The pattern's cap plus the pipeline's reserve is the target; accounting is folded every
      // 64 KiB per thread, hence the slack.
      EXPECT_LE(r.phases[p].peak_live, static_cast<int64_t>(target + threads * LiveBytes::kFlushBytes)) << threads;
    }
    EXPECT_GT(r.phases[0].live_after, 16 << 20) << threads;  // warmup filled the pattern's cap
    EXPECT_EQ(r.phases[2].live_after, 0) << threads;         // drain freed everything
    // Every stripe a reader loaded was consumed (and freed) by a driver in the same phase.
    for (std::size_t p = 0; p < 2; ++p) {
      EXPECT_GT(r.metrics[p]["stripes_loaded"].get<uint64_t>(), 0u);
      EXPECT_EQ(r.metrics[p]["stripes_loaded"], r.metrics[p]["stripes_consumed"]) << threads;
    }
    EXPECT_GT(r.metrics[1]["evictions"].get<uint64_t>(), 0u) << threads;
    EXPECT_GE(r.metrics[1]["pattern_bytes"].get<uint64_t>(), 48u << 20) << threads;
    EXPECT_EQ(r.metrics[0]["target_bytes"].get<uint64_t>(), target);
    uint64_t cap = r.metrics[0]["pattern_cap_bytes"], reserve = r.metrics[0]["pipeline_reserve_bytes"];
    EXPECT_LE(cap + reserve, target) << threads;
    EXPECT_GT(cap + reserve + threads, target) << threads;  // the cap is split evenly over drivers
  }
}

TEST(OrcScan, RolesByThreadIndex) {
  OrcScan one(small_params(), 1, WorkloadEnv{});
  EXPECT_EQ(one.readers(), 1);
  EXPECT_EQ(one.drivers(), 1);
  OrcScan three(small_params(), 3, WorkloadEnv{});
  EXPECT_EQ(three.readers(), 1);
  EXPECT_EQ(three.drivers(), 2);
  OrcScan four(small_params(), 4, WorkloadEnv{});
  EXPECT_EQ(four.readers(), 2);
  EXPECT_EQ(four.drivers(), 2);
}

TEST(OrcScan, SameSeedSameSequence) {
  for (int threads : {1, 2}) {
    ScanRun a = run_scan(small_params(3), threads), b = run_scan(small_params(3), threads), c = run_scan(small_params(4), threads);
    EXPECT_EQ(a.hash, b.hash) << threads;
    EXPECT_EQ(a.phases[1].live_after, b.phases[1].live_after) << threads;
    EXPECT_EQ(a.metrics[1]["evictions"], b.metrics[1]["evictions"]) << threads;
    EXPECT_NE(a.hash, c.hash) << threads;
  }
}

TEST(OrcScan, SampledRssIsReportedAgainstTheTarget) {
  WorkloadEnv env;
  env.rss_bytes = [] { return uint64_t{96} << 20; };
  OrcScan w(small_params(), 1, env);
  LiveBytes live(1);
  ThreadContext ctx{0, 1, live.local(0)};
  w.run_phase(0, ctx);
  auto m = w.phase_metrics(0);
  EXPECT_EQ(m["sampled_peak_rss_bytes"].get<uint64_t>(), 96u << 20);
  EXPECT_DOUBLE_EQ(m["sampled_peak_rss_over_target"].get<double>(), 2.0);
  w.run_phase(2, ctx);
  EXPECT_EQ(live.current(), 0);
}

TEST(OrcScan, RejectsATargetThePipelineWouldFill) {
  const WorkloadInfo* info = find_workload("orc_scan");
  EXPECT_EQ(info->validate(small_params()), "");
  EXPECT_NE(info->validate(small_params(1, {{"target", "5M"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"prefetch", "0"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"classes", "8-4"}})), "");
  // Valid for one thread but not for eight: the constructor refuses, the worker reports it.
  Params tight = small_params(1, {{"target", "24M"}});
  EXPECT_EQ(info->validate(tight), "");
  EXPECT_THROW(OrcScan(tight, 8, WorkloadEnv{}), std::invalid_argument);
  // The quick and full presets are valid.
  EXPECT_EQ(info->validate(test_support::preset("orc_scan", "quick")), "");
  EXPECT_EQ(info->validate(test_support::preset("orc_scan", "full")), "");
}

}  // namespace orc_scan_test
