// The heap's node budget, one component: which node an allocation starts on and what each node
// and the whole heap may still charge (NUMAP_CAPACITY, NUMAP_NODE_CAPACITY, the kernel's free
// memory less its watermarks), charged and uncharged here only. Each node's share lives in that
// node's NodePart (metadata bound to the node); the budget reaches it through `node_`.
#pragma once

#include <atomic>
#include <cstdint>

#include "allocators/numap/large.h"
#include "allocators/numap/options.h"
#include "allocators/numap/os.h"
#include "allocators/numap/pacer.h"
#include "allocators/numap/topology.h"

namespace numap {

constexpr std::uint64_t kUnlimited = ~std::uint64_t{0};

enum class Charge { kOk, kNodeFull, kGlobalFull };

// One node's share of the budget (with NUMA off, the one part's: every node it spans).
struct NodeCharge {
  // Bytes this node may have charged (kUnlimited: no limit): NUMAP_NODE_CAPACITY capped by what
  // the kernel can give here (charged now + MemFree - watermarks), re-read on the slow path.
  std::atomic<std::uint64_t> capacity{kUnlimited};
  std::uint64_t watermark = 0;  // bytes: its nodes' zones' high watermarks (/proc/zoneinfo)
  std::atomic<std::uint64_t> mapped{0}, fallback_in{0};
};

class NodeBudget {
 public:
  // The heap's options, topology and platform, which outlive the budget; `parts` nodes follow.
  void init(const Options* opt, const Topology* topo, Os* os, bool numa, int parts);
  // Node `part`'s share (in its NodePart), with its fixed capacity: the option, else MemTotal.
  void attach(int part, NodeCharge* node);
  // After every node is attached: with NUMA, or with NUMA off under a strict binding
  // (BIND_CAPACITY), capacities follow the kernel's free memory (the zones' watermarks read now;
  // the caller then refreshes with `force`).
  void follow_kernel();
  // Whether they do: the caller reads the clock for refresh() only then (every slow path asks).
  bool follows_kernel() const { return kernel_limits_; }
  // Re-reads each node's free memory when FREE_REFRESH_MS has passed (always with `force`).
  void refresh(std::uint32_t now, bool force);

  Charge charge(int part, std::uint64_t bytes);
  void uncharge(int part, std::uint64_t bytes) {
    node_[part]->mapped.fetch_sub(bytes, std::memory_order_relaxed);
    total_mapped_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  // Charges `bytes` for a huge mapping: whole on the first node of the fallback order from
  // `node` with room, else split across nodes in that order; returns the pieces (0: no room,
  // *why: which limit). Nothing stays charged on failure.
  int charge_pieces(int node, std::uint64_t bytes, HugePiece* pieces, Charge* why);
  // An allocation asked on `from` was placed on `to`.
  void note_fallback(int from, int to);

  // Partition an allocation from `cpu` starts at: the CPU's node when allowed, else the nearest
  // allowed node, ties by most headroom (so threads outside a --membind set spread).
  int node_for_cpu(int cpu) const;
  int current_node() { return numa_ ? node_for_cpu(os_->current_cpu()) : 0; }
  // Bytes partition `part` may still charge (kUnlimited when it has no limit).
  std::uint64_t headroom(int part) const;
  std::uint64_t mapped() const { return total_mapped_.load(std::memory_order_relaxed); }
  const NodeCharge& node(int part) const { return *node_[part]; }
  // The topology's nodes whose memory is partition `part`'s capacity (a mask): with NUMA the
  // partition's own node; with NUMA off, the nodes a strict binding (Topology::mem_bound) allows,
  // when BIND_CAPACITY; else none (no capacity but the options).
  std::uint64_t kernel_nodes(int part) const { return numa_ ? 1ull << part : bound_nodes_; }
  // Allocations placed on another node at NUMA distance d.
  std::uint64_t fallbacks_at(int d) const { return fallback_by_distance_[d].load(std::memory_order_relaxed); }

 private:
  const Options* opt_ = nullptr;
  const Topology* topo_ = nullptr;
  Os* os_ = nullptr;
  bool numa_ = false;
  int nparts_ = 1;
  std::uint64_t capacity_ = 0;  // NUMAP_CAPACITY, all nodes together (0: none); read by every charge
  NodeCharge* node_[kMaxNodes] = {};
  std::atomic<std::uint64_t> total_mapped_{0};
  std::atomic<std::uint64_t> fallback_by_distance_[256] = {};
  std::uint64_t bound_nodes_ = 0;  // NUMA off: the strictly bound nodes the one part spans (kernel_nodes)
  bool kernel_limits_ = false;  // capacities follow the kernel's free memory
  Pacer refresh_pacer_;         // capacities re-read at most once per FREE_REFRESH_MS
};

}  // namespace numap
