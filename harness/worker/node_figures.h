// The per-node part of a phase record (`nodes`): for every node of the machine, the crew threads
// that ended the phase on it and their operations, the process's resident bytes there
// (/proc/self/numa_maps) and the local fraction of the sampled blocks those threads allocated
// (move_pages in query mode on the addresses in workloads/address_sample.h's rings).
//
// Everything it needs is made in the constructor, before the first phase; after_phase() runs
// after the phase was measured, and the figures it costs (numa_maps read, move_pages query) are
// reported with it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "harness/topology/topology.h"
#include "workloads/address_sample.h"

namespace allocmark::worker {

class NodeFigures {
 public:
  NodeFigures(topology::Topology topo, int threads);
  // The node of a CPU (-1 unknown).
  int node_of_cpu(int cpu) const;
  // `last_cpus` and `ops` per crew thread. Returns the `nodes` list; `cost` gets
  // {"numa_maps_ns", "move_pages_ns", "sampled_blocks"}.
  nlohmann::json after_phase(const std::vector<int>& last_cpus, const std::vector<uint64_t>& ops, nlohmann::json& cost);

 private:
  topology::Topology topo_;
  int threads_;
  std::vector<int> node_index_of_cpu_;  // by CPU number
  std::vector<workloads::address_sample::Sample> samples_;
  std::vector<void*> pages_;
  std::vector<int> status_;
};

}  // namespace allocmark::worker
