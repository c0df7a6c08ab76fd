#include "harness/placement/placement.h"

#include <numa.h>
#include <numaif.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

namespace allocmark::placement {

namespace {

std::string list_text(const std::vector<int>& ids) { return ids.empty() ? "" : topology::format_list(ids); }

bool contains(const std::vector<int>& sorted, int v) { return std::binary_search(sorted.begin(), sorted.end(), v); }

}  // namespace

std::string PinSpec::pin_text() const {
  switch (kind) {
    case Kind::none: return "none";
    case Kind::compact: return "compact";
    case Kind::scatter: return "scatter";
    case Kind::cpus: return list_text(cpus);
  }
  return "?";
}

std::string PinSpec::nodes_text() const { return list_text(nodes); }

PinSpec parse_pin(const std::string& pin, const std::string& nodes) {
  PinSpec spec;
  if (pin == "none") spec.kind = PinSpec::Kind::none;
  else if (pin == "compact") spec.kind = PinSpec::Kind::compact;
  else if (pin == "scatter") spec.kind = PinSpec::Kind::scatter;
  else {
    spec.kind = PinSpec::Kind::cpus;
    try {
      spec.cpus = topology::parse_list(pin);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("pin '" + pin + "' is not none, compact, scatter or a CPU list such as 0,2-3 (" + e.what() + ")");
    }
    if (spec.cpus.empty()) throw std::invalid_argument("pin: empty; give none, compact, scatter or a CPU list such as 0,2-3");
  }
  if (!nodes.empty()) {
    try {
      spec.nodes = topology::parse_list(nodes);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("nodes '" + nodes + "' is not a node list such as 0-1 (" + e.what() + ")");
    }
  }
  if (spec.kind == PinSpec::Kind::none && !spec.nodes.empty())
    throw std::invalid_argument("nodes '" + nodes + "' needs pinning: with pin none the threads are not placed (use compact or scatter)");
  return spec;
}

Allowed current_allowed() {
  Allowed a;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) a.cpus.push_back(c);
  if (numa_available() >= 0) {
    bitmask* mems = numa_get_mems_allowed();
    for (unsigned n = 0; mems && n < mems->size; ++n)
      if (numa_bitmask_isbitset(mems, n)) a.mem_nodes.push_back(static_cast<int>(n));
    if (mems) numa_bitmask_free(mems);
  }
  if (a.mem_nodes.empty()) a.mem_nodes = {0};
  return a;
}

namespace {

void check_nodes(const topology::Topology& topo, const Allowed& allowed, const PinSpec& spec) {
  for (int n : spec.nodes) {
    int index = topo.index_of_node(n);
    if (index < 0) {
      std::vector<int> ids;
      for (const auto& node : topo.nodes) ids.push_back(node.id);
      throw PlacementError("nodes", "node " + std::to_string(n) + " does not exist (this machine has nodes " + list_text(ids) + ")");
    }
    if (!contains(allowed.mem_nodes, n))
      throw PlacementError("nodes", "node " + std::to_string(n) + "'s memory is not allowed to this process (allowed memory nodes: " +
                           list_text(allowed.mem_nodes) + ")");
  }
}

std::vector<int> allowed_cpus_of(const topology::Node& node, const Allowed& allowed) {
  std::vector<int> out;
  for (int cpu : node.cpus)
    if (contains(allowed.cpus, cpu)) out.push_back(cpu);
  return out;
}

// Allowed CPUs per node, nodes ascending; CPUs the topology places on no node form their own group.
std::vector<std::vector<int>> cpus_per_node(const topology::Topology& topo, const Allowed& allowed, const PinSpec& spec, Placement& p) {
  std::vector<std::vector<int>> per_node;
  std::vector<int> unplaced;
  for (int cpu : allowed.cpus)
    if (topo.node_index_of_cpu(cpu) < 0) unplaced.push_back(cpu);
  if (!spec.nodes.empty()) {
    for (int n : spec.nodes) {
      std::vector<int> cpus = allowed_cpus_of(topo.nodes[topo.index_of_node(n)], allowed);
      if (cpus.empty())
        throw PlacementError("nodes", "node " + std::to_string(n) + " has no CPU this process may run on (allowed CPUs: " +
                             list_text(allowed.cpus) + ")");
      per_node.push_back(std::move(cpus));
    }
    p.membind = spec.nodes;
  } else if (spec.kind != PinSpec::Kind::cpus) {
    for (const auto& node : topo.nodes)
      if (contains(allowed.mem_nodes, node.id))
        if (auto cpus = allowed_cpus_of(node, allowed); !cpus.empty()) per_node.push_back(std::move(cpus));
    if (per_node.empty()) {
      // e.g. numactl --cpunodebind=0 --membind=1: no CPU beside the allowed memory; run where allowed.
      for (const auto& node : topo.nodes)
        if (auto cpus = allowed_cpus_of(node, allowed); !cpus.empty()) per_node.push_back(std::move(cpus));
      p.notes.push_back("no allowed CPU is on an allowed memory node (memory nodes " + list_text(allowed.mem_nodes) +
                        "); threads placed on every allowed CPU");
    }
    if (!unplaced.empty()) per_node.push_back(unplaced);
  }
  return per_node;
}

// A CPU list must be allowed, and on the nodes asked for when there are some.
void check_pinned_cpus(const Allowed& allowed, const PinSpec& spec, const std::vector<std::vector<int>>& per_node) {
  std::set<int> eligible;
  for (const auto& cpus : per_node) eligible.insert(cpus.begin(), cpus.end());
  for (int cpu : spec.cpus) {
    if (!contains(allowed.cpus, cpu))
      throw PlacementError("pin", "CPU " + std::to_string(cpu) + " is not allowed to this process (allowed CPUs: " +
                           list_text(allowed.cpus) + "; see taskset, numactl or the cpuset)");
    if (!spec.nodes.empty() && !eligible.count(cpu))
      throw PlacementError("pin", "CPU " + std::to_string(cpu) + " is not on the nodes asked for (--nodes " + spec.nodes_text() + ")");
  }
}

// The CPUs threads take in turn: node by node (compact), one per node per round (scatter), or as listed.
std::vector<int> candidate_cpus(const Allowed& allowed, const PinSpec& spec, const std::vector<std::vector<int>>& per_node) {
  std::vector<int> out;
  switch (spec.kind) {
    case PinSpec::Kind::compact:
      for (const auto& cpus : per_node) out.insert(out.end(), cpus.begin(), cpus.end());
      break;
    case PinSpec::Kind::scatter:
      for (std::size_t round = 0;; ++round) {
        bool any = false;
        for (const auto& cpus : per_node)
          if (round < cpus.size()) out.push_back(cpus[round]), any = true;
        if (!any) break;
      }
      break;
    case PinSpec::Kind::cpus:
      check_pinned_cpus(allowed, spec, per_node);
      out = spec.cpus;
      break;
    case PinSpec::Kind::none: break;
  }
  return out;
}

}  // namespace

