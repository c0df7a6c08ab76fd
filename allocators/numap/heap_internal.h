// The Heap's helpers shared by its sources (heap*.cpp; not for layers above): rounding, and the
// owner's side of the page-cache guard, inline because the page-cache hits in heap.cpp call it.
#pragma once

#include <cstdint>

#include "allocators/numap/heap.h"

namespace numap {

inline std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }
inline std::uint64_t pages_for(std::uint64_t bytes) { return (bytes + kPage - 1) / kPage; }

inline void page_unlock_own(ThreadCache* tc) { __atomic_store_n(&tc->page_lock, 0u, __ATOMIC_RELEASE); }
inline void pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

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

}  // namespace numap
