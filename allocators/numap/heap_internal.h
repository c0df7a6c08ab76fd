// The Heap's helpers shared by its sources (heap*.cpp; not for layers above): rounding, and the
// owner's waiting side of the page-cache guard (its one try is thread_cache.h's page_try_enter).
#pragma once

#include <cstdint>

#include "allocators/numap/heap.h"

namespace numap {

inline std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }
inline std::uint64_t pages_for(std::uint64_t bytes) { return (bytes + kPage - 1) / kPage; }

inline void pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// The owner's guard (page_try_enter, thread_cache.h), waiting while a purger flushes this cache.
inline void Heap::page_enter(ThreadCache* tc) const {
  while (!page_try_enter(tc)) {
    if (tc->page_asym)  // briefly: until the purger is done with this cache
      while (__atomic_load_n(&tc->page_flushing, __ATOMIC_ACQUIRE) != 0) pause();
    else
      pause();
  }
}

}  // namespace numap
