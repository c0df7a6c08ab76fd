// The Heap facade: arena layout (init, destroy), locating a pointer, the allocation API behind the
// inline hits (including the page-class cache's hits) and fork. Its components are their own
// headers (node_budget.h, free_limit.h, huge.h, decay_thread.h, cache_registry.h); its other
// concerns are its own sources: heap_chunks, heap_huge, heap_small, heap_page_cache,
// heap_reclaim, heap_stats.
#include "allocators/numap/heap.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <new>

#include "allocators/numap/heap_internal.h"

namespace numap {
__thread ThreadCache tls_cache __attribute__((tls_model("initial-exec")));

bool Heap::init(const Options& options, const Topology& topology, Os* os) {
  // About (1 + page classes) x NUMAP_CLASS_SPAN of address space per node (1.1 TiB at 16 GiB): a
  // limit the host runs under must not kill it at its first malloc while a smaller span fits.
  std::size_t rows = 0;
  const OptionInfo& span_row = option_table(&rows)[static_cast<std::size_t>(OptionIndex::CLASS_SPAN)];
  const std::uint64_t smallest = static_cast<std::uint64_t>(span_row.min);
  Options o = options;
  while (!init_at(o, topology, os)) {
    if (o.class_span / 2 < smallest) return false;
    o.class_span /= 2;
  }
  if (o.class_span != options.class_span)
    option_fallback(&opt_, OptionIndex::CLASS_SPAN, options,
                    "cannot reserve the arena at this span (an address-space limit, ulimit -v, or "
                    "vm.overcommit_memory=2)");
  return true;
}

bool Heap::init_at(const Options& options, const Topology& topology, Os* os) {
  opt_ = options;
  if (&topology != &topo_) topo_ = topology;
  os_ = os;
  epoch_ms_ = os_->now_ms();
  given_back_.store(false, std::memory_order_relaxed);  // (tests init a destroyed heap again)
  decay_start_due_.store(false, std::memory_order_relaxed);
  decay_period_ = static_cast<std::uint32_t>(opt_.decay_ms / 4 > 0 ? opt_.decay_ms / 4 : 1);
  idle_look_ms_ = opt_.decay_ms > 0 ? static_cast<std::uint32_t>(opt_.decay_ms) : ~0u;
  // One thread's lists grow by at most NUMAP_TCACHE_BUDGET, all threads' by NUMAP_TCACHE_TOTAL.
  const std::uint64_t one_thread = opt_.tcache_budget < opt_.tcache_total ? opt_.tcache_budget : opt_.tcache_total;
  lists_adapt_ = one_thread != 0;
  tcache_pool_.store(opt_.tcache_total, std::memory_order_relaxed);
  for (int c = 0; c < kSmallClasses; ++c) {
    const std::uint64_t base = opt_.tcache_bytes / kSmallSize[c];
    base_limit_[c] = static_cast<std::uint32_t>(base < 4 ? 4 : base > 512 ? 512 : base);
    const std::uint64_t most = base_limit_[c] + one_thread / kSmallSize[c];
    max_limit_[c] = static_cast<std::uint32_t>(most > kMaxListLength ? kMaxListLength : most);
  }
  asym_guard_ = os_->register_barrier();
  numa_ = numa_enabled(topo_, opt_.numa);
  nparts_ = numa_ ? topo_.count : 1;
  budget_.init(&opt_, &topo_, os_, numa_, nparts_);
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
    slot_meta_off_[s] = per_part;
    per_part += round_up(Slot::metadata_bytes(span_ / slot_chunk(s)), 64);
  }
  per_part = round_up(per_part, kPage);
  part_meta_bytes_ = per_part;
  const std::uint64_t parts_bytes = sizeof(NodePart) * static_cast<std::uint64_t>(nparts_);
  meta_bytes_ = round_up(parts_bytes + per_part * static_cast<std::uint64_t>(nparts_) + HugeAllocations::metadata_bytes(), kPage);
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
    // Not constructed (see NodePart): only the members whose start is not zero bytes, on the page
    // the budget writes at once anyway; the Slots wait for their first use (init_slot).
    NodePart* part = &part_[i];
    new (&part->charge) NodeCharge();
    new (&part->free_limit) FreeLimit();
    char* region = m;
    m += per_part;
    part->slab_meta = reinterpret_cast<SlabMeta*>(region);
    region += round_up(slab_chunks * sizeof(SlabMeta), 64);
    part->slab_class = reinterpret_cast<std::uint8_t*>(region);
    char* base = arena_ + static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(nslots_) * span_;
    for (int s = 0; s < nslots_; ++s)
      if (slot_grain(s) > 1 || opt_.thp_every_class) os_->advise_huge(base + static_cast<std::uint64_t>(s) * span_, span_, true);
    budget_.attach(i, &part->charge);
    // Bound before first touch: every page of the partition faults in on its node.
    if (numa_) bind_part(base, static_cast<std::uint64_t>(nslots_) * span_, i);
  }
  huge_.init(m);
  if (!thp()) os_->advise_huge(arena_, arena_bytes_, false);
  budget_.follow_kernel();
  refresh_capacity(true);
  return true;
}

void Heap::init_slot(int part, int slot) {
  // Rare (once per node and class): one lock for all, held across a fork.
  LockGuard g(slot_init_lock_);
  Slot& sl = part_[part].slots[slot];
  if (sl.ready()) return;
  char* meta = meta_ + sizeof(NodePart) * static_cast<std::uint64_t>(nparts_) +
               part_meta_bytes_ * static_cast<std::uint64_t>(part) + slot_meta_off_[slot];
  const std::uint64_t chunk = slot_chunk(slot);
  sl.init(slot_base(part, slot), chunk, span_ / chunk, slot_grain(slot), meta);
}

