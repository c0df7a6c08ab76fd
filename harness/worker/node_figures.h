// The per-node part of a phase record (`nodes`): for every node of the machine, the crew threads
// that ended the phase on it and their operations, the process's resident bytes there
// (/proc/self/numa_maps), the local fraction of the sampled blocks allocated from its CPUs
// (move_pages in query mode on the addresses in workloads/address_sample.h's rings) and the
// sampled call latencies of the threads whose last timed call ran on its CPUs (call_latency.h's
// slots, crew and pool threads alike), and the whole system's huge-page bytes on the node at the
// phase end (/sys/devices/system/node/nodeN/meminfo AnonHugePages: every process's, not only ours).
//
// Everything it needs is made in the constructor, before the first phase; after_phase() runs
// after the phase was measured, and the figures it costs (numa_maps read, move_pages query) are
// reported with it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "harness/metrics/proc.h"
#include "harness/topology/topology.h"
#include "workloads/address_sample.h"
#include "workloads/call_latency.h"

namespace allocmark::worker {

class NodeFigures {
 public:
  NodeFigures(topology::Topology topo, int threads);
  // The node of a CPU (-1 unknown).
  int node_of_cpu(int cpu) const;
  // Reads every node's system-wide AnonHugePages (allocation-free): the worker calls it right after
  // the process's own (smaps_rollup), so the two are as close as they can be. after_phase() reports
  // this reading; returns how long it took (ns), for the phase's placement_cost.
  int64_t read_system_huge();
  // `last_cpus` and `ops` per crew thread; `latency` the phase's timed calls by slot (null: calls
  // not timed, each node's `latency` is null). Returns the `nodes` list; `cost` gets
  // {"numa_maps_ns", "move_pages_ns", "sampled_addresses", "node_meminfo_ns"} (the last from
  // read_system_huge(); without that call each node's system_anon_huge_bytes is null).
  nlohmann::json after_phase(const std::vector<int>& last_cpus, const std::vector<uint64_t>& ops,
                             const workloads::call_latency::PerSlot* latency, nlohmann::json& cost);

 private:
  topology::Topology topo_;
  int threads_;
  std::vector<int> node_index_of_cpu_;  // by CPU number
  std::vector<int> node_ids_;
  metrics::SystemNodeHuge system_huge_;
  int64_t system_huge_ns_ = 0;
  std::vector<workloads::address_sample::Sample> samples_;
  std::vector<void*> pages_;
  std::vector<int> status_;
};

}  // namespace allocmark::worker
