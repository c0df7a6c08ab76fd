// The NUMA placement rule on the 8-node machine of seed 001 (distances 10/16/32), without NUMA
// hardware: from a hand-built table, and from a fake sysfs tree read by the real parser.
#include "allocators/numap/topology.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace numap {
namespace {

const int kSeed001[64] = {
    10, 16, 16, 16, 32, 32, 32, 32,  //
    16, 10, 16, 16, 32, 32, 32, 32,  //
    16, 16, 10, 16, 32, 32, 32, 32,  //
    16, 16, 16, 10, 32, 32, 32, 32,  //
    32, 32, 32, 32, 10, 16, 16, 16,  //
    32, 32, 32, 32, 16, 10, 16, 16,  //
    32, 32, 32, 32, 16, 16, 10, 16,  //
    32, 32, 32, 32, 16, 16, 16, 10};

std::vector<int> order(const Topology& t, int from, const std::uint64_t* free_bytes, int limit) {
  int out[kMaxNodes];
  int n = fallback_order(t, from, free_bytes, limit, out);
  return std::vector<int>(out, out + n);
}

TEST(NumapTopology, FallbackInIncreasingDistanceLikeTheSeed) {
  Topology t;
  topology_from_table(&t, 8, kSeed001, 1ull << 30, 4);
  // The seed's table: equal free memory, so ties go to the lower node number.
  EXPECT_EQ(order(t, 0, nullptr, 0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(order(t, 2, nullptr, 0), (std::vector<int>{2, 0, 1, 3, 4, 5, 6, 7}));
  EXPECT_EQ(order(t, 5, nullptr, 0), (std::vector<int>{5, 4, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(order(t, 7, nullptr, 0), (std::vector<int>{7, 4, 5, 6, 0, 1, 2, 3}));
}

TEST(NumapTopology, DistanceLimitStopsTheFallback) {
  Topology t;
  topology_from_table(&t, 8, kSeed001, 1ull << 30, 4);
  EXPECT_EQ(order(t, 0, nullptr, 16), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(order(t, 6, nullptr, 16), (std::vector<int>{6, 4, 5, 7}));
  EXPECT_EQ(order(t, 6, nullptr, 10), (std::vector<int>{6}));
}

TEST(NumapTopology, TiesGoToTheNodeWithMostFreeMemory) {
  Topology t;
  topology_from_table(&t, 8, kSeed001, 1ull << 30, 4);
  // The seed's example: lgrp1 10%, lgrp2 5%, lgrp3 50% free -> node 3 first.
  const std::uint64_t free_bytes[8] = {0, 10, 5, 50, 90, 80, 70, 60};
  EXPECT_EQ(order(t, 0, free_bytes, 0), (std::vector<int>{0, 3, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(order(t, 4, free_bytes, 0), (std::vector<int>{4, 5, 6, 7, 3, 1, 2, 0}));
}

TEST(NumapTopology, DisallowedNodesAreSkipped) {
  Topology t;
  topology_from_table(&t, 8, kSeed001, 1ull << 30, 4);
  t.allowed = 0b00001011;  // nodes 0, 1, 3
  EXPECT_EQ(order(t, 0, nullptr, 0), (std::vector<int>{0, 1, 3}));
}

TEST(NumapTopology, NumaSwitchesOffOnOneNodeOrABoundProcess) {
  Topology t;
  topology_single(&t, 1ull << 30);
  EXPECT_FALSE(numa_enabled(t, -1));
  EXPECT_TRUE(numa_enabled(t, 1));
  topology_from_table(&t, 8, kSeed001, 1ull << 30, 4);
  EXPECT_TRUE(numa_enabled(t, -1));
  EXPECT_FALSE(numa_enabled(t, 0));
  t.allowed = 1u << 5;  // memory of one node only (cpuset or MPOL_BIND)
  EXPECT_FALSE(numa_enabled(t, -1));
  t.allowed = 0xff;
  t.bound = true;       // CPUs of one node only (numactl -N)
  EXPECT_FALSE(numa_enabled(t, -1));
}

TEST(NumapTopology, ParsesKernelLists) {
  std::uint64_t m[2];
  EXPECT_TRUE(parse_cpulist("0-3,8,10-11\n", m, 2));
  EXPECT_EQ(m[0], 0xD0Full);
  EXPECT_TRUE(parse_cpulist("64-65", m, 2));
  EXPECT_EQ(m[1], 3ull);
  EXPECT_TRUE(parse_cpulist("\n", m, 2));
  EXPECT_EQ(m[0], 0ull);
  EXPECT_FALSE(parse_cpulist("3-1", m, 2));
  EXPECT_FALSE(parse_cpulist("a", m, 2));
}

// A fake /sys with the seed's 8 nodes, 4 CPUs and 2 GiB each.
std::string make_fake_sysfs() {
  std::string root = ::testing::TempDir() + "numap_sysfs_" + std::to_string(::getpid());
  std::filesystem::remove_all(root);
  const std::string dir = root + "/devices/system/node";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/online") << "0-7\n";
  for (int n = 0; n < 8; ++n) {
    const std::string nd = dir + "/node" + std::to_string(n);
    std::filesystem::create_directories(nd);
    std::ofstream d(nd + "/distance");
    for (int j = 0; j < 8; ++j) d << kSeed001[n * 8 + j] << (j == 7 ? "\n" : " ");
    std::ofstream(nd + "/cpulist") << 4 * n << "-" << 4 * n + 3 << "\n";
    std::ofstream(nd + "/meminfo") << "Node " << n << " MemTotal:        2097152 kB\nNode " << n
                                   << " MemFree:          100000 kB\n";
  }
  return root;
}

TEST(NumapTopology, ReadsAFakeSysfsTree) {
  const std::string root = make_fake_sysfs();
  Topology t;
  ASSERT_TRUE(topology_from_sysfs(&t, root.c_str(), 0, nullptr, 0));
  EXPECT_EQ(t.count, 8);
  EXPECT_EQ(t.allowed_count(), 8);
  EXPECT_FALSE(t.bound);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(t.distance[i][j], kSeed001[i * 8 + j]);
  EXPECT_EQ(t.capacity[3], 2ull << 30);
  EXPECT_EQ(t.node_of_cpu(13), 3);
  EXPECT_EQ(order(t, 5, nullptr, 16), (std::vector<int>{5, 4, 6, 7}));
  EXPECT_TRUE(numa_enabled(t, -1));

  // Mems_allowed of one node: NUMA mode off.
  ASSERT_TRUE(topology_from_sysfs(&t, root.c_str(), 1ull << 6, nullptr, 0));
  EXPECT_EQ(t.allowed, 1ull << 6);
  EXPECT_FALSE(numa_enabled(t, -1));

  // CPU affinity inside node 2 only (numactl -N 2): bound, NUMA mode off.
  std::uint64_t cpus[16] = {0xF00};
  ASSERT_TRUE(topology_from_sysfs(&t, root.c_str(), 0, cpus, 16));
  EXPECT_TRUE(t.bound);
  EXPECT_FALSE(numa_enabled(t, -1));
  std::filesystem::remove_all(root);
}

TEST(NumapTopology, MissingSysfsFallsBackToOneNode) {
  Topology t;
  topology_detect(&t, "/nonexistent", 0, 123);
  EXPECT_EQ(t.count, 1);
  EXPECT_EQ(t.capacity[0], 123u);
  EXPECT_FALSE(numa_enabled(t, -1));
}

}  // namespace
}  // namespace numap
