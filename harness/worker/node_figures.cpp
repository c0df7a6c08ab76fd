#include "harness/worker/node_figures.h"

#include <numaif.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

#include "harness/metrics/phase_record.h"
#include "harness/metrics/proc.h"
#include "harness/metrics/derived.h"
#include "harness/worker/phase_contention.h"
#include "harness/os/clock.h"

namespace allocmark::worker {

namespace {

int64_t now_ns() { return allocmark::os::monotonic_ns(); }

}  // namespace

NodeFigures::NodeFigures(topology::Topology topo, int threads) : topo_(std::move(topo)), threads_(threads) {
  for (std::size_t i = 0; i < topo_.nodes.size(); ++i)
    for (int cpu : topo_.nodes[i].cpus) {
      if (cpu >= static_cast<int>(node_index_of_cpu_.size())) node_index_of_cpu_.resize(cpu + 1, -1);
      node_index_of_cpu_[cpu] = static_cast<int>(i);
    }
  for (const auto& node : topo_.nodes) node_ids_.push_back(node.id);
  const std::size_t most = static_cast<std::size_t>(threads) * workloads::address_sample::kRingSize;
  samples_.resize(most);
  pages_.resize(most);
  status_.resize(most);
  workloads::address_sample::configure(threads);
}

int NodeFigures::node_of_cpu(int cpu) const {
  if (cpu < 0 || cpu >= static_cast<int>(node_index_of_cpu_.size()) || node_index_of_cpu_[cpu] < 0) return -1;
  return topo_.nodes[node_index_of_cpu_[cpu]].id;
}

int64_t NodeFigures::read_system_huge() {
  const int64_t t0 = now_ns();
  metrics::read_system_node_huge(node_ids_.data(), node_ids_.size(), system_huge_);
  system_huge_ns_ = now_ns() - t0;
  return system_huge_ns_;
}

nlohmann::json NodeFigures::after_phase(const std::vector<int>& last_cpus, const std::vector<uint64_t>& ops,
                                        const workloads::call_latency::PerSlot* latency, nlohmann::json& cost) {
  using nlohmann::json;
  const std::size_t nodes = topo_.nodes.size();
  auto index_of_cpu = [&](int cpu) {
    return cpu >= 0 && cpu < static_cast<int>(node_index_of_cpu_.size()) ? node_index_of_cpu_[cpu] : -1;
  };

  const int64_t t0 = now_ns();
  metrics::NodeResidency residency;
  const bool numa_maps_ok = metrics::read_numa_maps(0, residency);
  const int64_t t1 = now_ns();

  // A workload's pool rings (call_latency::reserve_pool_slots) come after the constructor's sizes.
  const std::size_t most = static_cast<std::size_t>(workloads::address_sample::rings()) * workloads::address_sample::kRingSize;
  if (samples_.size() < most) samples_.resize(most), pages_.resize(most), status_.resize(most);
  std::size_t count = 0;
  for (int r = 0; r < workloads::address_sample::rings(); ++r) count += workloads::address_sample::take(r, samples_.data() + count);
  const long page = ::sysconf(_SC_PAGESIZE);
  for (std::size_t i = 0; i < count; ++i)
    pages_[i] = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(samples_[i].address) & ~static_cast<uintptr_t>(page - 1));
  // nodes = NULL: only ask where each page is (status: its node, or -ENOENT/-EFAULT when absent).
  const bool query_ok = count == 0 || move_pages(0, count, pages_.data(), nullptr, status_.data(), 0) == 0;
  const int64_t t2 = now_ns();

  std::vector<uint64_t> sampled(nodes, 0), local(nodes, 0), node_ops(nodes, 0);
  std::vector<std::vector<int>> on_node(nodes);
  if (query_ok)
    for (std::size_t i = 0; i < count; ++i) {
      int from = index_of_cpu(samples_[i].cpu);
      if (from < 0 || status_[i] < 0) continue;  // page gone (unmapped or never touched): not a resident block
      sampled[from]++;
      if (status_[i] == topo_.nodes[from].id) local[from]++;
    }
  for (int t = 0; t < threads_; ++t)
    if (int n = index_of_cpu(last_cpus[t]); n >= 0) {
      on_node[n].push_back(t);
      node_ops[n] += ops[t];
    }

  // Each slot's histograms count on the node of its last timed call's CPU.
  std::vector<workloads::LatencyHistogram> allocs(latency ? nodes : 0), frees(latency ? nodes : 0);
  if (latency)
    for (std::size_t slot = 0; slot < latency->cpus.size(); ++slot)
      if (int n = index_of_cpu(latency->cpus[slot]); n >= 0) {
        allocs[n].merge(latency->allocs[slot]);
        frees[n].merge(latency->frees[slot]);
      }

  json out = json::array();
  for (std::size_t n = 0; n < nodes; ++n) {
    const int id = topo_.nodes[n].id;
    metrics::PhaseNodeFigures f;
    f.node = id;
    f.threads = on_node[n];
    f.ops = node_ops[n];
    if (numa_maps_ok && id < metrics::kMaxNumaNodes) f.resident_bytes = residency.bytes[id];
    if (query_ok) f.sampled_blocks = sampled[n], f.local_blocks = local[n];
    f.local_fraction = results::local_fraction(static_cast<double>(local[n]), static_cast<double>(sampled[n]));
    if (latency)
      f.latency = json{{"malloc", metrics::latency_record(PhaseContentionProbe::summary(allocs[n]))},
                       {"free", metrics::latency_record(PhaseContentionProbe::summary(frees[n]))}};
    if (id >= 0 && id < metrics::kMaxNumaNodes) {
      f.system_anon_huge_bytes = system_huge_.bytes[id];
      system_huge_.bytes[id].reset();  // one phase's reading: the next needs its own
    }
    out.push_back(metrics::node_record(f));
  }
  cost = {{"numa_maps_ns", t1 - t0}, {"move_pages_ns", t2 - t1}, {"sampled_addresses", count}, {"node_meminfo_ns", system_huge_ns_}};
  system_huge_ns_ = 0;
  return out;
}

}  // namespace allocmark::worker
