// The NUMA placement rule on the 8-node machine of seed 001 (distances 10/16/32), without NUMA
// hardware: from a hand-built table, and from a fake sysfs tree read by the real parser.
#include "allocators/numap/topology.h"

#include "allocators/numap/tests/topology_support.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "allocators/numap/os.h"

namespace numap {
namespace {

std::vector<int> order(const Topology& t, int from, const std::uint64_t* free_bytes, int limit) {
  int out[kMaxNodes];
  int n = fallback_order(t, from, free_bytes, limit, out);
  return std::vector<int>(out, out + n);
}

TEST(NumapTopology, FallbackInIncreasingDistanceLikeTheSeed) {
  Topology t = testing::load_config("seed-8node");
  // The seed's table: equal free memory, so ties go to the lower node number.
  EXPECT_EQ(order(t, 0, nullptr, 0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(order(t, 2, nullptr, 0), (std::vector<int>{2, 0, 1, 3, 4, 5, 6, 7}));
  EXPECT_EQ(order(t, 5, nullptr, 0), (std::vector<int>{5, 4, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(order(t, 7, nullptr, 0), (std::vector<int>{7, 4, 5, 6, 0, 1, 2, 3}));
}

TEST(NumapTopology, DistanceLimitStopsTheFallback) {
  Topology t = testing::load_config("seed-8node");
  EXPECT_EQ(order(t, 0, nullptr, 16), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(order(t, 6, nullptr, 16), (std::vector<int>{6, 4, 5, 7}));
  EXPECT_EQ(order(t, 6, nullptr, 10), (std::vector<int>{6}));
}

TEST(NumapTopology, TiesGoToTheNodeWithMostFreeMemory) {
  Topology t = testing::load_config("seed-8node");
  // The seed's example: lgrp1 10%, lgrp2 5%, lgrp3 50% free -> node 3 first.
  const std::uint64_t free_bytes[8] = {0, 10, 5, 50, 90, 80, 70, 60};
  EXPECT_EQ(order(t, 0, free_bytes, 0), (std::vector<int>{0, 3, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(order(t, 4, free_bytes, 0), (std::vector<int>{4, 5, 6, 7, 3, 1, 2, 0}));
}

TEST(NumapTopology, DisallowedNodesAreSkipped) {
  Topology t = testing::load_config("seed-8node");
  t.allowed = 0b00001011;  // nodes 0, 1, 3
  EXPECT_EQ(order(t, 0, nullptr, 0), (std::vector<int>{0, 1, 3}));
}

TEST(NumapTopology, NumaSwitchesOffOnOneNodeOrABoundProcess) {
  Topology t;
  topology_single(&t, 1ull << 30);
  EXPECT_FALSE(numa_enabled(t, -1));
  EXPECT_TRUE(numa_enabled(t, 1));
  t = testing::load_config("seed-8node");
  EXPECT_TRUE(numa_enabled(t, -1));
  EXPECT_FALSE(numa_enabled(t, 0));
  t.allowed = 1u << 5;  // memory of one node only (cpuset or MPOL_BIND)
  EXPECT_FALSE(numa_enabled(t, -1));
  t.allowed = 0xff;
  t.bound = true;       // CPUs of one node only (numactl -N)
  EXPECT_FALSE(numa_enabled(t, -1));
}

TEST(NumapTopology, MemoryIsStrictlyBoundWhenANodeWithMemoryIsNotAllowed) {
  Topology t = testing::load_config("seed-8node");
  EXPECT_FALSE(t.mem_bound());
  t.bound = true;  // CPUs of one node (numactl -N 0): memory still falls back, not a strict binding
  EXPECT_FALSE(t.mem_bound());
  t.allowed = 1;  // numactl --membind=0, or a cpuset's mems
  EXPECT_TRUE(t.mem_bound());
  t.allowed = 0b11;
  EXPECT_TRUE(t.mem_bound());
  // Nodes without memory (CPUs only) left out of the cpuset's mems are no binding.
  t.allowed = 0x0f;
  for (int i = 4; i < 8; ++i) t.capacity[i] = 0;
  EXPECT_FALSE(t.mem_bound());
  Topology one;
  topology_single(&one, 1ull << 30);
  EXPECT_FALSE(one.mem_bound());
}

// The real get_mempolicy (os.cpp): MPOL_BIND, also with the mode flags the kernel reports with it
// (numactl --membind=0 --balancing sets MPOL_F_NUMA_BALANCING), is a binding; MPOL_PREFERRED and
// the default are not. Set in a thread of its own (the policy is per thread).
TEST(NumapTopology, PolicyNodesReadsABindingAndItsModeFlags) {
  constexpr int kDefault = 0, kPreferred = 1, kBind = 2, kStatic = 1 << 15, kBalancing = 1 << 13;
  std::string skipped;
  std::thread([&] {
    auto under = [&](int mode, unsigned long mask) -> long long {
      if (syscall(SYS_set_mempolicy, mode, mode == kDefault ? nullptr : &mask, mode == kDefault ? 0 : 64) != 0)
        return -errno;
      return static_cast<long long>(real_os().policy_nodes());
    };
    const long long bind = under(kBind, 1);
    if (bind < 0) {
      skipped = "set_mempolicy(MPOL_BIND) refused: errno " + std::to_string(-bind);
      return;
    }
    EXPECT_EQ(bind, 1);
    EXPECT_EQ(under(kBind | kStatic, 1), 1);
    const long long balancing = under(kBind | kBalancing, 1);
    if (balancing != -EINVAL) {  // the flag needs Linux 5.12
      EXPECT_EQ(balancing, 1);
    }
    EXPECT_EQ(under(kPreferred, 1), 0);
    EXPECT_EQ(under(kDefault, 0), 0);
  }).join();
  if (!skipped.empty()) GTEST_SKIP() << skipped;
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

// A fake /sys with the seed's 8 nodes (distances from configs/topologies), 4 CPUs and 2 GiB each.
std::string make_fake_sysfs() {
  const Topology seed = testing::load_config("seed-8node");
  std::string root = ::testing::TempDir() + "numap_sysfs_" + std::to_string(::getpid());
  std::filesystem::remove_all(root);
  const std::string dir = root + "/devices/system/node";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/online") << "0-7\n";
  for (int n = 0; n < 8; ++n) {
    const std::string nd = dir + "/node" + std::to_string(n);
    std::filesystem::create_directories(nd);
    std::ofstream d(nd + "/distance");
    for (int j = 0; j < 8; ++j) d << int{seed.distance[n][j]} << (j == 7 ? "\n" : " ");
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
  const Topology seed = testing::load_config("seed-8node");
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(t.distance[i][j], seed.distance[i][j]);
  EXPECT_EQ(t.capacity[3], 2ull << 30);
  EXPECT_EQ(t.node_of_cpu(13), 3);
  EXPECT_EQ(order(t, 5, nullptr, 16), (std::vector<int>{5, 4, 6, 7}));
  EXPECT_TRUE(numa_enabled(t, -1));

  EXPECT_FALSE(t.mem_bound());

  // Mems_allowed of one node: NUMA mode off, memory strictly bound.
  ASSERT_TRUE(topology_from_sysfs(&t, root.c_str(), 1ull << 6, nullptr, 0));
  EXPECT_EQ(t.allowed, 1ull << 6);
  EXPECT_FALSE(numa_enabled(t, -1));
  EXPECT_TRUE(t.mem_bound());

  // CPU affinity inside node 2 only (numactl -N 2): bound, NUMA mode off.
  std::uint64_t cpus[16] = {0xF00};
  ASSERT_TRUE(topology_from_sysfs(&t, root.c_str(), 0, cpus, 16));
  EXPECT_TRUE(t.bound);
  EXPECT_FALSE(numa_enabled(t, -1));
  EXPECT_FALSE(t.mem_bound());
  std::filesystem::remove_all(root);
}

// Reads a recorded kernel file line by line, as Os::read_lines does.
template <class Fn>
void feed(const std::string& path, Fn fn) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  for (std::string line; std::getline(in, line);) fn(line.c_str());
}

TEST(NumapTopology, WatermarksFromARecordedZoneinfo) {
  // This machine's /proc/zoneinfo (one node; per-CPU pagesets with `high:` lines that are not
  // watermarks): the zones' high watermarks are 27, 5994, 19317, 32 and 0 pages.
  ZoneinfoReader r;
  feed(std::string(NUMAP_TEST_DATA) + "/zoneinfo-1node.txt", [&](const char* l) { ZoneinfoReader::line(&r, l); });
  EXPECT_EQ(r.high_pages[0], 27u + 5994 + 19317 + 32 + 0);
  EXPECT_EQ(r.high_pages[1], 0u);
}

TEST(NumapTopology, WatermarksPerNodeFromTheLabGuestsZoneinfo) {
  // /proc/zoneinfo of Debian's 6.1 kernel in the 8-node guest (seed-8node.toml, 512 MiB per node,
  // five zones per node); the sums were taken with awk from the same file.
  ZoneinfoReader r;
  feed(std::string(NUMAP_TEST_DATA) + "/zoneinfo-8node-guest.txt", [&](const char* l) { ZoneinfoReader::line(&r, l); });
  const std::uint64_t expected[8] = {9581, 9603, 9603, 9603, 8761, 8379, 9603, 9552};
  for (int n = 0; n < 8; ++n) EXPECT_EQ(r.high_pages[n], expected[n]) << "node " << n;
  std::uint64_t kb = 0;
  bool found = false;
  feed(std::string(NUMAP_TEST_DATA) + "/meminfo-node3-guest.txt", [&](const char* l) {
    if (!found) found = meminfo_free_kb(l, &kb);
  });
  EXPECT_EQ(kb, 508820u);
}

TEST(NumapTopology, WatermarksPerNodeAndFreeFromMeminfo) {
  ZoneinfoReader r;
  const char* lines[] = {"Node 0, zone   Normal", "  pages free     1000", "        min      10",
                         "        low      12",    "        high     14",   "              high:  378",
                         "              high_min: 11", "Node 3, zone    DMA32", "        high     5",
                         "Node 3, zone   Normal", "        high     7"};
  for (const char* l : lines) ZoneinfoReader::line(&r, l);
  EXPECT_EQ(r.high_pages[0], 14u);
  EXPECT_EQ(r.high_pages[3], 12u);
  std::uint64_t kb = 0;
  bool found = false;
  feed(std::string(NUMAP_TEST_DATA) + "/meminfo-node0.txt", [&](const char* l) {
    if (!found) found = meminfo_free_kb(l, &kb);
  });
  EXPECT_TRUE(found);
  EXPECT_EQ(kb, 7832572u);  // the recorded "Node 0 MemFree:         7832572 kB"
  EXPECT_FALSE(meminfo_free_kb("Node 0 MemTotal:       13068060 kB", &kb));
  EXPECT_EQ(headroom_bytes(100, 30), 70u);
  EXPECT_EQ(headroom_bytes(20, 30), 0u);
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
