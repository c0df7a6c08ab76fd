// Where a cell's worker threads run: the pinning policy (`--pin`, `--nodes`, matrix keys `pin` and
// `nodes`), planned against the machine's topology and what the process may use (its CPU affinity
// and allowed memory nodes, so a run under numactl, taskset or a cpuset is honoured).
//
// Planning is pure (plan_placement: a Topology and an Allowed in, a Placement out) so every policy
// is unit-tested against multi-node topologies on any machine; current_allowed() and
// apply_memory_binding() are the only parts that ask or tell the kernel.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "harness/topology/topology.h"

namespace allocmark::placement {

// A policy that cannot be planned on this machine (a CPU outside the allowed set, a node that does
// not exist or has no allowed CPU); the driver turns it into exit code 2, the worker into a failed
// cell naming it.
class PlacementError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // The half of the policy at fault ("pin" or "nodes") and what is wrong with it; what() names the
  // flag ("--pin: CPU 2 is not allowed ..."), and a caller whose policy came from elsewhere (a
  // baseline's settings) names that instead with setting() and detail().
  PlacementError(const std::string& setting, const std::string& detail)
      : std::runtime_error("--" + setting + ": " + detail), setting_(setting), detail_(detail) {}
  const std::string& setting() const { return setting_; }  // "" when neither half is at fault
  std::string detail() const { return setting_.empty() ? what() : detail_; }

 private:
  std::string setting_, detail_;
};

struct PinSpec {
  enum class Kind { none, compact, scatter, cpus };
  Kind kind = Kind::compact;
  std::vector<int> cpus;   // Kind::cpus: the CPUs, ascending (thread i runs on cpus[i % size])
  std::vector<int> nodes;  // --nodes: only these nodes' CPUs and memory; empty: no restriction

  // "none", "compact", "scatter" or the CPU list ("0,2-3")
  std::string pin_text() const;
  // "" or the node list ("0-1")
  std::string nodes_text() const;
  bool operator==(const PinSpec&) const = default;
};

// Parses --pin and --nodes values (the matrix keys use the same text); throws
// std::invalid_argument saying what is wrong with which value.
PinSpec parse_pin(const std::string& pin, const std::string& nodes);

// The CPUs and memory nodes this process may use, ascending.
struct Allowed {
  std::vector<int> cpus;
  std::vector<int> mem_nodes;
};
// sched_getaffinity and numa_get_mems_allowed (libnuma); a kernel without NUMA gives node 0.
Allowed current_allowed();

struct Placement {
  PinSpec spec;
  // The CPUs threads are placed on, in placement order (before wrapping).
  std::vector<int> candidate_cpus;
  std::vector<int> thread_cpus;   // per thread; empty for Kind::none
  std::vector<int> thread_nodes;  // per thread, the node of its CPU; empty for Kind::none
  std::vector<int> membind;       // nodes the memory policy binds to; empty: the inherited policy
  bool oversubscribed = false;    // more threads than candidate CPUs: they wrap around
  std::vector<std::string> notes; // choices made on the user's behalf, for the record
};

// Plans `threads` threads. Candidates: the allowed CPUs of the nodes asked for (--nodes), else of
// the nodes whose memory is allowed (so `numactl --membind=1` keeps threads beside their memory),
// else every allowed CPU (with a note). compact: node by node, each node's CPUs ascending;
// scatter: one CPU of each node in turn; a CPU list: as given, each CPU must be allowed (and on a
// node asked for). Threads beyond the candidates wrap around. Throws PlacementError.
Placement plan_placement(const topology::Topology& topo, const Allowed& allowed, const PinSpec& spec, int threads);

// Binds this thread's memory policy (inherited by threads it creates later) to `nodes` with
// MPOL_BIND; "" or what the kernel said.
std::string apply_memory_binding(const std::vector<int>& nodes);

nlohmann::json to_json(const Placement& p);
nlohmann::json to_json(const Allowed& a);

}  // namespace allocmark::placement
