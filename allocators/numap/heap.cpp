#include "allocators/numap/heap.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <new>

namespace numap {
namespace {

constexpr std::uint64_t kTwoMiB = 2 << 20;

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }
std::uint64_t pages_for(std::uint64_t bytes) { return (bytes + kPage - 1) / kPage; }

pthread_key_t cache_key;
pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

void cache_destructor(void* arg) {
  auto* tc = static_cast<ThreadCache*>(arg);
  tc->slab_span = tc->page_span = 0;  // later frees (other TLS destructors) take the slow path
  if (tc->owner != nullptr) tc->owner->flush_cache(tc);
  tc->owner = nullptr;
  tc->state = CacheState::kDead;
}

void make_cache_key() { pthread_key_create(&cache_key, cache_destructor); }

}  // namespace

__thread ThreadCache tls_cache __attribute__((tls_model("initial-exec")));

namespace {
void page_unlock_own(ThreadCache* tc) { __atomic_store_n(&tc->page_lock, 0u, __ATOMIC_RELEASE); }
void pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

// With membarrier the owner's store to page_lock and its load of page_flushing need no fence of
// their own: a purger stores page_flushing, then membarrier() makes every running thread pass a full
// barrier, then reads page_lock. Either the owner's page_lock store is visible to it by then (it
// skips this cache), or the owner's later load sees page_flushing (it waits until the flush is over).
// So a cache hit costs plain loads and stores, where a compare-exchange cost about as much as the
// rest of the hit. Without membarrier, a try-lock as before.
inline void Heap::page_enter(ThreadCache* tc) const {
  if (__builtin_expect(asym_guard_, 1)) {
    for (;;) {
      __atomic_store_n(&tc->page_lock, 1u, __ATOMIC_RELAXED);
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      if (__builtin_expect(__atomic_load_n(&tc->page_flushing, __ATOMIC_ACQUIRE) == 0, 1)) return;
      page_unlock_own(tc);  // a purger is flushing this cache: briefly
      while (__atomic_load_n(&tc->page_flushing, __ATOMIC_ACQUIRE) != 0) pause();
    }
  }
  std::uint32_t expected = 0;
  while (!__atomic_compare_exchange_n(&tc->page_lock, &expected, 1u, true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    expected = 0;  // a purging thread is flushing this cache: briefly
    pause();
  }
}

bool Heap::init(const Options& options, const Topology& topology, Os* os) {
  opt_ = options;
  topo_ = topology;
  os_ = os;
  epoch_ms_ = os_->now_ms();
  asym_guard_ = os_->register_barrier();
  numa_ = numa_enabled(topo_, opt_.numa);
  nparts_ = numa_ ? topo_.count : 1;
  span_ = opt_.class_span;
  span_shift_ = __builtin_ctzll(span_);
  npage_ = page_class_count(span_);
  nslots_ = 1 + npage_;
  arena_bytes_ = static_cast<std::uint64_t>(nparts_) * static_cast<std::uint64_t>(nslots_) * span_;

  // The arena, aligned to the span so that power-of-two chunks are naturally aligned.
  char* raw = static_cast<char*>(os_->reserve(arena_bytes_ + span_));
  if (raw == nullptr) return false;
  char* aligned = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(raw), span_));
  if (aligned != raw) os_->unmap(raw, static_cast<std::size_t>(aligned - raw));
  const std::uint64_t tail = span_ - static_cast<std::uint64_t>(aligned - raw);
  if (tail != 0) os_->unmap(aligned + arena_bytes_, tail);
  arena_ = aligned;

  allowed_os_ = 0;
  for (int i = 0; i < topo_.count; ++i)
    if ((topo_.allowed & (1ull << i)) && topo_.os_node[i] < 64) allowed_os_ |= 1ull << topo_.os_node[i];

  // Metadata: node parts, then per node its slab headers, slot bitmaps and extents (page-aligned
  // so each node's share is bound to it), then the huge table; touched lazily.
  const std::uint64_t slab_chunks = span_ / kSlabBytes;
  std::uint64_t per_part = round_up(slab_chunks * sizeof(SlabMeta), 64) + round_up(slab_chunks, 64);
  for (int s = 0; s < nslots_; ++s) {
    const std::uint64_t chunk = s == kSlabSlot ? kSlabBytes : page_class_size(s - 1);
    per_part += round_up(Slot::metadata_bytes(span_ / chunk), 64);
  }
  per_part = round_up(per_part, kPage);
  const std::uint64_t parts_bytes = sizeof(NodePart) * static_cast<std::uint64_t>(nparts_);
  meta_bytes_ = round_up(parts_bytes + per_part * static_cast<std::uint64_t>(nparts_) + HugeTable::metadata_bytes(), kPage);
  meta_ = static_cast<char*>(os_->reserve(meta_bytes_));
  if (meta_ == nullptr) {
    os_->unmap(arena_, arena_bytes_);
    return false;
  }
  // Never huge pages for metadata, whatever the THP mode: with THP `always` the lazily touched
  // bitmaps became 2 MiB pages each (166 MiB on the first node for an 8-node arena).
  os_->advise_huge(meta_, meta_bytes_, false);
  part_ = reinterpret_cast<NodePart*>(meta_);
  char* m = meta_ + parts_bytes;
  for (int i = 0; i < nparts_; ++i) {
    // Bound before the constructor touches it: each node's metadata lives on that node.
    if (numa_) {
      bind_part(&part_[i], sizeof(NodePart), i);
      bind_part(m, per_part, i);
    }
    NodePart* part = new (&part_[i]) NodePart();
    char* region = m;
    m += per_part;
    part->slab_meta = reinterpret_cast<SlabMeta*>(region);
    region += round_up(slab_chunks * sizeof(SlabMeta), 64);
    part->slab_class = reinterpret_cast<std::uint8_t*>(region);
    region += round_up(slab_chunks, 64);
    char* base = arena_ + static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(nslots_) * span_;
    for (int s = 0; s < nslots_; ++s) {
      const std::uint64_t chunk = s == kSlabSlot ? kSlabBytes : page_class_size(s - 1);
      const std::uint32_t grain = opt_.thp && chunk % kTwoMiB == 0 ? kTwoMiB / kPage : 1;
      part->slots[s].init(base + static_cast<std::uint64_t>(s) * span_, chunk, span_ / chunk, grain, region);
      region += round_up(Slot::metadata_bytes(span_ / chunk), 64);
      if (grain > 1) os_->advise_huge(base + static_cast<std::uint64_t>(s) * span_, span_, true);
    }
    // Without the kernel's count (unreadable, or FREE_REFRESH_MS=0): the option, else MemTotal.
    const std::uint64_t fixed = opt_.node_capacity != 0 ? opt_.node_capacity : numa_ ? topo_.capacity[i] : 0;
    part->capacity.store(fixed != 0 ? fixed : kUnlimited, std::memory_order_relaxed);
    // Bound before first touch: every page of the partition faults in on its node.
    if (numa_) bind_part(base, static_cast<std::uint64_t>(nslots_) * span_, i);
  }
  huge_.init(m);
  if (!opt_.thp) os_->advise_huge(arena_, arena_bytes_, false);
  kernel_limits_ = numa_ && opt_.free_refresh_ms > 0;
  if (kernel_limits_) {
    ZoneinfoReader zones;
    if (os_->read_lines("/proc/zoneinfo", ZoneinfoReader::line, &zones))
      for (int i = 0; i < nparts_; ++i)
        if (topo_.os_node[i] < kMaxNodes) part_[i].watermark = zones.high_pages[topo_.os_node[i]] * kPage;
    refresh_capacity(true);
  }
  return true;
}

