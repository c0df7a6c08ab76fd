// Layer 0, the counters: ONE list of numap_stats' totals, from which the Os and Heap counter
// structs, Heap::stats' copy, the harness's alloc_stats keys (native.cpp) and the NUMAP_STATS_AT_EXIT
// / malloc_stats line are derived. What each total means is said once, in include/numap.h (the
// struct is the C ABI, laid out by version, so it stays written there).
//
// Columns: the numap_stats field (and the name users see); who counts it: `heap` (a counter of the
// Heap's own), `os` (the Os layer's call counters) or `stats` (computed by Heap::stats from the
// nodes' and classes' counters, or a setting); shown on the exit line (1/0, in this order); shown
// in allocmark's alloc_stats (1/0; the lock totals go to `contention` instead).
#pragma once

#include <atomic>
#include <cstdint>

#define NUMAP_TOTALS(X)                 \
  X(allocs, stats, 1, 1)                \
  X(in_use_bytes, stats, 1, 1)          \
  X(mapped_bytes, stats, 1, 1)          \
  X(advised_bytes, heap, 1, 1)          \
  X(decay_passes, heap, 1, 1)           \
  X(decay_bytes, heap, 1, 1)            \
  X(borrowed_bytes, heap, 1, 1)         \
  X(exchanged_bytes, heap, 1, 1)        \
  X(moved_bytes, heap, 1, 1)            \
  X(reused_bytes, stats, 1, 1)          \
  X(limited_bytes, heap, 1, 1)          \
  X(deferred_purges, heap, 0, 1)        \
  X(deferred_wait_ms, heap, 0, 1)       \
  X(purges, heap, 1, 1)                 \
  X(trims, heap, 1, 1)                  \
  X(tcache_misses, heap, 1, 1)          \
  X(lock_acquisitions, stats, 1, 0)     \
  X(lock_contended, stats, 0, 0)        \
  X(lock_wait_ns, stats, 0, 0)          \
  X(huge_bytes, stats, 0, 1)            \
  X(capacity_bytes, stats, 0, 1)        \
  X(mmap_calls, os, 0, 1)               \
  X(mmap_bytes, os, 0, 1)               \
  X(munmap_calls, os, 0, 1)             \
  X(munmap_bytes, os, 0, 1)             \
  X(madvise_calls, os, 0, 1)            \
  X(madvise_bytes, os, 0, 1)            \
  X(mremap_calls, os, 0, 1)             \
  X(mremap_bytes, os, 0, 1)             \
  X(populated_bytes, os, 0, 1)          \
  X(mbind_calls, os, 0, 1)              \
  X(bind_fallbacks, os, 0, 1)           \
  X(bind_failures, os, 0, 1)            \
  X(enomem, heap, 0, 1)                 \
  X(tcache_hits, heap, 0, 1)            \
  X(transfer_batches, stats, 0, 1)      \
  X(handoff_batches, stats, 0, 1)       \
  X(handoff_stale_bytes, heap, 0, 1)    \
  X(tcache_grows, heap, 0, 1)           \
  X(tcache_shrinks, heap, 0, 1)         \
  X(tcache_claimed_bytes, stats, 0, 1)  \
  X(tcache_asks, heap, 0, 1)            \
  X(tcache_give_backs, heap, 0, 1)      \
  X(tcache_idle_bytes, heap, 0, 1)      \
  X(split_allocs, heap, 0, 1)           \
  X(numa_enabled, stats, 0, 1)          \
  X(option_warnings, stats, 1, 1)

// NUMAP_WHEN(flag, code): code when flag is 1. NUMAP_COUNTED_BY(owner, counted_by, code): code
// when the row's counted_by is owner (heap or os).
#define NUMAP_WHEN(flag, code) NUMAP_WHEN_I(flag, code)
#define NUMAP_WHEN_I(flag, code) NUMAP_WHEN_##flag(code)
#define NUMAP_WHEN_1(code) code
#define NUMAP_WHEN_0(code)
#define NUMAP_COUNTED_BY(owner, counted_by, code) NUMAP_COUNTED_BY_##owner##_##counted_by(code)
#define NUMAP_COUNTED_BY_heap_heap(code) code
#define NUMAP_COUNTED_BY_heap_os(code)
#define NUMAP_COUNTED_BY_heap_stats(code)
#define NUMAP_COUNTED_BY_os_heap(code)
#define NUMAP_COUNTED_BY_os_os(code) code
#define NUMAP_COUNTED_BY_os_stats(code)

namespace numap {

// The totals the Heap counts itself (Heap::stats copies them).
struct HeapCounters {
#define NUMAP_HEAP_COUNTER(name, counted_by, exit_line, alloc_stats) \
  NUMAP_COUNTED_BY(heap, counted_by, std::atomic<std::uint64_t> name{0};)
  NUMAP_TOTALS(NUMAP_HEAP_COUNTER)
#undef NUMAP_HEAP_COUNTER
};

}  // namespace numap