Placement plan_placement(const topology::Topology& topo, const Allowed& allowed, const PinSpec& spec, int threads) {
  Placement p;
  p.spec = spec;
  check_nodes(topo, allowed, spec);
  if (spec.kind == PinSpec::Kind::none) return p;
  const std::vector<std::vector<int>> per_node = cpus_per_node(topo, allowed, spec, p);
  if (per_node.empty() && spec.kind != PinSpec::Kind::cpus) throw PlacementError("no CPU is allowed to this process (sched_getaffinity)");
  p.candidate_cpus = candidate_cpus(allowed, spec, per_node);
  p.oversubscribed = threads > static_cast<int>(p.candidate_cpus.size());
  for (int i = 0; i < threads; ++i) {
    int cpu = p.candidate_cpus[static_cast<std::size_t>(i) % p.candidate_cpus.size()];
    int index = topo.node_index_of_cpu(cpu);
    p.thread_cpus.push_back(cpu);
    p.thread_nodes.push_back(index < 0 ? -1 : topo.nodes[index].id);
  }
  return p;
}

std::string apply_memory_binding(const std::vector<int>& nodes) {
  if (nodes.empty()) return "";
  constexpr int kBits = 8 * sizeof(unsigned long);
  std::vector<unsigned long> mask((topology::kMaxNodes + kBits - 1) / kBits + 1, 0);
  for (int n : nodes) {
    if (n < 0 || n >= topology::kMaxNodes) return "node " + std::to_string(n) + " is beyond the supported " + std::to_string(topology::kMaxNodes);
    mask[n / kBits] |= 1UL << (n % kBits);
  }
  if (set_mempolicy(MPOL_BIND, mask.data(), mask.size() * kBits) != 0)
    return "binding memory to nodes " + topology::format_list(nodes) + " was refused: " + std::strerror(errno);
  return "";
}

nlohmann::json to_json(const Placement& p) {
  using nlohmann::json;
  const bool pinned = p.spec.kind != PinSpec::Kind::none;
  return {{"pin", p.spec.pin_text()},
          {"nodes", p.spec.nodes.empty() ? json(nullptr) : json(p.spec.nodes_text())},
          {"candidate_cpus", pinned ? json(p.candidate_cpus) : json(nullptr)},
          {"thread_cpus", pinned ? json(p.thread_cpus) : json(nullptr)},
          {"thread_nodes", pinned ? json(p.thread_nodes) : json(nullptr)},
          {"membind", p.membind.empty() ? json(nullptr) : json(topology::format_list(p.membind))},
          {"oversubscribed", p.oversubscribed},
          {"notes", p.notes}};
}

nlohmann::json to_json(const Allowed& a) { return {{"cpus", list_text(a.cpus)}, {"mem_nodes", list_text(a.mem_nodes)}}; }

}  // namespace allocmark::placement
