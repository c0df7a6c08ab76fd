// NodeFigures on an injected two-node topology: each slot's latency counts on the node of its
// CPU, each crew thread's ops on the node it ended on, and a slot without a timed call nowhere.
// numa_maps and move_pages are this machine's (one node): the residency is checked elsewhere
// (tests/placement_test.py, the lab).
#include "harness/worker/node_figures.h"

#include <gtest/gtest.h>

namespace allocmark::worker {
namespace {

topology::Topology two_nodes() {
  topology::Topology t;
  t.name = "two";
  t.nodes = {{0, {0}, 1 << 30, {10, 20}}, {1, {1}, 1 << 30, {20, 10}}};
  return t;
}

void time_calls(workloads::LatencyHistogram& h, int count, uint64_t ns) {
  for (int i = 0; i < count; ++i) h.record(ns);
}

TEST(NodeFigures, LatencyAndOpsCountOnTheNodeOfTheirCpu) {
  NodeFigures figures(two_nodes(), 2);
  workloads::call_latency::PerSlot slots;
  slots.allocs.resize(4);
  slots.frees.resize(4);
  slots.cpus = {1, 0, 1, -1};  // crew 0 on CPU 1, crew 1 on CPU 0, a pool slot on CPU 1, one idle
  time_calls(slots.allocs[0], 10, 100);
  time_calls(slots.allocs[1], 5, 1000);
  time_calls(slots.allocs[2], 10, 300);
  time_calls(slots.frees[2], 3, 50);
  time_calls(slots.allocs[3], 7, 9);  // no CPU: counted in the phase's totals only
  nlohmann::json cost;
  nlohmann::json nodes = figures.after_phase({1, 0}, {700, 300}, &slots, cost);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0]["node"], 0);
  EXPECT_EQ(nodes[0]["threads"], nlohmann::json::array({1}));
  EXPECT_EQ(nodes[0]["ops"], 300);
  EXPECT_EQ(nodes[0]["latency"]["malloc"]["samples"], 5);
  EXPECT_EQ(nodes[0]["latency"]["malloc"]["max_ns"], 1000);
  EXPECT_EQ(nodes[0]["latency"]["free"]["samples"], 0);
  EXPECT_TRUE(nodes[0]["latency"]["free"]["p99_ns"].is_null());
  EXPECT_EQ(nodes[1]["threads"], nlohmann::json::array({0}));
  EXPECT_EQ(nodes[1]["ops"], 700);
  EXPECT_EQ(nodes[1]["latency"]["malloc"]["samples"], 20) << "crew 0 and the pool slot";
  EXPECT_EQ(nodes[1]["latency"]["malloc"]["max_ns"], 300);
  EXPECT_EQ(nodes[1]["latency"]["free"]["samples"], 3);
  EXPECT_TRUE(cost.contains("numa_maps_ns"));

  // Calls not timed: every node's latency is null, the rest unchanged.
  nodes = figures.after_phase({1, 0}, {700, 300}, nullptr, cost);
  EXPECT_TRUE(nodes[0]["latency"].is_null());
  EXPECT_EQ(nodes[1]["ops"], 700);
}

}  // namespace
}  // namespace allocmark::worker
