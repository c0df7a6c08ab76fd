// The default `show` table through the model and the table reporter.
#include "harness/results/model.h"
#include "harness/results/reporters/reporter.h"

#include <gtest/gtest.h>

using namespace allocmark::results;
using nlohmann::json;

TEST(Show, MedianOfOddAndEven) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}

TEST(Show, TableHasMedianSpreadAndFailures) {
  std::vector<json> recs;
  for (int rep = 1; rep <= 3; ++rep)
    recs.push_back({{"allocator", "jemalloc"}, {"workload", "size_mix"}, {"threads", 2}, {"status", "ok"},
                    {"idle_rss_bytes", 0},
                    {"phases", json::array({{{"name", "churn"}, {"peak_rss_bytes", rep * 1048576.0},
                                             {"peak_live_bytes", 1048576.0}, {"ops", 1000.0 * rep}, {"wall_s", 1.0}}})}});
  recs.push_back({{"allocator", "bad"}, {"workload", "size_mix"}, {"threads", 2}, {"status", "crashed"},
                  {"error", "killed by signal 11"}, {"phases", json::array()}});
  std::string t = render_report(Model::from_records(recs), "table");
  EXPECT_NE(t.find("2.0 [1.0-3.0]"), std::string::npos) << t;
  EXPECT_NE(t.find("2.00 [1.00-3.00]"), std::string::npos) << t;
  EXPECT_NE(t.find("2.0k [1.0k-3.0k]"), std::string::npos) << t;
  EXPECT_NE(t.find("3 ok"), std::string::npos) << t;
  EXPECT_NE(t.find("1 crashed"), std::string::npos) << t;
  EXPECT_NE(t.find("killed by signal 11"), std::string::npos) << t;
}
