#include <gtest/gtest.h>

#include "workloads/test_support.h"

using namespace allocmark::workloads;
namespace ts = allocmark::workloads::test_support;

// Named after the file: its helpers and tests share a unity batch with other files (cmake/allocmark_build_speed.cmake).
namespace hash_build_test {
namespace {
Params small(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> o{{"keys", "60000"}, {"probes", "20000"}};
  for (auto& [k, v] : extra) o[k] = v;
  return ts::preset("hash_build", "quick", o);
}
std::unique_ptr<Workload> make(const Params& p, int threads) { return find_workload("hash_build")->make(p, threads, {}); }
}  // namespace

TEST(HashBuild, PhasesInDocumentedOrder) {
  EXPECT_EQ(make(small(), 1)->phases(), (std::vector<std::string>{"build", "probe", "release"}));
  EXPECT_EQ(find_workload("hash_build")->phases, make(small(), 1)->phases());
}

TEST(HashBuild, AccountingCoversRowsTableAndPayloadsAndReturnsToZero) {
  for (int threads : {1, 2, 3}) {
    auto w = make(small(), threads);
    LiveBytes live(threads);
    auto out = ts::run_all_phases(*w, live, threads);
    auto m = w->phase_metrics(0);
    EXPECT_EQ(m["rows_inserted"], 60000u * threads);
    // 32-byte rows plus 8-byte slots at <= 0.7 load at least; payloads and run slack on top.
    EXPECT_GT(out[0].live_after, int64_t(60000) * threads * (32 + 8 / 0.7)) << threads;
    EXPECT_EQ(out[1].live_after, out[0].live_after) << "probe is read-only";
    EXPECT_EQ(out[1].ops, 20000u * threads);
    EXPECT_EQ(out[2].live_after, 0) << threads;
  }
}

TEST(HashBuild, ProbesFindEveryBuiltKeyAndNoOther) {
  auto w = make(small({{"probes", "40000"}}), 1);
  LiveBytes live(1);
  ts::run_all_phases(*w, live, 1);
  uint64_t hits = w->phase_metrics(1)["probe_hits"];
  // Probe keys are uniform over twice the built range: about half hit.
  EXPECT_GT(hits, 40000u * 0.45);
  EXPECT_LT(hits, 40000u * 0.55);
}

TEST(HashBuild, TableDoublesAtSevenTenthsLoad) {
  auto w = make(small({{"keys", "10000"}, {"batch", "1000"}}), 1);
  LiveBytes live(1);
  ThreadContext ctx{0, 1, live.local(0)};
  w->run_phase(0, ctx);
  auto m = w->phase_metrics(0);
  // First table max(2048, 2 x 1000) = 2048 slots; 10000 rows need 16384 (0.61 load): 2048 -> 16384 is 3 doublings.
  EXPECT_EQ(m["table_slots"], 16384u);
  EXPECT_EQ(m["rehashes"], 4u);
  w->run_phase(2, ctx);
  EXPECT_EQ(live.current(), 0);
}

TEST(HashBuild, PartialFlushMakesASawtooth) {
  auto w = make(small({{"partial_flush", "1M"}}), 1);
  LiveBytes live(1);
  auto out = ts::run_all_phases(*w, live, 1);
  EXPECT_GT(w->phase_metrics(0)["partial_flushes"], 0u);
  EXPECT_LT(out[0].live_after, 2 << 20);
  EXPECT_EQ(out[2].live_after, 0);
}

TEST(HashBuild, SameSeedSameSequence) {
  auto trace = [](const char* seed) {
    auto w = make(small({{"seed", seed}}), 1);
    LiveBytes live(1);
    std::vector<int64_t> t;
    for (const auto& o : ts::run_all_phases(*w, live, 1)) t.insert(t.end(), {o.live_after, o.peak_live, int64_t(o.ops)});
    t.push_back(w->phase_metrics(1)["probe_hits"].get<int64_t>());
    return t;
  };
  EXPECT_EQ(trace("2"), trace("2"));
  EXPECT_NE(trace("2"), trace("3"));
}

}  // namespace hash_build_test
