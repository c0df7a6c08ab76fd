#include "harness/topology/topology.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace allocmark::topology {
namespace {

namespace fs = std::filesystem;

class TopologyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("topology_test." + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text, const std::string& name = "t.toml") {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // The message of the TopologyError loading `text` throws ("" if it loads).
  std::string error_of(const std::string& text) {
    try {
      load_topology_file(write(text));
    } catch (const TopologyError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

constexpr const char* kTwoNodes = R"(name = "pair"
[[node]]
id = 0
cpus = "0-1"
memory = "1G"
distances = [10, 21]

[[node]]
id = 1
cpus = "2,3"
memory = "512M"
distances = [21, 10]
)";

TEST_F(TopologyFile, ReadsNodesCpusMemoryAndDistances) {
  Topology t = load_topology_file(write(kTwoNodes));
  ASSERT_EQ(t.nodes.size(), 2u);
  EXPECT_EQ(t.name, "pair");
  EXPECT_EQ(t.nodes[0].cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.nodes[1].cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(t.nodes[0].memory_bytes, 1ull << 30);
  EXPECT_EQ(t.nodes[1].memory_bytes, 512ull << 20);
  EXPECT_EQ(t.distance(0, 1), 21);
  EXPECT_EQ(t.node_index_of_cpu(3), 1);
  EXPECT_EQ(t.node_index_of_cpu(7), -1);
  EXPECT_EQ(t.cpu_count(), 4);
}

TEST_F(TopologyFile, TheSeedsEightNodeTableIsTheOneShipped) {
  Topology t = load_topology_file(std::string(ALLOCMARK_CONFIG_DIR) + "/topologies/seed-8node.toml");
  ASSERT_EQ(t.nodes.size(), 8u);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(t.distance(i, j), i == j ? 10 : (i / 4 == j / 4 ? 16 : 32)) << i << "->" << j;
}

TEST_F(TopologyFile, EveryShippedFileLoads) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(std::string(ALLOCMARK_CONFIG_DIR) + "/topologies")) {
    EXPECT_NO_THROW(load_topology_file(e.path().string())) << e.path();
    ++files;
  }
  EXPECT_GE(files, 3);
}

TEST_F(TopologyFile, WritesWhatItReads) {
  Topology t = load_topology_file(write(kTwoNodes));
  Topology again = load_topology_file(write(to_toml(t), "again.toml"));
  EXPECT_EQ(to_json(again)["nodes"], to_json(t)["nodes"]);
}

TEST_F(TopologyFile, MalformedFilesNameTheProblemAndWhere) {
  std::string two = kTwoNodes;
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = two;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_NE(error_of(replaced("distances = [21, 10]", "distances = [22, 10]")).find("asymmetric distances: 0->1 is 21 but 1->0 is 22"), std::string::npos);
  EXPECT_NE(error_of(replaced("distances = [21, 10]", "distances = [21]")).find("node 1 has 1 distances; it needs one per node (2)"), std::string::npos);
  EXPECT_NE(error_of(replaced("cpus = \"2,3\"", "cpus = \"1-2\"")).find("CPU 1 is in node 0 and in node 1"), std::string::npos);
  EXPECT_NE(error_of(replaced("distances = [10, 21]", "distances = [12, 21]")).find("distance 0->0 is 12"), std::string::npos);
  EXPECT_NE(error_of(replaced("distances = [10, 21]", "distances = [10, 300]")).find("remote distances are 11..254"), std::string::npos);
  EXPECT_NE(error_of(replaced("cpus = \"2,3\"", "cpus = \"3-2\"")).find("t.toml:10:8: 'cpus': range '3-2'"), std::string::npos);
  EXPECT_NE(error_of(replaced("memory = \"512M\"", "memory = \"lots\"")).find("t.toml:11:10: 'memory' not a size"), std::string::npos);
  EXPECT_NE(error_of(replaced("memory = \"512M\"", "memory = \"512M\"\nsocket = 1")).find("t.toml:12:1: unknown key 'socket' in [[node]]"), std::string::npos);
  EXPECT_NE(error_of(replaced("id = 1", "id = 0")).find("increasing order"), std::string::npos);
  EXPECT_NE(error_of(replaced("memory = \"1G\"", "memory = \"0\"")).find("node 0 has no memory"), std::string::npos);
  EXPECT_NE(error_of(replaced("id = 1\n", "")).find("[[node]] has no 'id'"), std::string::npos);
  EXPECT_NE(error_of("name = \"x\"\n").find("no [[node]] tables"), std::string::npos);
  EXPECT_NE(error_of("[[node]\n").find("t.toml:1:"), std::string::npos);
}

TEST(Lists, ParseAndFormatKernelLists) {
  EXPECT_EQ(parse_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_list(""), std::vector<int>{});
  EXPECT_EQ(format_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_THROW(parse_list("1,1"), std::invalid_argument);
  EXPECT_THROW(parse_list("a"), std::invalid_argument);
  EXPECT_THROW(parse_list("4-2"), std::invalid_argument);
}

TEST_F(TopologyFile, DetectsAFakeSysfsAndKeepsOnlyOnlineColumns) {
  fs::path node = dir_ / "sys/devices/system/node";
  fs::create_directories(node / "node0");
  fs::create_directories(node / "node2");
  std::ofstream(node / "online") << "0,2\n";
  std::ofstream(node / "node0/cpulist") << "0-1\n";
  std::ofstream(node / "node2/cpulist") << "2-3\n";
  std::ofstream(node / "node0/meminfo") << "Node 0 MemTotal:       1048576 kB\nNode 0 MemFree: 1 kB\n";
  std::ofstream(node / "node2/meminfo") << "Node 2 MemTotal:        524288 kB\n";
  std::ofstream(node / "node0/distance") << "10 20 30\n";
  std::ofstream(node / "node2/distance") << "30 20 10\n";
  Topology t = detect((dir_ / "sys").string());
  ASSERT_EQ(t.nodes.size(), 2u);
  EXPECT_EQ(t.nodes[1].id, 2);
  EXPECT_EQ(t.nodes[0].memory_bytes, 1ull << 30);
  EXPECT_EQ(t.nodes[0].distances, (std::vector<int>{10, 30}));
  EXPECT_EQ(t.nodes[1].distances, (std::vector<int>{30, 10}));
  EXPECT_NO_THROW(validate(t, "fake"));
}

TEST(Detect, TheRunningKernelGivesAValidTopology) {
  Topology t = detect();
  EXPECT_NO_THROW(validate(t, "this machine"));
  EXPECT_GE(t.cpu_count(), 1);
}

}  // namespace
}  // namespace allocmark::topology
