// The node budget (node_budget.h): node choice, charge and uncharge, capacities from the kernel.
#include "allocators/numap/node_budget.h"

#include "allocators/numap/size_classes.h"

namespace numap {

void NodeBudget::init(const Options* opt, const Topology* topo, Os* os, bool numa, int parts) {
  opt_ = opt;
  topo_ = topo;
  os_ = os;
  numa_ = numa;
  nparts_ = parts;
  capacity_ = opt->capacity;
  // With NUMA off (one bound node, or NUMAP_NUMA=0) the kernel still OOM-kills past the bound
  // nodes' memory: the one part spans them, so their room is its capacity, as a node's is with NUMA.
  bound_nodes_ = !numa && opt->bind_capacity && topo->mem_bound() ? topo->allowed : 0;
}

void NodeBudget::attach(int part, NodeCharge* node) {
  node_[part] = node;
  // Without the kernel's count (unreadable, or FREE_REFRESH_MS=0): the option, else MemTotal of
  // its nodes (none, or one unknown: no limit).
  std::uint64_t total = 0;
  for (std::uint64_t m = kernel_nodes(part); m != 0; m &= m - 1) {
    const std::uint64_t bytes = topo_->capacity[__builtin_ctzll(m)];
    if (bytes == 0) {
      total = 0;
      break;
    }
    total += bytes;
  }
  const std::uint64_t fixed = opt_->node_capacity != 0 ? opt_->node_capacity : total;
  node->capacity.store(fixed != 0 ? fixed : kUnlimited, std::memory_order_relaxed);
}

void NodeBudget::follow_kernel() {
  kernel_limits_ = (numa_ || bound_nodes_ != 0) && opt_->free_refresh_ms > 0;
  if (!kernel_limits_) return;
  ZoneinfoReader zones;
  if (os_->read_lines("/proc/zoneinfo", ZoneinfoReader::line, &zones))
    for (int i = 0; i < nparts_; ++i)
      for (std::uint64_t m = kernel_nodes(i); m != 0; m &= m - 1) {
        const int os_node = topo_->os_node[__builtin_ctzll(m)];
        if (os_node < kMaxNodes) node_[i]->watermark += zones.high_pages[os_node] * kPage;
      }
}

void NodeBudget::refresh(std::uint32_t now, bool force) {
  if (!kernel_limits_) return;
  // One thread per period reads; the others go on with the capacities they have.
  if (!refresh_pacer_.claim(now, static_cast<std::uint32_t>(opt_->free_refresh_ms), force)) return;
  for (int i = 0; i < nparts_; ++i) {
    const std::uint64_t nodes = kernel_nodes(i) & topo_->allowed;
    if (nodes == 0) continue;
    std::uint64_t free_bytes = 0;
    bool read = true;
    for (std::uint64_t m = nodes; m != 0 && read; m &= m - 1) {
      char path[512];
      node_path(path, sizeof path, opt_->sysfs_root, topo_->os_node[__builtin_ctzll(m)], "meminfo");
      struct Free {
        std::uint64_t kb = 0;
        bool found = false;
      } free_kb;
      os_->read_lines(path, [](void* ctx, const char* line) {
        auto* f = static_cast<Free*>(ctx);
        if (!f->found) f->found = meminfo_free_kb(line, &f->kb);
      }, &free_kb);
      read = free_kb.found;
      free_bytes += free_kb.kb * 1024;
    }
    if (!read) continue;  // a file unreadable: keep the previous capacity
    NodeCharge& nc = *node_[i];
    // The kernel's MemFree already excludes numap's resident pages on the node: what numap may
    // have charged there is what it has plus what the kernel can still give.
    std::uint64_t cap = nc.mapped.load(std::memory_order_relaxed) + headroom_bytes(free_bytes, nc.watermark);
    if (opt_->node_capacity != 0 && opt_->node_capacity < cap) cap = opt_->node_capacity;
    nc.capacity.store(cap, std::memory_order_relaxed);
  }
}

std::uint64_t NodeBudget::headroom(int part) const {
  const std::uint64_t cap = node_[part]->capacity.load(std::memory_order_relaxed);
  const std::uint64_t used = node_[part]->mapped.load(std::memory_order_relaxed);
  return cap == kUnlimited ? kUnlimited : cap > used ? cap - used : 0;
}

int NodeBudget::node_for_cpu(int cpu) const {
  if (!numa_) return 0;
  const Topology& topo = *topo_;
  int p = topo.node_of_cpu(cpu);
  if (p >= nparts_) p = 0;
  if (topo.allowed & (1ull << p)) return p;
  int best = -1;
  std::uint64_t best_room = 0;
  for (int i = 0; i < nparts_; ++i) {
    if (!(topo.allowed & (1ull << i))) continue;
    const std::uint64_t room = headroom(i);
    if (best < 0 || topo.distance[p][i] < topo.distance[p][best] ||
        (topo.distance[p][i] == topo.distance[p][best] && room > best_room)) {
      best = i;
      best_room = room;
    }
  }
  return best < 0 ? 0 : best;
}

Charge NodeBudget::charge(int part, std::uint64_t bytes) {
  const std::uint64_t before = total_mapped_.fetch_add(bytes, std::memory_order_relaxed);
  if (capacity_ != 0 && before + bytes > capacity_) {
    total_mapped_.fetch_sub(bytes, std::memory_order_relaxed);
    return Charge::kGlobalFull;
  }
  NodeCharge& nc = *node_[part];
  const std::uint64_t nb = nc.mapped.fetch_add(bytes, std::memory_order_relaxed);
  if (nb + bytes > nc.capacity.load(std::memory_order_relaxed)) {
    nc.mapped.fetch_sub(bytes, std::memory_order_relaxed);
    total_mapped_.fetch_sub(bytes, std::memory_order_relaxed);
    return Charge::kNodeFull;
  }
  return Charge::kOk;
}

int NodeBudget::charge_pieces(int node, std::uint64_t bytes, HugePiece* pieces, Charge* why) {
  *why = Charge::kNodeFull;
  if (!numa_) {
    const Charge r = charge(0, bytes);
    if (r == Charge::kOk) pieces[0] = HugePiece{bytes, 0};
    *why = r;
    return r == Charge::kOk ? 1 : 0;
  }
  int order[kMaxNodes];
  std::uint64_t room[kMaxNodes];
  for (int i = 0; i < nparts_; ++i) room[i] = headroom(i);
  const int n = fallback_order(*topo_, node, room, opt_->distance_limit, order);
  // Whole, on the nearest node with room (the fallback rule of every other path).
  for (int k = 0; k < n; ++k) {
    const int m = order[k];
    if (room[m] < bytes) continue;
    const Charge r = charge(m, bytes);
    if (r == Charge::kOk) {
      pieces[0] = HugePiece{bytes, static_cast<std::uint32_t>(m)};
      return 1;
    }
    if (r == Charge::kGlobalFull) {
      *why = r;
      return 0;
    }
  }
  // No single node can hold it: split in the same order, each node giving the whole pages it has
  // (glibc would succeed here, the kernel spreading the pages; numap places them by distance).
  std::uint64_t left = bytes;
  int count = 0;
  for (int k = 0; k < n && left != 0; ++k) {
    const int m = order[k];
    std::uint64_t take = room[m] / kPage * kPage;
    if (take > left) take = left;
    if (take == 0) continue;
    const Charge r = charge(m, take);
    if (r == Charge::kGlobalFull) {
      *why = r;
      break;
    }
    if (r != Charge::kOk) continue;
    pieces[count++] = HugePiece{take, static_cast<std::uint32_t>(m)};
    left -= take;
  }
  if (left == 0) return count;
  for (int k = 0; k < count; ++k) uncharge(static_cast<int>(pieces[k].node), pieces[k].bytes);
  return 0;
}

void NodeBudget::note_fallback(int from, int to) {
  fallback_by_distance_[topo_->distance[from][to]].fetch_add(1, std::memory_order_relaxed);
  node_[to]->fallback_in.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace numap
