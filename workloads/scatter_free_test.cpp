// scatter_free in-process: the structure's live bytes after each phase are exactly what it keeps
// (all, then one object in keep_every), the purge asks the allocator once, and teardown frees all.
#include <gtest/gtest.h>

#include <thread>

#include "workloads/test_support.h"

using namespace allocmark::workloads;

TEST(ScatterFree, KeepsOneObjectInNAndAsksForOnePurge) {
  for (int threads : {1, 3}) {
    int purges = 0;
    WorkloadEnv env;
    env.purge = [&] { return ++purges, true; };
    const auto* info = find_workload("scatter_free");
    ASSERT_NE(info, nullptr);
    auto params = test_support::preset("scatter_free", "quick",
                                       {{"live_mib", "3"}, {"object_size", "8K"}, {"keep_every", "3"}, {"hold_ms", "0"}});
    ASSERT_EQ(info->validate(params), "");
    auto w = info->make(params, threads, env);
    LiveBytes live(threads);
    auto out = test_support::run_all_phases(*w, live, threads);
    ASSERT_EQ(out.size(), 4u);
    const int64_t per_thread = (3 << 20) / 8192 / threads, objects = per_thread * threads;
    const int64_t kept = threads * ((per_thread + 2) / 3);  // indices 0, 3, 6, ... of each thread's share
    EXPECT_EQ(out[0].live_after, objects * 8192) << threads;
    EXPECT_EQ(out[1].live_after, kept * 8192) << threads;
    EXPECT_EQ(out[1].ops, static_cast<uint64_t>(objects - kept));
    EXPECT_EQ(out[2].live_after, kept * 8192);
    EXPECT_EQ(out[3].live_after, kept * 8192);
    EXPECT_EQ(purges, 1) << "one purge, by the first thread";
    EXPECT_EQ(w->phase_metrics(2)["purge_supported"], true);
    w->teardown();
  }
  auto bad = test_support::preset("scatter_free", "quick", {{"keep_every", "1"}});
  EXPECT_NE(find_workload("scatter_free")->validate(bad).find("keep_every"), std::string::npos);
}
