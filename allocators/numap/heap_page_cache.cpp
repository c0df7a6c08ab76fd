// The Heap's page-class thread cache (4 KiB .. 4 MiB chunks): refill, push with the large-chunk
// bound, flush, and the purge's flush of every thread's cache. The hits are in heap.cpp.
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "allocators/numap/heap.h"
#include "allocators/numap/heap_internal.h"

namespace numap {

void* Heap::page_alloc(int cls, std::size_t n, std::uint64_t* old_bytes, bool borrow) {
  ThreadCache* tc;
  if (cls < kPageCacheClasses && (tc = live_cache()) != nullptr && tc->pages[cls].limit != 0) {
    if (cls >= kLargeCachedClass) {
      const std::uint32_t bit = 1u << (cls - kLargeCachedClass);
      tc->large_again |= tc->large_taken & bit;
      tc->large_taken |= bit;
    }
    page_enter(tc);
    PageCacheList& l = tc->pages[cls];
    if (l.count == 0 && cls < kLargeCachedClass) page_refill(tc, cls);
    void* p = nullptr;
    std::uint32_t ext = 0;
    const std::uint64_t need = pages_for(n);  // with THP a cached extent is a whole grain: >= still means covered
    if (l.count != 0) {
      // The most recent chunk whose charged pages already cover n (no new charge), else the most recent.
      std::uint32_t k = l.count - 1;
      if (l.extent(k) < need)
        for (std::uint32_t j = k; j-- > 0;)
          if (l.extent(j) >= need) {
            k = j;
            break;
          }
      p = l.chunk(k);
      ext = l.extent(k);
      --l.count;
      l.entry[k] = l.entry[l.count];
      if (cls < kLargeCachedClass)
        tc->page_room += ext;
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
      if (grow_extent(w.part, w.slot, w.index, n, old_bytes)) {
        ++tc->hits;
        return p;
      }
      // No room for the extra pages here: give it back and take the slow path (fallback nodes,
      // purge, or ENOMEM).
      chunk_free(w.part, w.slot, w.index);
    }
  }
  int part;
  return chunk_alloc(budget_.current_node(), 1 + cls, n, old_bytes, &part, borrow);
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
    l.set(l.count++, sl.address(idx[i]), sl.extent(idx[i]));
    tc->page_room -= sl.extent(idx[i]);
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
    if (!(tc->large_again & (1u << (cls - kLargeCachedClass)))) return false;  // nobody here would take it
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
      l.set(l.count++, p, extent_pages);
    }
    page_unlock_own(tc);
    return room;
  }
  page_enter(tc);
  if (l.count >= l.limit) page_flush(tc, cls, l.limit / 2);
  l.set(l.count++, p, extent_pages);
  tc->page_room -= extent_pages;
  // Over the byte bound: return the other classes whole, largest first, down to half of it, then
  // half of this one if that was not enough. The chunk just freed is the likeliest to be asked for
  // again (a loop over one 4 MiB buffer keeps it cached however the other classes came and went).
  if (tc->page_room < 0) {
    const std::int64_t bound = static_cast<std::int64_t>(opt_.page_cache_bytes / kPage);
    for (int c = kLargeCachedClass - 1; c >= 0 && tc->page_room < bound - bound / 2; --c)
      if (c != cls && tc->pages[c].count != 0) page_flush(tc, c, 0);
    if (tc->page_room < 0) page_flush(tc, cls, l.count / 2);
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
    const Where w0 = locate(l.chunk(i));
    Slot& sl = part_[w0.part].slots[w0.slot];
    std::uint64_t idx[kPageCacheDepth];
    int k = 0;
    std::uint64_t resident = 0;
    for (; i < n; ++i) {
      const Where w = locate(l.chunk(i));
      if (w.part != w0.part) break;
      idx[k++] = w.index;
      resident += std::uint64_t{l.extent(i)} * kPage;
    }
    if (cls < kLargeCachedClass)
      tc->page_room += static_cast<std::int64_t>(resident / kPage);
    else
      large_cache_give(w0.part, resident);
    sl.frees.fetch_add(static_cast<std::uint64_t>(k), std::memory_order_relaxed);
    sl.in_use_bytes.fetch_sub(static_cast<std::uint64_t>(k) * sl.chunk(), std::memory_order_relaxed);
    sl.give_batch(idx, k, tick());
    if (resident != 0) note_given_back();
    if (limit) note_freed(w0.part, resident);
  }
  for (std::uint32_t j = 0; j < keep; ++j) {
    l.entry[j] = l.entry[n + j];
  }
  l.count = keep;
}

void Heap::flush_pages(ThreadCache* tc) {
  for (int c = 0; c < kPageCacheClasses; ++c) page_flush(tc, c, 0, false);
}

void Heap::flush_all_page_caches() {
  LockGuard g(registry_.lock());
  if (asym_guard_) {
    registry_.for_each([](ThreadCache* tc) { __atomic_store_n(&tc->page_flushing, 1u, __ATOMIC_RELAXED); });
    // Refused now (it worked at init): nothing of another thread's cache is touched.
    const bool fenced = os_->barrier();
    registry_.for_each([&](ThreadCache* tc) {
      // A thread inside its own cache operation (or one that was when a parent forked) is skipped.
      if (fenced && __atomic_load_n(&tc->page_lock, __ATOMIC_ACQUIRE) == 0) flush_pages(tc);
      __atomic_store_n(&tc->page_flushing, 0u, __ATOMIC_RELEASE);
    });
    return;
  }
  // No membarrier: this side of the guard is a sequentially consistent exchange and load, as the
  // owner's is (page_enter_fenced).
  registry_.for_each([&](ThreadCache* tc) {
    __atomic_exchange_n(&tc->page_flushing, 1u, __ATOMIC_SEQ_CST);
    // A thread busy with its own cache (or one that was when a parent forked) is skipped.
    if (__atomic_load_n(&tc->page_lock, __ATOMIC_SEQ_CST) == 0) flush_pages(tc);
    __atomic_store_n(&tc->page_flushing, 0u, __ATOMIC_RELEASE);
  });
}

}  // namespace numap