void Heap::refresh_capacity(bool force) {
  if (!kernel_limits_) return;
  const std::uint32_t now = tick();
  std::uint32_t next = next_refresh_.load(std::memory_order_relaxed);
  if (!force && static_cast<std::int32_t>(now - next) < 0) return;
  // One thread per period reads; the others go on with the capacities they have.
  if (!next_refresh_.compare_exchange_strong(next, now + static_cast<std::uint32_t>(opt_.free_refresh_ms),
                                             std::memory_order_relaxed) &&
      !force)
    return;
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

void Heap::destroy() {
  if (decay_state_.load() == 1) {
    __atomic_store_n(&decay_stop_, 1u, __ATOMIC_RELEASE);
    Os::wake(&decay_stop_);
    pthread_join(decay_thread_, nullptr);
    decay_state_.store(0);
  }
  ThreadCache* tc = thread_cache_tls();
  if (tc->owner == this) {
    unregister_cache(tc);
    tc->slab_span = tc->page_span = 0;
    tc->owner = nullptr;
    tc->state = CacheState::kNew;
  }
  os_->unmap(arena_, arena_bytes_);
  os_->unmap(meta_, meta_bytes_);
  arena_ = nullptr;
}

Heap::Where Heap::locate(const void* p) const {
  // The span is a power of two: the global slot by a shift, the chunk by multiplication.
  const int part = part_of_chunk(p);
  const int slot = global_slot(p) - part * nslots_;
  return Where{part, slot, part_[part].slots[slot].index_of(p)};
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

int Heap::node_of(const void* p) const {
  if (in_arena(p)) return locate(p).part;
  return -1;
}

// ---- capacity -----------------------------------------------------------------------------------

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

std::size_t Heap::purge(std::uint64_t want, int only_part) {
  counters_.purges.fetch_add(1, std::memory_order_relaxed);
  drain_transfers();  // parked batches keep their slabs from emptying
  // Cached page chunks are charged but not free in their Slots: return every thread's first.
  flush_all_page_caches();
  return purge_pages(want, only_part, -1, false, 0);
}

std::uint64_t Heap::purge_pages(std::uint64_t want, int only_part, int skip_slot, bool aged, std::uint32_t freed_by,
                                bool owe) {
  std::uint64_t got = 0;
  PurgeRun runs[32];
  // Largest classes first: the fewest calls for the most bytes, and the slabs (64 KiB) in their place.
  for (int c = npage_ - 1; c >= 0; --c) {
    int slots[2] = {c + 1, -1};
    if (page_class_size(c) == kSlabBytes) slots[1] = kSlabSlot;
    for (int si : slots) {
      if (si < 0 || si == skip_slot) continue;
      for (int p = 0; p < nparts_; ++p) {
        if (only_part >= 0 && p != only_part) continue;
        Slot& sl = part_[p].slots[si];
        while (sl.free_mapped() != 0) {
          const int n = sl.purge_begin(runs, 32, want != 0 ? want - got : 0, aged, freed_by);
          if (n == 0) break;
          std::uint64_t released = 0;
          for (int r = 0; r < n; ++r) {
            runs[r].ok = runs[r].bytes == 0 || os_->advise_free(sl.address(runs[r].first), runs[r].bytes);
            if (runs[r].ok) released += runs[r].bytes;
          }
          sl.purge_done(runs, n);
          uncharge(p, released);
          sl.mapped_bytes.fetch_sub(released, std::memory_order_relaxed);
          sl.advised_bytes.fetch_add(released, std::memory_order_relaxed);
          if (owe) sl.limit_owed.fetch_add(released, std::memory_order_relaxed);
          counters_.advised_bytes.fetch_add(released, std::memory_order_relaxed);
          got += released;
          if (released == 0) break;  // advice failing: do not spin
          if (want != 0 && got >= want) return got;
        }
      }
    }
  }
  return got;
}

std::size_t Heap::trim() {
  counters_.trims.fetch_add(1, std::memory_order_relaxed);
  ThreadCache* tc = thread_cache_tls();
  if (tc->owner == this)
    for (int c = 0; c < kSmallClasses; ++c) flush_list(&tc->lists[c], tc->lists[c].count);
  return purge();
}

void Heap::maybe_decay() {
  const std::uint32_t now = tick();
  std::uint32_t next = next_decay_.load(std::memory_order_relaxed);
  if (static_cast<std::int32_t>(now - next) < 0) return;
  // One thread per quarter period does the pass; the others go on allocating.
  const std::uint32_t period = static_cast<std::uint32_t>(opt_.decay_ms / 4 > 0 ? opt_.decay_ms / 4 : 1);
  if (!next_decay_.compare_exchange_strong(next, now + period, std::memory_order_relaxed)) return;
  counters_.decay_passes.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t got =
      purge_pages(0, -1, -1, true, now - static_cast<std::uint32_t>(opt_.decay_ms));
  counters_.decay_bytes.fetch_add(got, std::memory_order_relaxed);
}

void Heap::exchange(int part, int slot, std::uint64_t bytes) {
  if (opt_.exchange_ms <= 0) return;
  NodePart& np = part_[part];
  // Only pages idle for EXCHANGE_MS: under hot churn each class keeps the free chunks it is about
  // to reuse (taking those too made every fresh chunk under churn cost a madvise and a refault;
  // size_mix ran an order of magnitude slower). A scan that found nothing idle enough is not
  // repeated for a tenth of that time.
  const std::uint32_t now = tick();
  if (static_cast<std::int32_t>(now - np.exchange_after.load(std::memory_order_relaxed)) < 0) return;
  bool any = false;
  for (int s = 0; s < nslots_ && !any; ++s) any = s != slot && np.slots[s].free_mapped() != 0;
  if (!any) return;
  const std::uint64_t got =
      purge_pages(bytes, part, slot, true, now - static_cast<std::uint32_t>(opt_.exchange_ms));
  if (got == 0) {
    const std::uint32_t pause = static_cast<std::uint32_t>(opt_.exchange_ms / 10 > 0 ? opt_.exchange_ms / 10 : 1);
    np.exchange_after.store(now + pause, std::memory_order_relaxed);
  }
  counters_.exchanged_bytes.fetch_add(got, std::memory_order_relaxed);
}

void Heap::limit_free(int part) {
  NodePart& np = part_[part];
  if (np.limiting.exchange(1, std::memory_order_acquire) != 0) return;
  std::uint64_t free = 0;
  for (int s = 0; s < nslots_; ++s) free += np.slots[s].free_mapped_bytes();
  // Large chunks waiting in thread caches are free memory too: the limit trims the Slots' free
  // pages for them, so the cache holds part of the allowance instead of adding to it.
  free += np.large_cached.load(std::memory_order_relaxed);
  const std::uint64_t mapped = np.mapped.load(std::memory_order_relaxed);
  const std::uint64_t in_use = mapped > free ? mapped - free : 0;
  const std::uint64_t pct = static_cast<std::uint64_t>(opt_.free_percent);
  const std::uint64_t by_share = in_use / 100 * pct + in_use % 100 * pct / 100;  // exact, no overflow
  // Back off where the limit gave back pages that the same classes then charged again (a program
  // that frees and rebuilds the same sizes, or churn whose free share is above FREE_PERCENT):
  // every refault costs a zeroed page, so the allowance doubles. Counts run in windows of DECAY_MS
  // (1 s when decay is off). A window that ends with no doubling lowers the allowance to what its
  // checks needed (so an adequate allowance is kept, not halved into thrash and doubled back),
  // halves it once more per further quiet period (nothing freed then), and forgets its debts (a
  // rebuild long after a release is no thrash). The floor scales at most kMaxFloorScale times, so
  // a release down to almost nothing in use still goes back to a few floors.
  const std::uint32_t now = tick();
  std::uint32_t scale = np.limit_scale.load(std::memory_order_relaxed);
  const std::uint32_t quiet = static_cast<std::uint32_t>(opt_.decay_ms > 0 ? opt_.decay_ms : 1000);
  const std::uint32_t elapsed = now - np.limit_window.load(std::memory_order_relaxed);
  const std::uint64_t given = np.limit_given.load(std::memory_order_relaxed);
  const bool thrash = given >= 4 * kFreeCheckBytes && np.limit_refaulted.load(std::memory_order_relaxed) * 4 >= given;
  auto allowance = [&](std::uint32_t sc) {
    const std::uint64_t floor = opt_.free_floor * (sc < kMaxFloorScale ? sc : kMaxFloorScale);
    return by_share * sc > floor ? by_share * sc : floor;
  };
  std::uint32_t need = 1;  // the smallest scale that would have kept this check's free pages
  while (need < kMaxLimitScale && allowance(need) < free) need *= 2;
  if (thrash || elapsed > quiet) {
    if (thrash && elapsed <= quiet) {
      if (scale < kMaxLimitScale) scale *= 2;
    } else {
      const std::uint32_t window_need = np.limit_need.load(std::memory_order_relaxed);
      const std::uint32_t periods = elapsed / quiet;
      if (window_need < scale) scale = window_need;
      scale = periods > 31 ? 1 : scale >> (periods - 1);
      if (scale == 0) scale = 1;
    }
    np.limit_given.store(0, std::memory_order_relaxed);
    np.limit_refaulted.store(0, std::memory_order_relaxed);
    for (int s = 0; s < nslots_; ++s) np.slots[s].limit_owed.store(0, std::memory_order_relaxed);
    np.limit_window.store(now, std::memory_order_relaxed);
    np.limit_need.store(need, std::memory_order_relaxed);
  } else if (need > np.limit_need.load(std::memory_order_relaxed)) {
    np.limit_need.store(need, std::memory_order_relaxed);
  }
  np.limit_scale.store(scale, std::memory_order_relaxed);
  const std::uint64_t allowed = allowance(scale);
  if (free > allowed) {
    // Down to three quarters of the allowance, so that a release does not come back every MiB.
    const std::uint64_t want = free - allowed / 4 * 3;
    std::uint64_t got = 0;
    if (opt_.exchange_ms > 0)
      got = purge_pages(want, part, -1, true, now - static_cast<std::uint32_t>(opt_.exchange_ms), true);
    if (got < want) got += purge_pages(want - got, part, -1, false, 0, true);
    np.limit_given.fetch_add(got, std::memory_order_relaxed);
    counters_.limited_bytes.fetch_add(got, std::memory_order_relaxed);
  }
  np.limiting.store(0, std::memory_order_release);
}

void Heap::note_refault(int part, Slot& sl, std::uint64_t bytes) {
  std::uint64_t owed = sl.limit_owed.load(std::memory_order_relaxed);
  std::uint64_t take;
  do {
    if (owed == 0) return;
    take = owed < bytes ? owed : bytes;
  } while (!sl.limit_owed.compare_exchange_weak(owed, owed - take, std::memory_order_relaxed));
  part_[part].limit_refaulted.fetch_add(take, std::memory_order_relaxed);
}

// ---- page chunks --------------------------------------------------------------------------------

void* Heap::chunk_alloc(int node, int slot0, std::uint64_t bytes, std::uint64_t* old_bytes, int* out_part,
                        bool borrow) {
  on_slow_path();
  int order[kMaxNodes];
  std::uint64_t free_bytes[kMaxNodes];
  for (int pass = 0; pass < 2; ++pass) {
    int n = 1;
    order[0] = 0;
    if (numa_) {
      for (int i = 0; i < nparts_; ++i) free_bytes[i] = headroom(i);
      n = fallback_order(topo_, node, free_bytes, opt_.distance_limit, order);
    }
    bool global_full = false, node_full = false;
    for (int k = 0; k < n && !global_full; ++k) {
      const int m = order[k];
      int slot = slot0;
      std::int64_t i = -1;
      if (borrow && slot0 != kSlabSlot && part_[m].slots[slot0].free_mapped() == 0) {
        // Resident pages of a slightly larger class rather than fresh ones: keeps RSS near live
        // when the mix of sizes shifts between classes.
        const int last = slot0 + kBorrowClasses < nslots_ - 1 ? slot0 + kBorrowClasses : nslots_ - 1;
        for (int s2 = slot0 + 1; s2 <= last && i < 0; ++s2) {
          if (part_[m].slots[s2].free_mapped() == 0) continue;
          i = part_[m].slots[s2].take_mapped();
          if (i >= 0) slot = s2;
        }
      }
      Slot& sl = part_[m].slots[slot];
      const std::uint64_t need = round_up(pages_for(bytes), sl.grain_pages());
      if (i < 0) i = sl.take();
      if (i < 0) continue;
      std::uint32_t& ext = sl.extent(static_cast<std::uint64_t>(i));
      const std::uint64_t had = ext;
      if (ext < need) {
        const Charge r = charge(m, (need - ext) * kPage);
        if (r != Charge::kOk) {
          sl.give(static_cast<std::uint64_t>(i), tick());
          (r == Charge::kGlobalFull ? global_full : node_full) = true;
          continue;
        }
        sl.mapped_bytes.fetch_add((need - ext) * kPage, std::memory_order_relaxed);
        if (sl.limit_owed.load(std::memory_order_relaxed) != 0) note_refault(m, sl, (need - ext) * kPage);
        exchange(m, slot, (need - ext) * kPage);
        ext = static_cast<std::uint32_t>(need);
      } else if (slot != slot0) {
        counters_.borrowed_bytes.fetch_add(ext * kPage, std::memory_order_relaxed);
      }
      sl.allocs.fetch_add(1, std::memory_order_relaxed);
      sl.in_use_bytes.fetch_add(sl.chunk(), std::memory_order_relaxed);
      if (m != node) note_fallback(node, m);
      *old_bytes = had * kPage;
      *out_part = m;
      return sl.address(static_cast<std::uint64_t>(i));
    }
    if (pass == 1) break;
    const std::uint64_t need = round_up(pages_for(bytes), part_[0].slots[slot0].grain_pages());
    if (global_full) {
      if (purge(need * kPage) == 0) break;
    } else if (node_full) {
      if (opt_.beyond_limit == BeyondLimit::kFail) break;
      if (purge(need * kPage, node) == 0 && purge(need * kPage) == 0) break;
    } else {
      break;  // every candidate slot's address space is used up
    }
  }
  counters_.enomem.fetch_add(1, std::memory_order_relaxed);
  errno = ENOMEM;
  return nullptr;
}

void Heap::chunk_free(int part, int slot, std::uint64_t index) {
  Slot& sl = part_[part].slots[slot];
  sl.frees.fetch_add(1, std::memory_order_relaxed);
  sl.in_use_bytes.fetch_sub(sl.chunk(), std::memory_order_relaxed);
  std::uint64_t resident = std::uint64_t{sl.extent(index)} * kPage;
  // Under the free limit a chunk of kGiveBackAtOnce or more goes back to the kernel as it is freed,
  // as glibc unmaps every block that large: a hash table's old array, freed before its doubled
  // successor (another class) is built, would otherwise stay resident within the allowance of 12%
  // of everything in use. The chunk is still ours here: no lock, nothing else can take it.
  if (opt_.free_percent > 0 && sl.chunk() >= kGiveBackAtOnce && resident != 0 &&
      os_->advise_free(sl.address(index), resident)) {
    sl.extent(index) = 0;
    uncharge(part, resident);
    sl.mapped_bytes.fetch_sub(resident, std::memory_order_relaxed);
    sl.advised_bytes.fetch_add(resident, std::memory_order_relaxed);
    counters_.advised_bytes.fetch_add(resident, std::memory_order_relaxed);
    counters_.limited_bytes.fetch_add(resident, std::memory_order_relaxed);
    resident = 0;
  }
  sl.give(index, tick());
  if (resident != 0) note_freed(part, resident);
}

bool Heap::grow_extent(int part, int slot, std::uint64_t index, std::uint64_t bytes) {
  Slot& sl = part_[part].slots[slot];
  const std::uint64_t need = round_up(pages_for(bytes), sl.grain_pages());
  std::uint32_t& ext = sl.extent(index);
  if (ext >= need) return true;
  refresh_capacity(false);
  for (int pass = 0; pass < 2; ++pass) {
    const Charge r = charge(part, (need - ext) * kPage);
    if (r == Charge::kOk) {
      sl.mapped_bytes.fetch_add((need - ext) * kPage, std::memory_order_relaxed);
      if (sl.limit_owed.load(std::memory_order_relaxed) != 0) note_refault(part, sl, (need - ext) * kPage);
      exchange(part, slot, (need - ext) * kPage);
      ext = static_cast<std::uint32_t>(need);
      return true;
    }
    if (pass == 1 || purge((need - ext) * kPage, r == Charge::kNodeFull ? part : -1) == 0) break;
  }
  return false;
}

// ---- huge ---------------------------------------------------------------------------------------

int Heap::charge_pieces(int node, std::uint64_t bytes, HugePiece* pieces, Charge* why) {
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
  const int n = fallback_order(topo_, node, room, opt_.distance_limit, order);
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

void* Heap::huge_alloc(std::size_t n, std::size_t align) {
  if (n > (std::uint64_t{1} << 46)) {
    errno = ENOMEM;
    return nullptr;
  }
  const std::uint64_t bytes = round_up(n, kPage);
  refresh_capacity(false);
  const int node = current_node();
  HugePiece pieces[kMaxNodes];
  int count = 0;
  for (int pass = 0; pass < 2; ++pass) {
    Charge why;
    count = charge_pieces(node, bytes, pieces, &why);
    if (count != 0 || pass == 1) break;
    // The action of chunk_alloc: the global capacity purges everything; nodes full within the
    // distance limit purge the local node, then all (NUMAP_BEYOND_LIMIT=purge), or fail.
    if (why == Charge::kGlobalFull) {
      if (purge(bytes) == 0) break;
    } else {
      if (opt_.beyond_limit == BeyondLimit::kFail) break;
      if (purge(bytes, node) == 0 && purge(bytes) == 0) break;
    }
  }
  auto uncharge_all = [&] {
    for (int k = 0; k < count; ++k) uncharge(static_cast<int>(pieces[k].node), pieces[k].bytes);
  };
  if (count == 0) {
    counters_.enomem.fetch_add(1, std::memory_order_relaxed);
    errno = ENOMEM;
    return nullptr;
  }
  const std::uint64_t extra = align > kPage ? align : 0;
  char* raw = static_cast<char*>(os_->reserve(bytes + extra));
  if (raw == nullptr) {
    uncharge_all();
    counters_.enomem.fetch_add(1, std::memory_order_relaxed);
    errno = ENOMEM;
    return nullptr;
  }
  char* p = raw;
  if (extra != 0) {
    p = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(raw), align));
    if (p != raw) os_->unmap(raw, static_cast<std::size_t>(p - raw));
    const std::uint64_t tail = extra - static_cast<std::uint64_t>(p - raw);
    if (tail != 0) os_->unmap(p + bytes, tail);
  }
  if (numa_) {
    std::uint64_t off = 0;
    for (int k = 0; k < count; ++k) {
      bind_part(p + off, pieces[k].bytes, static_cast<int>(pieces[k].node));
      off += pieces[k].bytes;
    }
  }
  if (!huge_.insert(p, pieces, count)) {
    os_->unmap(p, bytes);
    uncharge_all();
    counters_.enomem.fetch_add(1, std::memory_order_relaxed);
    errno = ENOMEM;
    return nullptr;
  }
  for (int k = 0; k < count; ++k) {
    const int m = static_cast<int>(pieces[k].node);
    part_[m].huge_bytes.fetch_add(pieces[k].bytes, std::memory_order_relaxed);
    if (m != node) note_fallback(node, m);
  }
  if (count > 1) counters_.split_allocs.fetch_add(1, std::memory_order_relaxed);
  huge_live_.fetch_add(1, std::memory_order_relaxed);
  huge_allocs_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void Heap::huge_free(void* p) {
  HugePiece pieces[kMaxNodes];
  const int count = huge_.erase(p, pieces, kMaxNodes);
  if (count == 0) fatal("free(): pointer not allocated by numap");
  huge_live_.fetch_sub(1, std::memory_order_relaxed);
  std::uint64_t bytes = 0;
  for (int k = 0; k < count; ++k) bytes += pieces[k].bytes;
  os_->unmap(p, bytes);
  for (int k = 0; k < count; ++k) {
    const int m = static_cast<int>(pieces[k].node);
    part_[m].huge_bytes.fetch_sub(pieces[k].bytes, std::memory_order_relaxed);
    uncharge(m, pieces[k].bytes);
  }
}

void* Heap::page_or_split(int cls, std::size_t n, std::uint64_t* old_bytes, bool borrow, std::size_t align) {
  void* p = page_alloc(cls, n, old_bytes, borrow);
  if (p != nullptr || !numa_) return p;
  // Every node's headroom within the limit was too small for the whole chunk (or its class's span
  // is used up): a mapping of its own may still be split across nodes. That path counts its own
  // outcome.
  counters_.enomem.fetch_sub(1, std::memory_order_relaxed);
  *old_bytes = 0;
  return huge_alloc(n, align < kPage ? kPage : align);
}

// ---- small objects ------------------------------------------------------------------------------

ThreadCache* Heap::cache() {
  ThreadCache* tc = thread_cache_tls();
  if (tc->owner == this) return tc;
  if (!opt_.tcache || tc->state == CacheState::kDead) return nullptr;
  if (tc->owner != nullptr) tc->owner->flush_cache(tc);
  tc->owner = this;
  tc->state = CacheState::kLive;
  tc->node = current_node();
  set_home(tc);
  tc->until_recheck = 64;
  tc->hits = 0;
  for (int c = 0; c < kSmallClasses; ++c) {
    std::uint64_t limit = opt_.tcache_bytes / kSmallSize[c];
    tc->lists[c] = CacheList{nullptr, 0, static_cast<std::uint32_t>(limit < 4 ? 4 : limit > 512 ? 512 : limit)};
  }
  tc->page_bytes = 0;
  __atomic_store_n(&tc->page_lock, 0u, __ATOMIC_RELAXED);
  __atomic_store_n(&tc->page_flushing, 0u, __ATOMIC_RELAXED);
  for (int c = 0; c < kPageCacheClasses; ++c) {
    const std::uint64_t size = page_class_size(c);
    std::uint64_t limit = opt_.page_cache_bytes / size;
    // Above 256 KiB: one chunk per class, while the bound of all threads has room for it.
    if (c >= kLargeCachedClass) limit = opt_.page_cache_bytes != 0 && opt_.large_cache_bytes >= size ? 1 : 0;
    if (c >= npage_) limit = 0;
    tc->pages[c].count = 0;
    tc->pages[c].limit = static_cast<std::uint32_t>(limit > kPageCacheDepth ? kPageCacheDepth : limit);
  }
  {
    LockGuard g(registry_lock_);
    tc->reg_prev = nullptr;
    tc->reg_next = registry_;
    if (registry_ != nullptr) registry_->reg_prev = tc;
    registry_ = tc;
  }
  pthread_once(&cache_key_once, make_cache_key);
  pthread_setspecific(cache_key, tc);
  return tc;
}

void* Heap::refill(ThreadCache* tc, int cls) {
  int node;
  std::uint32_t want = 1;
  if (tc != nullptr) {
    recheck_node(tc);
    node = tc->node;
    want = tc->lists[cls].limit / 2;
    if (want == 0) want = 1;
  } else {
    node = current_node();
  }
  const std::uint32_t size = kSmallSize[cls];
  void* head = nullptr;
  std::uint32_t got = 0;
  for (int attempt = 0; attempt < 2 && got == 0; ++attempt) {
    Central& c = part_[node].central[cls];
    {
      LockGuard g(c.lock);
      if (c.nbatches != 0 && tc != nullptr) {  // a whole batch another overflow left
        --c.nbatches;
        head = c.batch[c.nbatches];
        got = c.batch_count[c.nbatches];
        c.parked_bytes -= got * size;
        c.transfers.fetch_add(1, std::memory_order_relaxed);
      } else {
        got = c.pop(part_[node].slots[kSlabSlot].base(), kSlabBytes, part_[node].slab_meta, &head, want);
      }
      if (got != 0) {
        c.allocs.fetch_add(got, std::memory_order_relaxed);
        c.in_use_bytes.fetch_add(std::uint64_t{got} * size, std::memory_order_relaxed);
      }
    }
    if (got != 0) break;
    std::uint64_t old = 0;
    int at = node;
    char* slab = static_cast<char*>(chunk_alloc(node, kSlabSlot, kSlabBytes, &old, &at));
    if (slab == nullptr) return nullptr;
    NodePart& np = part_[at];
    SlabMeta* s = &np.slab_meta[np.slots[kSlabSlot].index_of(slab)];
    *s = SlabMeta{};
    s->cls = static_cast<std::uint16_t>(cls);
    np.slab_class[s - np.slab_meta] = static_cast<std::uint8_t>(cls);
    s->capacity = static_cast<std::uint16_t>(kSlabBytes / size);
    s->nfree = s->capacity;
    Central& c2 = np.central[cls];
    LockGuard g(c2.lock);
    central_link(&c2, s);
    got = c2.pop(np.slots[kSlabSlot].base(), kSlabBytes, np.slab_meta, &head, want);
    c2.allocs.fetch_add(got, std::memory_order_relaxed);
    c2.in_use_bytes.fetch_add(std::uint64_t{got} * size, std::memory_order_relaxed);
  }
  if (got == 0) {
    errno = ENOMEM;
    return nullptr;
  }
  void* result = head;
  head = *static_cast<void**>(head);
  if (tc != nullptr) {
    counters_.tcache_misses.fetch_add(1, std::memory_order_relaxed);
    counters_.tcache_hits.fetch_add(tc->hits, std::memory_order_relaxed);
    tc->hits = 0;
    CacheList& l = tc->lists[cls];
    // The list was empty: the rest of the batch becomes it.
    l.head = head;
    l.count = got - 1;
  }
  return result;
}

void Heap::recheck_node(ThreadCache* tc) {
  if (--tc->until_recheck == 0) {
    tc->node = current_node();
    set_home(tc);
    tc->until_recheck = 64;
  }
}

void Heap::set_home(ThreadCache* tc) {
  const Slot& slabs = part_[tc->node].slots[kSlabSlot];
  tc->slab_base = reinterpret_cast<std::uintptr_t>(slabs.base());
  tc->slab_class = part_[tc->node].slab_class;
  tc->slab_span = slabs.chunk() * slabs.nchunks();
  tc->page_base = reinterpret_cast<std::uintptr_t>(part_[tc->node].slots[1].base());
  tc->page_span = static_cast<std::uint64_t>(npage_ < kPageCacheClasses ? npage_ : kPageCacheClasses) * span_;
}

// ---- page-class thread cache --------------------------------------------------------------------

void* Heap::page_alloc(int cls, std::size_t n, std::uint64_t* old_bytes, bool borrow) {
  ThreadCache* tc;
  if (cls < kPageCacheClasses && (tc = live_cache()) != nullptr && tc->pages[cls].limit != 0) {
    page_enter(tc);
    PageCacheList& l = tc->pages[cls];
    if (l.count == 0 && cls < kLargeCachedClass) page_refill(tc, cls);
    void* p = nullptr;
    std::uint32_t ext = 0;
    const std::uint64_t need = pages_for(n);  // with THP a cached extent is a whole grain: >= still means covered
    if (l.count != 0) {
      // The most recent chunk whose charged pages already cover n (no new charge), else the most recent.
      std::uint32_t k = l.count - 1;
      if (l.extent[k] < need)
        for (std::uint32_t j = k; j-- > 0;)
          if (l.extent[j] >= need) {
            k = j;
            break;
          }
      p = l.chunk[k];
      ext = l.extent[k];
      --l.count;
      l.chunk[k] = l.chunk[l.count];
      l.extent[k] = l.extent[l.count];
      if (cls < kLargeCachedClass)
        tc->page_bytes -= std::uint64_t{ext} * kPage;
      else
        large_cache_give(part_of_chunk(p), std::uint64_t{ext} * kPage);
    }
    page_unlock_own(tc);
    if (p != nullptr) {
      *old_bytes = std::uint64_t{ext} * kPage;
      if (ext >= need) {
        ++tc->hits;
        return p;
      }
      // grow_extent may purge, which flushes every page cache (this one too): not under the flag.
      const Where w = locate(p);
      if (grow_extent(w.part, w.slot, w.index, n)) {
        ++tc->hits;
        return p;
      }
      // No room for the extra pages here: give it back and take the slow path (fallback nodes,
      // purge, or ENOMEM).
      chunk_free(w.part, w.slot, w.index);
    }
  }
  int part;
  return chunk_alloc(current_node(), 1 + cls, n, old_bytes, &part, borrow);
}

void Heap::page_refill(ThreadCache* tc, int cls) {
  // No decay here: the owner's page_lock is held, and starting the decay thread may allocate.
  recheck_node(tc);
  PageCacheList& l = tc->pages[cls];
  Slot& sl = part_[tc->node].slots[1 + cls];
  std::uint64_t idx[kPageCacheDepth];
  const std::uint32_t want = l.limit / 2 > 0 ? l.limit / 2 : 1;
  if (sl.free_mapped() == 0) return;  // racy hint; chunk_alloc takes the slow path exactly
  // Resident chunks only: fresh ones come one at a time through chunk_alloc, which may borrow.
  const int got = sl.take_batch(idx, static_cast<int>(want), true);
  if (got == 0) return;
  sl.allocs.fetch_add(static_cast<std::uint64_t>(got), std::memory_order_relaxed);
  sl.in_use_bytes.fetch_add(static_cast<std::uint64_t>(got) * sl.chunk(), std::memory_order_relaxed);
  // Fresh chunks first, so the mapped ones (taken first) end on top and are used first.
  for (int i = got; i-- > 0;) {
    l.chunk[l.count] = sl.address(idx[i]);
    l.extent[l.count++] = sl.extent(idx[i]);
    tc->page_bytes += std::uint64_t{sl.extent(idx[i])} * kPage;
  }
  counters_.tcache_misses.fetch_add(1, std::memory_order_relaxed);
  counters_.tcache_hits.fetch_add(tc->hits, std::memory_order_relaxed);
  tc->hits = 0;
}

bool Heap::large_cache_take(int part, std::uint64_t bytes) {
  std::atomic<std::uint64_t>& cached = part_[part].large_cached;
  if (cached.load(std::memory_order_relaxed) + bytes > opt_.large_cache_bytes) return false;
  if (cached.fetch_add(bytes, std::memory_order_relaxed) + bytes <= opt_.large_cache_bytes) return true;
  cached.fetch_sub(bytes, std::memory_order_relaxed);
  return false;
}

bool Heap::page_push(ThreadCache* tc, int cls, void* p, std::uint32_t extent_pages) {
  PageCacheList& l = tc->pages[cls];
  if (cls >= kLargeCachedClass) {
    const std::uint64_t bytes = std::uint64_t{extent_pages} * kPage;
    page_enter(tc);
    const int part = part_of_chunk(p);
    bool room = l.count < l.limit && large_cache_take(part, bytes);
    if (!room && l.count < l.limit) {
      // The bound is full: this thread's chunks of other large classes, older than the one just
      // freed, go back first (a program that moved on from 2 MiB to 4 MiB buffers would otherwise
      // keep its 2 MiB ones cached and the bound full).
      for (int c = kLargeCachedClass; c < kPageCacheClasses; ++c)
        if (c != cls && tc->pages[c].count != 0) page_flush(tc, c, 0);
      room = large_cache_take(part, bytes);
    }
    if (room) {
      l.chunk[l.count] = p;
      l.extent[l.count++] = extent_pages;
    }
    page_unlock_own(tc);
    return room;
  }
  page_enter(tc);
  if (l.count >= l.limit) page_flush(tc, cls, l.limit / 2);
  l.chunk[l.count] = p;
  l.extent[l.count++] = extent_pages;
  tc->page_bytes += std::uint64_t{extent_pages} * kPage;
  // Over the byte bound: return the other classes whole, largest first, down to half of it, then
  // half of this one if that was not enough. The chunk just freed is the likeliest to be asked for
  // again (a loop over one 4 MiB buffer keeps it cached however the other classes came and went).
  if (tc->page_bytes > opt_.page_cache_bytes) {
    for (int c = kLargeCachedClass - 1; c >= 0 && tc->page_bytes > opt_.page_cache_bytes / 2; --c)
      if (c != cls && tc->pages[c].count != 0) page_flush(tc, c, 0);
    if (tc->page_bytes > opt_.page_cache_bytes) page_flush(tc, cls, l.count / 2);
  }
  page_unlock_own(tc);
  return true;
}

void Heap::page_flush(ThreadCache* tc, int cls, std::uint32_t keep, bool limit) {
  PageCacheList& l = tc->pages[cls];
  if (l.count <= keep) return;
  const std::uint32_t n = l.count - keep;
  // The oldest n (bottom of the stack) go back, grouped by partition, one lock per group.
  std::uint32_t i = 0;
  while (i < n) {
    const Where w0 = locate(l.chunk[i]);
    Slot& sl = part_[w0.part].slots[w0.slot];
    std::uint64_t idx[kPageCacheDepth];
    int k = 0;
    std::uint64_t resident = 0;
    for (; i < n; ++i) {
      const Where w = locate(l.chunk[i]);
      if (w.part != w0.part) break;
      idx[k++] = w.index;
      resident += std::uint64_t{l.extent[i]} * kPage;
    }
    if (cls < kLargeCachedClass)
      tc->page_bytes -= resident;
    else
      large_cache_give(w0.part, resident);
    sl.frees.fetch_add(static_cast<std::uint64_t>(k), std::memory_order_relaxed);
    sl.in_use_bytes.fetch_sub(static_cast<std::uint64_t>(k) * sl.chunk(), std::memory_order_relaxed);
    sl.give_batch(idx, k, tick());
    if (limit) note_freed(w0.part, resident);
  }
  for (std::uint32_t j = 0; j < keep; ++j) {
    l.chunk[j] = l.chunk[n + j];
    l.extent[j] = l.extent[n + j];
  }
  l.count = keep;
}

void Heap::flush_pages(ThreadCache* tc) {
  for (int c = 0; c < kPageCacheClasses; ++c) page_flush(tc, c, 0, false);
}

void Heap::flush_all_page_caches() {
  LockGuard g(registry_lock_);
  if (asym_guard_) {
    for (ThreadCache* tc = registry_; tc != nullptr; tc = tc->reg_next) __atomic_store_n(&tc->page_flushing, 1u, __ATOMIC_RELAXED);
    // Refused now (it worked at init): nothing of another thread's cache is touched.
    const bool fenced = os_->barrier();
    for (ThreadCache* tc = registry_; tc != nullptr; tc = tc->reg_next) {
      // A thread inside its own cache operation (or one that was when a parent forked) is skipped.
      if (fenced && __atomic_load_n(&tc->page_lock, __ATOMIC_ACQUIRE) == 0) flush_pages(tc);
      __atomic_store_n(&tc->page_flushing, 0u, __ATOMIC_RELEASE);
    }
    return;
  }
  for (ThreadCache* tc = registry_; tc != nullptr; tc = tc->reg_next) {
    std::uint32_t expected = 0;
    // A thread busy with its own cache (or one that held it when a parent forked) is skipped.
    if (!__atomic_compare_exchange_n(&tc->page_lock, &expected, 1u, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      continue;
    flush_pages(tc);
    page_unlock_own(tc);
  }
}

void Heap::unregister_cache(ThreadCache* tc) {
  LockGuard g(registry_lock_);
  if (tc->reg_prev != nullptr) tc->reg_prev->reg_next = tc->reg_next; else registry_ = tc->reg_next;
  if (tc->reg_next != nullptr) tc->reg_next->reg_prev = tc->reg_prev;
  tc->reg_prev = tc->reg_next = nullptr;
}

void Heap::release_slab(int part, SlabMeta* s) {
  chunk_free(part, kSlabSlot, static_cast<std::uint64_t>(s - part_[part].slab_meta));
}

void Heap::small_free(NodePart& np, SlabMeta* s, void* p) {
  Central& c = np.central[s->cls];
  bool empty;
  {
    LockGuard g(c.lock);
    empty = slab_push(s, p);
    c.frees.fetch_add(1, std::memory_order_relaxed);
    c.in_use_bytes.fetch_sub(kSmallSize[s->cls], std::memory_order_relaxed);
    if (empty) {
      if (s->in_partial) central_unlink(&c, s);
    } else if (!s->in_partial) {
      central_link(&c, s);
    }
  }
  if (empty) release_slab(static_cast<int>(&np - part_), s);
}

void Heap::flush_list(CacheList* list, std::uint32_t n) {
  Central* held = nullptr;
  std::uint64_t held_count = 0;
  std::uint32_t held_size = 0;
  SlabMeta* empties[32];
  int empty_part[32];
  int ne = 0;
  auto drop = [&] {
    if (held == nullptr) return;
    held->frees.fetch_add(held_count, std::memory_order_relaxed);
    held->in_use_bytes.fetch_sub(held_count * held_size, std::memory_order_relaxed);
    held->lock.unlock();
    held = nullptr;
    held_count = 0;
  };
  while (n-- > 0 && list->head != nullptr) {
    void* p = list->head;
    list->head = *static_cast<void**>(p);
    --list->count;
    const Where w = locate(p);
    NodePart& np = part_[w.part];
    SlabMeta* s = &np.slab_meta[w.index];
    Central* c = &np.central[s->cls];
    if (c != held) {
      drop();
      c->lock.lock();
      held = c;
      held_size = kSmallSize[s->cls];
    }
    ++held_count;
    if (slab_push(s, p)) {
      if (s->in_partial) central_unlink(c, s);
      empties[ne] = s;
      empty_part[ne++] = w.part;
      if (ne == 32) {
        drop();
        for (int i = 0; i < ne; ++i) release_slab(empty_part[i], empties[i]);
        ne = 0;
      }
    } else if (!s->in_partial) {
      central_link(c, s);
    }
  }
  drop();
  for (int i = 0; i < ne; ++i) release_slab(empty_part[i], empties[i]);
}

bool Heap::transfer_put(CacheList* list, int cls, int part, std::uint32_t n) {
  if (n == 0 || list->count < n) return false;
  // Find the batch's last object; a list may hold objects of a node the thread has left.
  void* tail = list->head;
  for (std::uint32_t i = 1; i < n; ++i) {
    if (nparts_ != 1 && locate(tail).part != part) return false;
    tail = *static_cast<void**>(tail);
  }
  if (nparts_ != 1 && locate(tail).part != part) return false;
  void* rest = *static_cast<void**>(tail);
  Central& c = part_[part].central[cls];
  {
    LockGuard g(c.lock);
    const std::uint32_t bytes = n * kSmallSize[cls];
    if (c.nbatches == kTransferBatches || c.parked_bytes + bytes > kTransferBytes) return false;
    c.parked_bytes += bytes;
    *static_cast<void**>(tail) = nullptr;
    c.batch[c.nbatches] = list->head;
    c.batch_count[c.nbatches++] = n;
    c.frees.fetch_add(n, std::memory_order_relaxed);
    c.in_use_bytes.fetch_sub(std::uint64_t{n} * kSmallSize[cls], std::memory_order_relaxed);
  }
  list->head = rest;
  list->count -= n;
  return true;
}

void Heap::drain_transfers() {
  for (int p = 0; p < nparts_; ++p) {
    for (int cls = 0; cls < kSmallClasses; ++cls) {
      Central& c = part_[p].central[cls];
      CacheList taken[kTransferBatches];
      int n = 0;
      {
        LockGuard g(c.lock);
        for (; c.nbatches > 0; ++n) {
          --c.nbatches;
          taken[n].head = c.batch[c.nbatches];
          taken[n].count = c.batch_count[c.nbatches];
        }
        c.parked_bytes = 0;
        // Back in the slabs they count as flushed already: undo the transfer's accounting, which
        // flush_list repeats.
        for (int i = 0; i < n; ++i) {
          c.frees.fetch_sub(taken[i].count, std::memory_order_relaxed);
          c.in_use_bytes.fetch_add(std::uint64_t{taken[i].count} * kSmallSize[cls], std::memory_order_relaxed);
        }
      }
      for (int i = 0; i < n; ++i) flush_list(&taken[i], taken[i].count);  // n is 0 for most classes
    }
  }
}

void Heap::flush_cache(ThreadCache* tc) {
  for (int c = 0; c < kSmallClasses; ++c) flush_list(&tc->lists[c], tc->lists[c].count);
  page_enter(tc);
  // Not checked against the free limit here: a pool whose threads exit and are replaced
  // (arena_churn) would advise pages away at every exit that the next thread charges again (its
  // steady phase ran at 0.6 of the speed); the next MiB freed anywhere on the node checks.
  flush_pages(tc);
  page_unlock_own(tc);
  unregister_cache(tc);
  counters_.tcache_hits.fetch_add(tc->hits, std::memory_order_relaxed);
  tc->hits = 0;
}

void* Heap::small_alloc_slow(int cls) {
  ThreadCache* tc = live_cache();
  if (tc != nullptr)
    if (void* p = cache_pop(tc, cls)) return p;
  return refill(tc, cls);
}

// ---- the API ------------------------------------------------------------------------------------

void* Heap::page_malloc(std::size_t n) {
  // A hit on the top of the thread's page cache: the common case of a cached class.
  static_assert(kPageLookupMax == page_class_size(kPageCacheClasses - 1), "the table covers the cached classes");
  if (n <= kPageLookupMax) {
    ThreadCache* tc = thread_cache_tls();
    if (tc->owner == this) {
      const int cls = page_class_cached(n);
      PageCacheList& l = tc->pages[cls];
      page_enter(tc);
      if (l.count != 0 && l.extent[l.count - 1] >= pages_for(n)) {
        void* p = l.chunk[--l.count];
        if (__builtin_expect(cls < kLargeCachedClass, 1))
          tc->page_bytes -= std::uint64_t{l.extent[l.count]} * kPage;
        else
          large_cache_give(part_of_chunk(p), std::uint64_t{l.extent[l.count]} * kPage);
        page_unlock_own(tc);
        ++tc->hits;
        return p;
      }
      page_unlock_own(tc);
    }
  }
  return page_malloc_uncached(n);
}

void* Heap::page_malloc_uncached(std::size_t n) {
  if (n <= max_class()) {
    std::uint64_t old;
    return page_or_split(page_class(n), n, &old, true, kPage);
  }
  return huge_alloc(n, kPage);
}

void Heap::free_slow(void* p) {
  // A chunk of a cached page class on the thread's node goes on its stack when there is room.
  ThreadCache* tc = thread_cache_tls();
  const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(p) - tc->page_base;
  if (off < tc->page_span && tc->owner == this) {
    const int cls = static_cast<int>(off >> span_shift_);
    PageCacheList& l = tc->pages[cls];
    Slot& sl = part_[tc->node].slots[1 + cls];
    const std::uint32_t ext = sl.extent(sl.index_of(p));
    // Chunks above 256 KiB take page_push's path (the node's bound, evictions) through free_uncached.
    if (__builtin_expect(cls < kLargeCachedClass, 1)) {
      page_enter(tc);
      if (l.count < l.limit && tc->page_bytes + std::uint64_t{ext} * kPage <= opt_.page_cache_bytes) {
        l.chunk[l.count] = p;
        l.extent[l.count++] = ext;
        tc->page_bytes += std::uint64_t{ext} * kPage;
        page_unlock_own(tc);
        return;
      }
      page_unlock_own(tc);
    }
  }
  free_uncached(p);
}

void Heap::free_uncached(void* p) {
  ThreadCache* tc;
  if (p == nullptr) return;
  if (!in_arena(p)) {
    huge_free(p);
    return;
  }
  const Where w = locate(p);
  NodePart& np = part_[w.part];
  if (w.slot != kSlabSlot) {
    const int cls = w.slot - 1;
    if (cls < kPageCacheClasses && (tc = live_cache()) != nullptr && tc->node == w.part && tc->pages[cls].limit != 0 &&
        page_push(tc, cls, p, np.slots[w.slot].extent(w.index)))
      return;
    chunk_free(w.part, w.slot, w.index);
    return;
  }
  SlabMeta* s = &np.slab_meta[w.index];
  tc = live_cache();
  if (tc != nullptr && tc->node == w.part) {
    CacheList& l = tc->lists[s->cls];
    if (l.count >= l.limit && !transfer_put(&l, s->cls, w.part, l.limit / 2)) flush_list(&l, l.limit / 2);
    *static_cast<void**>(p) = l.head;
    l.head = p;
    ++l.count;
    return;
  }
  small_free(np, s, p);
}

void* Heap::calloc(std::size_t count, std::size_t size) {
  std::size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (n <= kSmallMax) {
    void* p = small_alloc(small_class(n));
    if (p != nullptr) memset(p, 0, n);
    return p;
  }
  if (n <= max_class()) {
    std::uint64_t old = 0;
    void* p = page_or_split(page_class(n), n, &old, true, kPage);
    if (p != nullptr && old != 0) memset(p, 0, old < n ? old : n);  // pages past `old` are fresh zeros
    return p;
  }
  return huge_alloc(n, kPage);  // fresh mapping: zero
}

std::size_t Heap::usable_size(const void* p) {
  if (p == nullptr) return 0;
  if (!in_arena(p)) return huge_.find(p);
  const Where w = locate(p);
  NodePart& np = part_[w.part];
  if (w.slot == kSlabSlot) return kSmallSize[np.slab_meta[w.index].cls];
  return std::uint64_t{np.slots[w.slot].extent(w.index)} * kPage;
}

bool Heap::owns(const void* p) {
  return in_arena(p) || (huge_live_.load(std::memory_order_relaxed) != 0 && huge_.find(p) != 0);
}

void* Heap::realloc(void* p, std::size_t n) {
  if (p == nullptr) return malloc(n);
  if (n == 0) {
    free(p);
    return nullptr;
  }
  std::size_t old_usable;
  if (in_arena(p)) {
    const Where w = locate(p);
    NodePart& np = part_[w.part];
    if (w.slot == kSlabSlot) {
      const int cls = np.slab_meta[w.index].cls;
      if (n <= kSmallMax && small_class(n) == cls) return p;
      old_usable = kSmallSize[cls];
    } else {
      Slot& sl = np.slots[w.slot];
      // Stay in place when n fits the chunk and would not be better served by a much smaller class.
      if (n <= sl.chunk() && n > kSmallMax && page_class(n) + 1 >= w.slot - 1) {
        if (grow_extent(w.part, w.slot, w.index, n)) return p;
      }
      old_usable = std::uint64_t{sl.extent(w.index)} * kPage;
    }
  } else {
    const std::uint64_t bytes = huge_.find(p);
    if (bytes == 0) fatal("realloc(): pointer not allocated by numap");
    if (n <= bytes && n > bytes / 2) return p;
    old_usable = bytes;
  }
  void* q = malloc(n);
  if (q == nullptr) return nullptr;  // errno ENOMEM; p untouched
  memcpy(q, p, old_usable < n ? old_usable : n);
  free(p);
  return q;
}

void* Heap::memalign(std::size_t align, std::size_t n) {
  if (align <= 16) return malloc(n);
  if (n <= kSmallMax && align < kPage) {
    for (int c = small_class(n); c < kSmallClasses; ++c)
      if (kSmallSize[c] % align == 0) return small_alloc(c);
  }
  const std::size_t need = n == 0 ? 1 : n;
  if (align <= kPage) return page_malloc(need);  // every page chunk is page-aligned: malloc's path
  int cls = page_class_pow2(need, align);
  if (cls < npage_) {
    std::uint64_t old;
    return page_or_split(cls, need, &old, false, align);
  }
  if (align > (std::uint64_t{1} << 40)) {
    errno = ENOMEM;
    return nullptr;
  }
  return huge_alloc(need, align);
}

// ---- background purge, fork ---------------------------------------------------------------------

namespace {
void* decay_main(void* arg) {
  static_cast<Heap*>(arg)->decay_loop();
  return nullptr;
}
}  // namespace

void Heap::decay_loop() {
  const long period = static_cast<long>(opt_.decay_ms / 4 > 0 ? opt_.decay_ms / 4 : 1);
  while (__atomic_load_n(&decay_stop_, __ATOMIC_ACQUIRE) == 0) {
    Os::sleep_unless(&decay_stop_, 0, period);
    if (__atomic_load_n(&decay_stop_, __ATOMIC_ACQUIRE) != 0) break;
    maybe_decay();
  }
}

void Heap::maybe_start_decay() {
  if (!opt_.decay_thread || decay_state_.load(std::memory_order_relaxed) != 0) return;
  int expected = 0;
  if (!decay_state_.compare_exchange_strong(expected, 1)) return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  // Joinable: destroy() (tests) stops and joins it before unmapping what it reads.
  if (pthread_create(&decay_thread_, &attr, decay_main, this) != 0) decay_state_.store(2);  // 2: slow path only
  pthread_attr_destroy(&attr);
}

void Heap::for_each_lock(void (*fn)(Lock&)) {
  fn(registry_lock_);  // first: purge takes it before Slot locks
  for (int p = 0; p < nparts_; ++p) {
    for (int s = 0; s < nslots_; ++s) fn(part_[p].slots[s].lock);
    for (int c = 0; c < kSmallClasses; ++c) fn(part_[p].central[c].lock);
  }
  fn(huge_.lock);
}

void Heap::fork_prepare() { for_each_lock([](Lock& l) { l.lock(); }); }
void Heap::fork_parent() { for_each_lock([](Lock& l) { l.unlock(); }); }
void Heap::fork_child() {
  for_each_lock([](Lock& l) { l.reset(); });
  for (int p = 0; p < nparts_; ++p) part_[p].limiting.store(0, std::memory_order_relaxed);  // its thread is gone
  // The child is a new process for membarrier: register it again (or fall back to the try-lock
  // while it is still single-threaded).
  if (asym_guard_) asym_guard_ = os_->register_barrier();
  // The decay thread does not exist in the child, and a child of a multithreaded parent may not
  // safely start threads (pthread_create is not async-signal-safe; TSan refuses it): the child
  // applies the decay on its allocation slow path only. An exec starts afresh.
  decay_state_.store(2);
}

// ---- statistics ---------------------------------------------------------------------------------

std::size_t Heap::stats(struct numap_stats* out, numap_class_stats* classes, std::size_t max_classes) {
  const std::size_t total_entries = static_cast<std::size_t>(nparts_) * (kSmallClasses + nslots_);
  if (out != nullptr) {
    struct numap_stats s{};
    s.struct_size = sizeof(struct numap_stats);
    s.version = NUMAP_STATS_VERSION;
    s.nodes = static_cast<std::uint32_t>(nparts_);
    s.numa_enabled = numa_;
    s.capacity_bytes = opt_.capacity;
    s.mapped_bytes = total_mapped_.load(std::memory_order_relaxed);
#define NUMAP_COPY_COUNTER(name, counted_by, exit_line, alloc_stats)                 \
  NUMAP_COUNTED_BY(heap, counted_by, s.name = counters_.name.load(std::memory_order_relaxed);) \
  NUMAP_COUNTED_BY(os, counted_by, s.name = os_->counters.name.load(std::memory_order_relaxed);)
    NUMAP_TOTALS(NUMAP_COPY_COUNTER)
#undef NUMAP_COPY_COUNTER
    s.allocs = s.tcache_hits + huge_allocs_.load(std::memory_order_relaxed);
    int nd = 0;
    for (int d = 0; d < 256 && nd < NUMAP_MAX_DISTANCES; ++d) {
      const std::uint64_t v = fallback_by_distance_[d].load(std::memory_order_relaxed);
      if (v == 0) continue;
      s.fallback_distance[nd] = static_cast<std::uint32_t>(d);
      s.fallback_count[nd++] = v;
    }
    for (int p = 0; p < nparts_ && p < NUMAP_MAX_NODES; ++p) {
      NodePart& np = part_[p];
      numap_node_stats& ns = s.node[p];
      ns.os_node = numa_ ? topo_.os_node[p] : -1;
      const std::uint64_t cap = np.capacity.load(std::memory_order_relaxed);
      ns.capacity_bytes = cap == kUnlimited ? 0 : cap;
      ns.mapped_bytes = np.mapped.load(std::memory_order_relaxed);
      ns.fallback_in = np.fallback_in.load(std::memory_order_relaxed);
      const std::uint64_t huge = np.huge_bytes.load(std::memory_order_relaxed);
      ns.in_use_bytes += huge;
      s.huge_bytes += huge;
      for (int c = 0; c < kSmallClasses; ++c) {
        Central& ce = np.central[c];
        ns.in_use_bytes += ce.in_use_bytes.load(std::memory_order_relaxed);
        s.allocs += ce.allocs.load(std::memory_order_relaxed);
        s.transfer_batches += ce.transfers.load(std::memory_order_relaxed);
        s.lock_acquisitions += ce.lock.acquisitions();
        s.lock_contended += ce.lock.contended();
        s.lock_wait_ns += ce.lock.wait_ns();
      }
      for (int si = 0; si < nslots_; ++si) {
        Slot& sl = np.slots[si];
        if (si != kSlabSlot) {
          ns.in_use_bytes += sl.in_use_bytes.load(std::memory_order_relaxed);
          s.allocs += sl.allocs.load(std::memory_order_relaxed);
        }
        ns.advised_bytes += sl.advised_bytes.load(std::memory_order_relaxed);
        s.lock_acquisitions += sl.lock.acquisitions();
        s.lock_contended += sl.lock.contended();
        s.lock_wait_ns += sl.lock.wait_ns();
      }
      s.in_use_bytes += ns.in_use_bytes;
    }
    s.lock_acquisitions += huge_.lock.acquisitions();
    s.lock_contended += huge_.lock.contended();
    s.lock_wait_ns += huge_.lock.wait_ns();
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
                                     ce.in_use_bytes.load(), 0, 0, ce.allocs.load(), ce.frees.load(),
                                     ce.lock.acquisitions(), ce.lock.contended(), ce.lock.wait_ns()};
    }
    for (int si = 0; si < nslots_; ++si, ++k) {
      if (k >= max_classes || classes == nullptr) continue;
      Slot& sl = np.slots[si];
      classes[k] = numap_class_stats{static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(kSmallClasses + si),
                                     sl.chunk(), si == kSlabSlot ? 2u : 1u, 0,
                                     sl.in_use_bytes.load(), sl.mapped_bytes.load(), sl.advised_bytes.load(),
                                     sl.allocs.load(), sl.frees.load(),
                                     sl.lock.acquisitions(), sl.lock.contended(), sl.lock.wait_ns()};
    }
  }
  return total_entries;
}

}  // namespace numap