void Heap::destroy() {
  decay_thread_.stop();
  ThreadCache* tc = thread_cache_tls();
  if (tc->owner == this) {
    registry_.remove(tc);
    tc->slab_span = tc->page_fast_span = 0;
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


int Heap::node_of(const void* p) const {
  if (in_arena(p)) return locate(p).part;
  return -1;
}


void* Heap::page_malloc(std::size_t n) {
  // A hit on the top of the thread's page cache: the common case of a cached class (up to
  // 256 KiB the inline one, for memalign's requests; Heap::malloc tried it already).
  static_assert(kPageLookupMax == page_class_size(kPageCacheClasses - 1), "the table covers the cached classes");
  if (n <= kPageFastMax) {
    if (void* p = page_hit(n)) return p;
  } else if (n <= kPageLookupMax) {
    ThreadCache* tc = thread_cache_tls();
    if (tc->owner == this) {
      PageCacheList& l = tc->pages[page_class_cached(n)];
      page_enter(tc);
      if (l.count != 0 && l.extent(l.count - 1) >= pages_for(n)) {
        void* p = l.chunk(--l.count);
        large_cache_give(part_of_chunk(p), std::uint64_t{l.extent(l.count)} * kPage);
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
  // The inline push (cache_push) found no room, a chunk of another node or above 256 KiB, a
  // purger flushing the cache, or no live cache.
  free_uncached(p);
}

void Heap::free_uncached(void* p) {
  // free() leaves errno as it was (POSIX.1-2024, glibc): a madvise, mremap or munmap refused on the
  // way (the pages then stay charged) is numap's business, not the caller's. Only this path, past
  // the thread caches, makes system calls.
  const int saved_errno = errno;
  free_central(p);
  start_decay_thread();  // no lock held; the first chunk given back to a Slot may have been this one
  errno = saved_errno;
}

__attribute__((always_inline)) inline void Heap::free_central(void* p) {
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
    if (l.count >= l.limit) list_overflow(tc, s->cls, w.part);
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
  if (!in_arena(p)) return huge_.size_of(p);
  const Where w = locate(p);
  NodePart& np = part_[w.part];
  if (w.slot == kSlabSlot) return kSmallSize[np.slab_meta[w.index].cls];
  return std::uint64_t{np.slots[w.slot].extent(w.index)} * kPage;
}

bool Heap::owns(const void* p) {
  return in_arena(p) || huge_.holds(p);
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
    const std::uint64_t bytes = huge_.size_of(p);
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


void Heap::for_each_used_lock(void (*fn)(Lock&)) {
  // Locks of Slots not yet initialised are never taken, nor those of the Centrals of a node whose
  // slab Slot is not (refill checks it first): skipped, so a fork writes no page of a node or
  // class never used. slot_init_lock_ is held around this, so the set cannot change meanwhile.
  for (int p = 0; p < nparts_; ++p) {
    for (int s = 0; s < nslots_; ++s)
      if (part_[p].slots[s].ready()) fn(part_[p].slots[s].lock);
    if (part_[p].slots[kSlabSlot].ready())
      for (int c = 0; c < kSmallClasses; ++c) {
        fn(part_[p].central[c].lock);
        fn(part_[p].central[c].handoff.lock());  // no taker or drain in flight across a fork
      }
  }
  fn(huge_.lock());
}

// Order: the registry first (purge takes it before Slot locks), then slot_init_lock_ (taken with
// no other lock held), then the others.
void Heap::fork_prepare() {
  registry_.lock().lock();
  slot_init_lock_.lock();
  give_back_lock_.lock();
  for_each_used_lock([](Lock& l) { l.lock(); });
}
void Heap::fork_parent() {
  for_each_used_lock([](Lock& l) { l.unlock(); });
  give_back_lock_.unlock();
  slot_init_lock_.unlock();
  registry_.lock().unlock();
}
void Heap::fork_child() {
  for_each_used_lock([](Lock& l) { l.reset(); });
  give_back_lock_.reset();  // the queue stays: the child's slow paths apply it
  slot_init_lock_.reset();
  registry_.lock().reset();
  // The other threads are gone and so is their use for list growth: the child's pool is the total
  // less its own thread's claim (their caches stay registered, holding nothing, so none is asked).
  ThreadCache* own = thread_cache_tls();
  registry_.for_each([own](ThreadCache* tc) {
    if (tc != own) __atomic_store_n(&tc->claimed_bytes, 0, __ATOMIC_RELAXED);
  });
  const std::uint64_t kept = own->owner == this ? own->claimed_bytes : 0;
  tcache_pool_.store(opt_.tcache_total > kept ? opt_.tcache_total - kept : 0, std::memory_order_relaxed);
  for (int p = 0; p < nparts_; ++p) {
    part_[p].free_limit.forget_applier();
    if (part_[p].slots[kSlabSlot].ready())
      for (int c = 0; c < kSmallClasses; ++c) part_[p].central[c].handoff.recount(kSmallSize[c]);
  }
  // The child is a new process for membarrier: register it again (or fall back to the fenced
  // guard, page_enter_fenced, while it is still single-threaded).
  if (asym_guard_) asym_guard_ = os_->register_barrier();
  if (own->owner == this) own->page_asym = asym_guard_;  // the only thread: no purger meanwhile
  // The child applies the decay on its allocation slow path only. An exec starts afresh.
  decay_thread_.forget();
}

}  // namespace numap
