// The Heap's statistics: numap_stats and the per-(node, class) entries (totals: counters.h).
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "allocators/numap/heap.h"
#include "allocators/numap/heap_internal.h"

namespace numap {

std::size_t Heap::stats(struct numap_stats* out, numap_class_stats* classes, std::size_t max_classes) {
  const std::size_t total_entries = static_cast<std::size_t>(nparts_) * (kSmallClasses + nslots_);
  if (out != nullptr) {
    struct numap_stats s{};
    s.struct_size = sizeof(struct numap_stats);
    s.version = NUMAP_STATS_VERSION;
    s.nodes = static_cast<std::uint32_t>(nparts_);
    auto add_lock = [&s](const Lock& l) {
      s.lock_acquisitions += l.acquisitions();
      s.lock_contended += l.contended();
      s.lock_wait_ns += l.wait_ns();
    };
    s.numa_enabled = numa_;
    s.capacity_bytes = opt_.capacity;
    s.option_warnings = opt_.warnings;
    s.mapped_bytes = budget_.mapped();
#define NUMAP_COPY_COUNTER(name, counted_by, exit_line, alloc_stats)                 \
  NUMAP_COUNTED_BY(heap, counted_by, s.name = counters_.name.load(std::memory_order_relaxed);) \
  NUMAP_COUNTED_BY(os, counted_by, s.name = os_->counters.name.load(std::memory_order_relaxed);)
    NUMAP_TOTALS(NUMAP_COPY_COUNTER)
#undef NUMAP_COPY_COUNTER
    s.allocs = s.tcache_hits + huge_.allocs();
    s.reused_bytes = s.borrowed_bytes + s.moved_bytes;
    const std::uint64_t unclaimed = tcache_pool_.load(std::memory_order_relaxed);
    s.tcache_claimed_bytes = opt_.tcache_total > unclaimed ? opt_.tcache_total - unclaimed : 0;
    int nd = 0;
    for (int d = 0; d < 256 && nd < NUMAP_MAX_DISTANCES; ++d) {
      const std::uint64_t v = budget_.fallbacks_at(d);
      if (v == 0) continue;
      s.fallback_distance[nd] = static_cast<std::uint32_t>(d);
      s.fallback_count[nd++] = v;
    }
    for (int p = 0; p < nparts_ && p < NUMAP_MAX_NODES; ++p) {
      NodePart& np = part_[p];
      numap_node_stats& ns = s.node[p];
      ns.os_node = numa_ ? topo_.os_node[p] : -1;
      const NodeCharge& nc = budget_.node(p);
      const std::uint64_t cap = nc.capacity.load(std::memory_order_relaxed);
      ns.capacity_bytes = cap == kUnlimited ? 0 : cap;
      ns.mapped_bytes = nc.mapped.load(std::memory_order_relaxed);
      ns.fallback_in = nc.fallback_in.load(std::memory_order_relaxed);
      const std::uint64_t huge = np.huge_bytes.load(std::memory_order_relaxed);
      ns.in_use_bytes += huge;
      s.huge_bytes += huge;
      for (int c = 0; c < kSmallClasses; ++c) {
        Central& ce = np.central[c];
        ns.in_use_bytes += ce.in_use_bytes.load(std::memory_order_relaxed);
        s.allocs += ce.allocs.load(std::memory_order_relaxed);
        s.transfer_batches += ce.transfer.taken();
        s.handoff_batches += ce.handoff.taken();
        add_lock(ce.lock);
        add_lock(ce.handoff.lock());
      }
      for (int si = 0; si < nslots_; ++si) {
        Slot& sl = np.slots[si];
        if (si != kSlabSlot) {
          ns.in_use_bytes += sl.in_use_bytes.load(std::memory_order_relaxed);
          s.allocs += sl.allocs.load(std::memory_order_relaxed);
        }
        ns.advised_bytes += sl.advised_bytes.load(std::memory_order_relaxed);
        add_lock(sl.lock);
      }
      s.in_use_bytes += ns.in_use_bytes;
    }
    add_lock(huge_.lock());
    // Copy no more than the caller's struct holds.
    std::size_t n = out->struct_size != 0 && out->struct_size < sizeof s ? out->struct_size : sizeof s;
    memcpy(out, &s, n);
  }
  std::size_t k = 0;
  for (int p = 0; p < nparts_; ++p) {
    NodePart& np = part_[p];
    for (int c = 0; c < kSmallClasses; ++c, ++k) {
      if (k >= max_classes || classes == nullptr) continue;
      Central& ce = np.central[c];
      classes[k] = numap_class_stats{static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(c), kSmallSize[c], 0, 0,
                                     ce.in_use_bytes.load(), ce.slab_bytes.load(), 0, ce.allocs.load(), ce.frees.load(),
                                     ce.lock.acquisitions(), ce.lock.contended(), ce.lock.wait_ns()};
    }
    for (int si = 0; si < nslots_; ++si, ++k) {
      if (k >= max_classes || classes == nullptr) continue;
      Slot& sl = np.slots[si];
      classes[k] = numap_class_stats{static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(kSmallClasses + si),
                                     slot_chunk(si), si == kSlabSlot ? 2u : 1u, 0,
                                     sl.in_use_bytes.load(), sl.mapped_bytes.load(), sl.advised_bytes.load(),
                                     sl.allocs.load(), sl.frees.load(),
                                     sl.lock.acquisitions(), sl.lock.contended(), sl.lock.wait_ns()};
    }
  }
  return total_entries;
}

}  // namespace numap
