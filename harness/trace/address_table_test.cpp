#include "harness/trace/address_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace allocmark::trace {
namespace {

// One static table, as the recorder has it (constant-initialised, ~16 KiB of shard headers).
constinit AddressTable g_table;

TEST(AddressTable, InsertFindRemove) {
  AddressTable::Entry e{};
  EXPECT_FALSE(g_table.find(0x1000, e));
  EXPECT_FALSE(g_table.remove(0x1000, e));
  ASSERT_TRUE(g_table.insert(0x1000, 7, 33));
  ASSERT_TRUE(g_table.find(0x1000, e));
  EXPECT_EQ(e.id, 7u);
  EXPECT_EQ(e.size, 33u);
  ASSERT_TRUE(g_table.insert(0x1000, 8, 44));  // an address seen again replaces what was there
  EXPECT_EQ(g_table.size(), 1u);
  ASSERT_TRUE(g_table.remove(0x1000, e));
  EXPECT_EQ(e.id, 8u);
  EXPECT_EQ(e.size, 44u);
  EXPECT_FALSE(g_table.find(0x1000, e));
  EXPECT_EQ(g_table.size(), 0u);
  g_table.release();
}

// Random inserts and removes of clustered addresses (long probe runs, wrap-around, growth from
// 512 slots a shard to many) agree with a std::unordered_map at every step.
TEST(AddressTable, AgreesWithAMapUnderChurn) {
  std::mt19937_64 rng(26);
  std::unordered_map<uintptr_t, std::pair<uint64_t, uint64_t>> model;
  std::vector<uintptr_t> live;
  uint64_t next_id = 1;
  for (int step = 0; step < 600000; ++step) {
    const bool grow_phase = step < 300000;
    if (live.empty() || rng() % 100 < (grow_phase ? 70u : 45u)) {
      uintptr_t addr = 0x10000 + (rng() % 2000000) * 16;
      uint64_t size = rng() % 5000;
      ASSERT_TRUE(g_table.insert(addr, next_id, size));
      if (!model.count(addr)) live.push_back(addr);
      model[addr] = {next_id++, size};
    } else {
      std::size_t k = rng() % live.size();
      uintptr_t addr = live[k];
      live[k] = live.back();
      live.pop_back();
      AddressTable::Entry e{};
      ASSERT_TRUE(g_table.remove(addr, e)) << step;
      ASSERT_EQ(e.id, model[addr].first);
      ASSERT_EQ(e.size, model[addr].second);
      model.erase(addr);
      ASSERT_FALSE(g_table.find(addr, e));
    }
    if (step % 50000 == 0) {
      ASSERT_EQ(g_table.size(), model.size());
    }
  }
  for (auto& [addr, v] : model) {
    AddressTable::Entry e{};
    ASSERT_TRUE(g_table.find(addr, e));
    EXPECT_EQ(e.id, v.first);
  }
  EXPECT_EQ(g_table.size(), model.size());
  for (auto& [addr, v] : model) {
    AddressTable::Entry e{};
    ASSERT_TRUE(g_table.remove(addr, e));
  }
  EXPECT_EQ(g_table.size(), 0u);
  g_table.release();
}

}  // namespace
}  // namespace allocmark::trace
