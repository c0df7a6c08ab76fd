#include <gtest/gtest.h>

#include <atomic>

#include "workloads/test_support.h"

using namespace allocmark::workloads;
namespace ts = allocmark::workloads::test_support;

namespace {
Params small(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> o{{"budget_mib", "16"}, {"table_max", "1M"}, {"check_every", "256K"}};
  for (auto& [k, v] : extra) o[k] = v;
  return ts::preset("rss_budget", "quick", o);
}
std::unique_ptr<Workload> make(const Params& p, int threads, const WorkloadEnv& env = {}) {
  return find_workload("rss_budget")->make(p, threads, env);
}
}  // namespace

TEST(RssBudget, PhasesInDocumentedOrder) {
  auto w = make(small(), 1);
  EXPECT_EQ(w->phases(), (std::vector<std::string>{"cache_fill", "rebuild", "release"}));
  EXPECT_EQ(find_workload("rss_budget")->phases, w->phases());
}

TEST(RssBudget, EachPhaseHoldsTheFillVolumeAndReleaseReturnsToZero) {
  const int64_t fill = static_cast<int64_t>(16 * 1048576 * 0.9);
  for (int threads : {1, 2}) {
    auto w = make(small(), threads);
    LiveBytes live(threads);
    auto out = ts::run_all_phases(*w, live, threads);
    // Each thread stops at the first object that reaches its quota: at most one cache object
    // (256 KiB) or table (1 MiB) over, per thread.
    EXPECT_GE(out[0].live_after, fill - 64) << threads;
    EXPECT_LE(out[0].live_after, fill + threads * (256 << 10)) << threads;
    EXPECT_GE(out[1].live_after, fill - threads * (1 << 20)) << threads;
    EXPECT_LE(out[1].live_after, fill + threads * (1 << 20)) << threads;
    EXPECT_EQ(out[2].live_after, 0) << threads;
    // While a table doubles, the old and the new array are both alive.
    EXPECT_GT(out[1].peak_live, out[1].live_after);
  }
}

TEST(RssBudget, SameSeedSameSequence) {
  auto trace = [](const char* seed) {
    auto w = make(small({{"seed", seed}}), 1);
    LiveBytes live(1);
    std::vector<int64_t> t;
    for (const auto& o : ts::run_all_phases(*w, live, 1)) t.insert(t.end(), {o.live_after, int64_t(o.ops), o.peak_live});
    return t;
  };
  EXPECT_EQ(trace("5"), trace("5"));
  EXPECT_NE(trace("5"), trace("6"));
}

TEST(RssBudget, PushbackPurgesOnlyAboveTheThreshold) {
  std::atomic<int> purges{0};
  std::atomic<uint64_t> fake_rss{0};
  WorkloadEnv env{[&] { return ++purges, true; }, [&] { return fake_rss.load(); }};
  for (const char* pushback : {"0", "1"}) {
    purges = 0;
    fake_rss = 1;  // far below the budget: never purge
    auto w = make(small({{"pushback", pushback}}), 1, env);
    LiveBytes live(1);
    ThreadContext ctx{0, 1, live.local(0)};
    w->run_phase(0, ctx);
    EXPECT_EQ(purges, 0);
    fake_rss = 64ull << 20;  // above 0.95 x 16 MiB
    w->run_phase(1, ctx);
    if (std::string(pushback) == "1")
      EXPECT_GT(purges, 0);
    else
      EXPECT_EQ(purges, 0);
    auto m = w->phase_metrics(1);
    EXPECT_EQ(m["budget_bytes"], 16u << 20);
    EXPECT_GT(m["rss_checks"], 0);
    w->run_phase(2, ctx);
    EXPECT_EQ(live.current(), 0);
  }
}
