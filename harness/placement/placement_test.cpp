// Pin planning against multi-node topologies (the machine running the tests has one node; the
// lab runs the real multi-node kernel): each policy, --nodes, wrapping, the allowed set, errors.
#include "harness/placement/placement.h"

#include <gtest/gtest.h>

namespace allocmark::placement {
namespace {

using topology::Node;
using topology::Topology;

// Two nodes of four CPUs each, CPUs numbered per node (0-3 on node 0, 4-7 on node 1).
Topology two_by_four() {
  Topology t;
  t.name = "two-by-four";
  t.nodes = {Node{0, {0, 1, 2, 3}, 1 << 30, {10, 21}}, Node{1, {4, 5, 6, 7}, 1 << 30, {21, 10}}};
  return t;
}

// Four nodes whose CPUs interleave (0,4 on node 0; 1,5 on node 1; ...), as some BIOSes number them.
Topology four_interleaved() {
  Topology t;
  t.name = "four-interleaved";
  for (int n = 0; n < 4; ++n) t.nodes.push_back(Node{n, {n, n + 4}, 1 << 30, {}});
  for (auto& n : t.nodes)
    for (int m = 0; m < 4; ++m) n.distances.push_back(n.id == m ? 10 : 20);
  return t;
}

Allowed everything(const Topology& t) {
  Allowed a;
  for (const auto& n : t.nodes) {
    a.cpus.insert(a.cpus.end(), n.cpus.begin(), n.cpus.end());
    a.mem_nodes.push_back(n.id);
  }
  std::sort(a.cpus.begin(), a.cpus.end());
  return a;
}

std::string error_of(const Topology& t, const Allowed& a, const PinSpec& s, int threads) {
  try {
    plan_placement(t, a, s, threads);
  } catch (const PlacementError& e) {
    return e.what();
  }
  return "";
}

TEST(PinSpecParse, PoliciesListsAndNodes) {
  EXPECT_EQ(parse_pin("none", "").kind, PinSpec::Kind::none);
  EXPECT_EQ(parse_pin("compact", "").kind, PinSpec::Kind::compact);
  EXPECT_EQ(parse_pin("scatter", "0-1").nodes, (std::vector<int>{0, 1}));
  PinSpec list = parse_pin("6,0-2", "");
  EXPECT_EQ(list.kind, PinSpec::Kind::cpus);
  EXPECT_EQ(list.cpus, (std::vector<int>{0, 1, 2, 6}));
  EXPECT_EQ(list.pin_text(), "0-2,6");
  EXPECT_EQ(parse_pin("compact", "1,0").nodes_text(), "0-1");
}

TEST(PinSpecParse, BadValuesSayWhatIsWrong) {
  EXPECT_THROW(parse_pin("spread", ""), std::invalid_argument);
  EXPECT_THROW(parse_pin("", ""), std::invalid_argument);
  EXPECT_THROW(parse_pin("3-1", ""), std::invalid_argument);
  EXPECT_THROW(parse_pin("compact", "x"), std::invalid_argument);
  try {
    parse_pin("none", "0");
    FAIL() << "pin none with nodes must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs pinning"), std::string::npos) << e.what();
  }
}

TEST(PlanPlacement, CompactFillsANodeBeforeTheNext) {
  Topology t = two_by_four();
  Placement p = plan_placement(t, everything(t), parse_pin("compact", ""), 6);
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p.thread_nodes, (std::vector<int>{0, 0, 0, 0, 1, 1}));
  EXPECT_FALSE(p.oversubscribed);
  EXPECT_TRUE(p.membind.empty()) << "no --nodes: the inherited memory policy stays";
  // Interleaved numbering: still node by node, not CPU number order.
  Topology i = four_interleaved();
  EXPECT_EQ(plan_placement(i, everything(i), parse_pin("compact", ""), 4).thread_cpus, (std::vector<int>{0, 4, 1, 5}));
}

TEST(PlanPlacement, ScatterRoundRobinsAcrossNodes) {
  Topology t = two_by_four();
  Placement p = plan_placement(t, everything(t), parse_pin("scatter", ""), 4);
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{0, 4, 1, 5}));
  EXPECT_EQ(p.thread_nodes, (std::vector<int>{0, 1, 0, 1}));
  Topology i = four_interleaved();
  EXPECT_EQ(plan_placement(i, everything(i), parse_pin("scatter", ""), 5).thread_nodes, (std::vector<int>{0, 1, 2, 3, 0}));
}

