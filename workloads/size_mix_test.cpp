// size_mix in-process, single- and multi-threaded: live-byte accounting is exact (checked against
// the blocks the workload holds), phases come in order, and one seed gives one sequence.
#include "workloads/size_mix.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <thread>

#include "workloads/test_support.h"

using namespace allocmark::workloads;

namespace {
Params small_params(int64_t seed = 1, double remote = 0.5) {
  return Params({{"live_mib", "4"},
                 {"sizes", "16-256:60,256-4K:30,4K-64K:10"},
                 {"ops", "20000"},
                 {"remote_free", std::to_string(remote)},
                 {"touch", "1"},
                 {"seed", std::to_string(seed)}});
}

std::vector<int64_t> run_all(Workload& w, LiveBytes& live, int threads) {
  std::vector<int64_t> after;
  for (const auto& o : test_support::run_all_phases(w, live, threads)) after.push_back(o.live_after);
  return after;
}
}  // namespace

TEST(SizeMix, PhasesInDocumentedOrder) {
  SizeMix w(small_params(), 1);
  EXPECT_EQ(w.phases(), (std::vector<std::string>{"fill", "churn", "release"}));
  EXPECT_EQ(find_workload("size_mix")->phases, w.phases());
}

TEST(SizeMix, LiveAccountingIsExactAndReturnsToZero) {
  for (int threads : {1, 2, 3}) {
    SizeMix w(small_params(), threads);
    LiveBytes live(threads);
    auto after = run_all(w, live, threads);
    // After fill and churn the accounted live total is positive and near the 4 MiB target...
    EXPECT_GT(after[0], 2 << 20) << threads;
    EXPECT_LT(after[0], 8 << 20) << threads;
    EXPECT_GT(after[1], 0) << threads;
    // ...and after release every accounted byte was freed, including those handed to other threads.
    EXPECT_EQ(after[2], 0) << threads;
    EXPECT_GE(live.peak(), after[1]);
  }
}

TEST(SizeMix, LiveBytesMatchWhatTheHeapHolds) {
  // glibc's in-use counter (mallinfo2) grows by at least the requested bytes and by little more
  // (chunk headers), so it checks the workload's own accounting from outside. A fresh thread: the
  // test thread's cache may hold blocks other tests freed, which glibc counts as in use already.
  std::thread([] {
    SizeMix w(small_params(7, 0.0), 1);
    LiveBytes live(1);
    struct mallinfo2 before = mallinfo2();
    ThreadContext ctx{0, 1, live.local(0)};
    w.run_phase(0, ctx);
    struct mallinfo2 after = mallinfo2();
    int64_t heap_growth =
        static_cast<int64_t>(after.uordblks + after.hblkhd) - static_cast<int64_t>(before.uordblks + before.hblkhd);
    EXPECT_GE(heap_growth, live.current());
    EXPECT_LT(heap_growth, live.current() * 1.2);
    w.run_phase(2, ctx);
    EXPECT_EQ(live.current(), 0);
  }).join();
}

TEST(SizeMix, SameSeedSameSequence) {
  auto trace = [](int64_t seed) {
    SizeMix w(small_params(seed, 0.0), 1);
    LiveBytes live(1);
    return run_all(w, live, 1);
  };
  EXPECT_EQ(trace(3), trace(3));
  EXPECT_NE(trace(3), trace(4));
}

TEST(SizeDistribution, RejectsMalformedClasses) {
  EXPECT_THROW(SizeDistribution::parse("16-8:1"), std::invalid_argument);
  EXPECT_THROW(SizeDistribution::parse("16:1"), std::invalid_argument);
  EXPECT_THROW(SizeDistribution::parse("16-32:0"), std::invalid_argument);
  EXPECT_THROW(SizeDistribution::parse("16-32:1,"), std::invalid_argument);
  auto d = SizeDistribution::parse("16-16:1,32-32:1");
  EXPECT_DOUBLE_EQ(d.mean(), 24);
}
