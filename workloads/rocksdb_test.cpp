// Parameter checks of the rocksdb workload (the engine itself runs in tests/rocksdb_test.py, through
// the real driver, since it needs a data folder and its module).
#include <gtest/gtest.h>

#include "workloads/workload.h"

using namespace allocmark::workloads;

namespace {

Params with(const std::string& size, std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> values;
  for (const auto& p : find_workload("rocksdb")->params) values[p.name] = size == "full" ? p.full : p.quick;
  for (auto& [k, v] : extra) values[k] = v;
  return Params(values);
}

}  // namespace

TEST(RocksdbParams, BothSizesAreValid) {
  const WorkloadInfo* info = find_workload("rocksdb");
  ASSERT_NE(info, nullptr);
  EXPECT_FALSE(info->tracks_live_bytes);
  EXPECT_EQ(info->phases, (std::vector<std::string>{"l.i0", "l.x", "idle.x", "l.i1", "q100", "q500", "q1000", "idle.end"}));
  EXPECT_EQ(info->validate(with("quick")), "");
  EXPECT_EQ(info->validate(with("full")), "");
  EXPECT_EQ(info->validate(with("quick", {{"cache", "hyper_clock"}, {"compression", "none"}})), "");
  EXPECT_EQ(info->validate(with("quick", {{"index_step", "l.i0"}})), "");
}

TEST(RocksdbParams, EachBadValueIsNamed) {
  const WorkloadInfo* info = find_workload("rocksdb");
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases{
      {{{"cache", "clock"}}, "cache must be lru"},
      {{{"compression", "brotli"}}, "compression must be"},
      {{{"rows", "0"}}, "rows must be"},
      {{{"rows_per_commit", "0"}}, "rows_per_commit"},
      {{{"value_bytes", "4"}}, "value_bytes"},
      {{{"indexes", "0"}}, "indexes"},
      {{{"index_step", "l.i1"}}, "index_step must be l.x or l.i0"},
      {{{"write_buffer", "4K"}}, "write_buffer"},
      {{{"max_write_buffers", "1"}}, "max_write_buffers"},
      {{{"background_jobs", "0"}}, "background_jobs"},
      {{{"block_bytes", "512"}}, "block_bytes"},
      {{{"block_cache", "8K"}}, "block_cache"},
      {{{"sort_buffer", "1K"}}, "sort_buffer"},
      {{{"query_rows", "0"}}, "query_rows"},
      {{{"q_seconds", "-1"}}, "q_seconds"},
  };
  for (const auto& [extra, words] : cases) {
    std::string problem = info->validate(with("quick", extra));
    EXPECT_NE(problem.find(words), std::string::npos) << extra.begin()->first << ": " << problem;
  }
}

TEST(RocksdbParams, MakingItWithoutADataFolderIsAnError) {
  // The engine is never reached: the folder is checked first, so this runs without librocksdb.
  EXPECT_THROW(find_workload("rocksdb")->make(with("quick"), 1, WorkloadEnv{}), std::runtime_error);
}
