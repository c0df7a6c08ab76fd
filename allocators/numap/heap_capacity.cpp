// The Heap's node budget and capacity: which node an allocation starts on, what each node and
// the whole heap may still charge (NUMAP_CAPACITY, NUMAP_NODE_CAPACITY, the kernel's free memory).
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "allocators/numap/heap.h"
#include "allocators/numap/heap_internal.h"

namespace numap {

void Heap::refresh_capacity(bool force) {
  if (!kernel_limits_) return;
  // One thread per period reads; the others go on with the capacities they have.
  if (!refresh_pacer_.claim(tick(), static_cast<std::uint32_t>(opt_.free_refresh_ms), force)) return;
  for (int i = 0; i < nparts_; ++i) {
    if (!(topo_.allowed & (1ull << i))) continue;
    char path[512];
    node_path(path, sizeof path, opt_.sysfs_root, topo_.os_node[i], "meminfo");
    struct Free {
      std::uint64_t kb = 0;
      bool found = false;
    } free_kb;
    os_->read_lines(path, [](void* ctx, const char* line) {
      auto* f = static_cast<Free*>(ctx);
      if (!f->found) f->found = meminfo_free_kb(line, &f->kb);
    }, &free_kb);
    if (!free_kb.found) continue;  // keep the previous capacity
    NodePart& np = part_[i];
    // The kernel's MemFree already excludes numap's resident pages on the node: what numap may
    // have charged there is what it has plus what the kernel can still give.
    std::uint64_t cap = np.mapped.load(std::memory_order_relaxed) + headroom_bytes(free_kb.kb * 1024, np.watermark);
    if (opt_.node_capacity != 0 && opt_.node_capacity < cap) cap = opt_.node_capacity;
    np.capacity.store(cap, std::memory_order_relaxed);
  }
}

std::uint64_t Heap::headroom(int part) const {
  const std::uint64_t cap = part_[part].capacity.load(std::memory_order_relaxed);
  const std::uint64_t used = part_[part].mapped.load(std::memory_order_relaxed);
  return cap == kUnlimited ? kUnlimited : cap > used ? cap - used : 0;
}


int Heap::node_for_cpu(int cpu) const {
  if (!numa_) return 0;
  int p = topo_.node_of_cpu(cpu);
  if (p >= nparts_) p = 0;
  if (topo_.allowed & (1ull << p)) return p;
  int best = -1;
  std::uint64_t best_room = 0;
  for (int i = 0; i < nparts_; ++i) {
    if (!(topo_.allowed & (1ull << i))) continue;
    const std::uint64_t room = headroom(i);
    if (best < 0 || topo_.distance[p][i] < topo_.distance[p][best] ||
        (topo_.distance[p][i] == topo_.distance[p][best] && room > best_room)) {
      best = i;
      best_room = room;
    }
  }
  return best < 0 ? 0 : best;
}

int Heap::current_node() { return numa_ ? node_for_cpu(os_->current_cpu()) : 0; }


Heap::Charge Heap::charge(int part, std::uint64_t bytes) {
  const std::uint64_t before = total_mapped_.fetch_add(bytes, std::memory_order_relaxed);
  if (opt_.capacity != 0 && before + bytes > opt_.capacity) {
    total_mapped_.fetch_sub(bytes, std::memory_order_relaxed);
    return Charge::kGlobalFull;
  }
  NodePart& np = part_[part];
  const std::uint64_t nb = np.mapped.fetch_add(bytes, std::memory_order_relaxed);
  if (nb + bytes > np.capacity.load(std::memory_order_relaxed)) {
    np.mapped.fetch_sub(bytes, std::memory_order_relaxed);
    total_mapped_.fetch_sub(bytes, std::memory_order_relaxed);
    return Charge::kNodeFull;
  }
  return Charge::kOk;
}

void Heap::uncharge(int part, std::uint64_t bytes) {
  part_[part].mapped.fetch_sub(bytes, std::memory_order_relaxed);
  total_mapped_.fetch_sub(bytes, std::memory_order_relaxed);
}

void Heap::note_fallback(int from, int to) {
  fallback_by_distance_[topo_.distance[from][to]].fetch_add(1, std::memory_order_relaxed);
  part_[to].fallback_in.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace numap