TEST(PlanPlacement, ScatterWithUnevenNodesUsesEveryCpuOnce) {
  Topology t = two_by_four();
  Allowed a{{0, 1, 2, 3, 6}, {0, 1}};  // a cpuset leaving one CPU of node 1
  EXPECT_EQ(plan_placement(t, a, parse_pin("scatter", ""), 5).thread_cpus, (std::vector<int>{0, 6, 1, 2, 3}));
}

TEST(PlanPlacement, MoreThreadsThanCpusWrapAndAreRecorded) {
  Topology t = two_by_four();
  Placement p = plan_placement(t, Allowed{{4, 5}, {0, 1}}, parse_pin("compact", ""), 5);
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{4, 5, 4, 5, 4}));
  EXPECT_TRUE(p.oversubscribed);
  EXPECT_TRUE(to_json(p)["oversubscribed"].get<bool>());
}

TEST(PlanPlacement, CpuListUsedAsGivenWithinTheAllowedSet) {
  Topology t = two_by_four();
  Placement p = plan_placement(t, everything(t), parse_pin("1,6", ""), 3);
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{1, 6, 1}));
  EXPECT_EQ(p.thread_nodes, (std::vector<int>{0, 1, 0}));
  std::string e = error_of(t, Allowed{{0, 1}, {0, 1}}, parse_pin("5", ""), 1);
  EXPECT_NE(e.find("CPU 5 is not allowed"), std::string::npos) << e;
  EXPECT_NE(e.find("allowed CPUs: 0-1"), std::string::npos) << e;
  e = error_of(t, everything(t), parse_pin("1,6", "1"), 2);
  EXPECT_NE(e.find("CPU 1 is not on the nodes asked for"), std::string::npos) << e;
}

TEST(PlanPlacement, NodesRestrictCpusAndBindMemory) {
  Topology t = two_by_four();
  Placement p = plan_placement(t, everything(t), parse_pin("compact", "1"), 2);
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(p.membind, (std::vector<int>{1}));
  Topology i = four_interleaved();
  Placement s = plan_placement(i, everything(i), parse_pin("scatter", "1,3"), 4);
  EXPECT_EQ(s.thread_cpus, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(s.membind, (std::vector<int>{1, 3}));
}

TEST(PlanPlacement, AllowedMemoryKeepsThreadsBesideIt) {
  // numactl --membind=1 without --cpunodebind: threads go to node 1's CPUs.
  Topology t = two_by_four();
  Allowed a = everything(t);
  a.mem_nodes = {1};
  EXPECT_EQ(plan_placement(t, a, parse_pin("compact", ""), 2).thread_cpus, (std::vector<int>{4, 5}));
  // --cpunodebind=0 --membind=1: no CPU beside the memory; every allowed CPU, with a note.
  Placement p = plan_placement(t, Allowed{{0, 1, 2, 3}, {1}}, parse_pin("compact", ""), 2);
  EXPECT_EQ(p.thread_cpus, (std::vector<int>{0, 1}));
  ASSERT_EQ(p.notes.size(), 1u);
}

TEST(PlanPlacement, NodeErrorsNameTheNode) {
  Topology t = two_by_four();
  std::string e = error_of(t, everything(t), parse_pin("compact", "2"), 1);
  EXPECT_NE(e.find("node 2 does not exist"), std::string::npos) << e;
  e = error_of(t, Allowed{{0, 1, 2, 3, 4}, {0}}, parse_pin("compact", "1"), 1);
  EXPECT_NE(e.find("node 1's memory is not allowed"), std::string::npos) << e;
  e = error_of(t, Allowed{{0, 1}, {0, 1}}, parse_pin("scatter", "1"), 1);
  EXPECT_NE(e.find("node 1 has no CPU"), std::string::npos) << e;
}

TEST(PlanPlacement, NoneLeavesThreadsWhereTheKernelPutsThem) {
  Topology t = two_by_four();
  Placement p = plan_placement(t, everything(t), parse_pin("none", ""), 3);
  EXPECT_TRUE(p.thread_cpus.empty());
  EXPECT_TRUE(to_json(p)["thread_cpus"].is_null());
}

}  // namespace
}  // namespace allocmark::placement
