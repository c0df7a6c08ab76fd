// Layer 5, thread caches: per thread and small class, a singly linked list of free objects with an
// adaptive limit (issue 24, after tcmalloc's ThreadCache::FetchFromCentralCache / ListTooLong). A
// list starts at its base limit (NUMAP_TCACHE_BYTES / size, 4..512 objects); each miss refills
// half the limit from the Central in one locked step and raises the limit by half (at least a
// batch, half the base limit), up to 8192 objects and within the thread's NUMAP_TCACHE_BUDGET for
// all classes' growth together (a class that needs more takes batches back from other grown
// classes). An overflow returns half the limit, at most kOverflowMove objects per free where it
// takes a lock (a consumer's overflow to the handoff moves up to a batch without one); a grown
// list whose overflows have returned kMaxOverages halves of its limit gives a batch of its limit
// back, and what it then holds past the new limit goes back kOverflowMove at a time by the frees
// that follow. At the base limit this is the fixed policy.
// The growth of all threads together is bounded too (NUMAP_TCACHE_TOTAL, after gperftools'
// overall_thread_cache_size): a thread claims each growth from the heap's shared pool on its slow
// path (one atomic) and gives it back when its lists shrink or it exits; when the pool is short,
// it asks the threads holding more than it to give half back at their next slow path.
// Memory pressure (a purge, the free limit giving pages back) bumps the heap's epoch: each thread
// seeing it on its next slow path puts every list back to its base limit. malloc pops and free
// pushes with no lock and no atomic (the fast paths below do not know about growth). A free from another
// thread simply lands in the freeing thread's cache (objects migrate, as in tcmalloc), so cross-
// thread frees do not serialise. The cache lives in initial-exec TLS (no allocation to create it)
// and is returned to the Centrals by a pthread key destructor when the thread exits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocators/numap/os.h"
#include "allocators/numap/page_runs.h"
#include "allocators/numap/size_classes.h"

namespace numap {

class Heap;

struct CacheList {
  void* head;
  std::uint32_t count;
  std::uint32_t limit;  // the base limit, plus the batches it grew by
};

static_assert(kSmallClasses <= 64, "ThreadCache::slow_classes has a bit per small class");

// Halves of its limit a grown list's overflows return before it gives a batch of its limit back
// (tcmalloc's kMaxOverages, counted in objects since an overflow returns at most kOverflowMove).
constexpr std::uint32_t kMaxOverages = 3;
// The most objects one overflow moves under a lock (tcmalloc's bound on a batch to and from the
// central lists, kMaxObjectsToMove, is 32 for small classes): half a 64 B list's limit is 256, each into
// its slab once the transfer cache is full (a cache miss apiece in a shuffled release), which put
// free()'s p99.9 at 20 us (docs/benchmarks.md, "free()'s tail latency: the overflow's batch").
constexpr std::uint32_t kOverflowMove = 32;
// The most objects a small list may grow to (tcmalloc's kMaxDynamicFreeListLength).
constexpr std::uint32_t kMaxListLength = 8192;
// A thread whose growth the shared pool cannot cover asks the others for budget on the first such
// shortfall, then after kAskEvery more, twice as many after each further ask up to kAskMost, until
// a growth is covered in full again (each ask walks the registry of caches under its lock, and a
// holder that takes no slow path, or holds no more than the asking thread, never answers).
constexpr std::uint32_t kAskEvery = 16;
constexpr std::uint32_t kAskMost = 4096;

// Page classes 0 .. kPageCacheClasses-1 (4 KiB .. 4 MiB) have a per-thread cache too: a small
// stack of chunk pointers (not an intrusive list: a cached chunk may have no resident page to hold
// a link). Up to 256 KiB (classes below kLargeCachedClass) refills take a batch from the (node,
// class) Slot and overflows return half of one, each under one lock acquisition, and the charged
// bytes of a thread's cached chunks are bounded by NUMAP_PAGE_CACHE_BYTES. Above, a thread keeps
// at most one chunk per class, and only while all threads' cached large chunks of its node stay
// within NUMAP_LARGE_CACHE_BYTES (NodePart::large_cached): a bound per thread would grow with the
// thread count (64 pool threads each keeping a 4 MiB buffer hold 256 MiB); and only in a thread
// that has allocated that class twice itself (ThreadCache::large_again): a thread that only frees
// what another allocated (a flush thread freeing a writer's memtable blocks), or made one buffer of
// the class in its life (a pool thread), would keep a chunk nobody takes, which the free limit
// counts as free and gives other pages back for.
constexpr int kPageCacheClasses = 36;
constexpr int kLargeCachedClass = 20;  // 320 KiB
static_assert(kPageCacheClasses - kLargeCachedClass <= 32, "ThreadCache::large_taken/again have a bit per large class");
constexpr int kPageCacheDepth = 8;
// The largest request served by the page classes' inline fast paths (page_cache_pop, and
// page_cache_push through cache_push): the classes below kLargeCachedClass.
constexpr std::size_t kPageFastMax = page_class_size(kLargeCachedClass - 1);  // 256 KiB

struct PageCacheList {
  // Each chunk with its charged pages (its Slot's extent, fixed while cached) in the low bits: a
  // chunk is page-aligned and its extent below kPage pages. One word per entry: a push is one
  // store, and the fast paths keep fewer values live (no spill in the exported free). `word` is
  // the header and the entries as one array: word[count] is the top entry, and for an empty stack
  // the header, whose low bits (count 0) read as a chunk with no charged pages, so the inline pop's
  // coverage test rejects an empty stack too (no test of count of its own).
  union {
    struct {
      std::uint32_t count;
      std::uint32_t limit;  // 0: the class is not cached
      std::uintptr_t entry[kPageCacheDepth];
    };
    std::uintptr_t word[1 + kPageCacheDepth];
  };
  void* chunk(std::uint32_t i) const { return reinterpret_cast<void*>(entry[i] & ~std::uintptr_t{kPage - 1}); }
  std::uint32_t extent(std::uint32_t i) const { return static_cast<std::uint32_t>(entry[i] & (kPage - 1)); }
  void set(std::uint32_t i, void* p, std::uint32_t extent_pages) {
    entry[i] = reinterpret_cast<std::uintptr_t>(p) | extent_pages;
  }
};
static_assert(offsetof(PageCacheList, count) == 0 && offsetof(PageCacheList, entry) == sizeof(std::uintptr_t) &&
                  __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && kPageCacheDepth < kPage,
              "word[0] is the header, whose low bits are the count");
static_assert(page_class_size(kPageCacheClasses - 1) / kPage < kPage, "a cached chunk's extent fits below its page");

enum class CacheState : std::uint8_t { kNew = 0, kLive = 1, kDead = 2 };

struct ThreadCache {
  // The free fast path reads these three and `lists` only: a pointer whose offset from
  // `slab_base` is below `slab_span` is an object of the home node's slabs, its class is
  // `slab_class[offset / kSlabBytes]`. slab_span is 0 whenever the cache is not live (new, dead,
  // tcache off, another heap's), so one unsigned compare also rejects null, huge blocks, page
  // chunks, other nodes' objects and pointers of other allocators.
  std::uintptr_t slab_base;
  std::uint64_t slab_span;
  const std::uint8_t* slab_class;
  // Likewise for the page classes below kLargeCachedClass (page_cache_push): an offset from
  // `slab_base` at least `slab_span` and below `page_fast_span` is a home-node chunk of page class
  // (offset >> span_shift) - 1 (each class has one span of the arena, a power of two, and the
  // classes' spans follow the slabs'; 0 when not live). `page_room`: pages of
  // NUMAP_PAGE_CACHE_BYTES not held by cached chunks of those classes (their charged extents);
  // below 0 only inside Heap::page_push, which then gives chunks back.
  std::uint64_t page_fast_span;
  Slot* node_slots;  // the home node's Slots (slot s: page class s - 1; a chunk's free reads its extent there)
  std::int64_t page_room;
  std::uint8_t span_shift;
  // The page cache's guard (page_try_enter): page_lock, written by the owner only, is set while
  // the owner is inside a page-cache operation; page_flushing is set by a purger while it flushes
  // (or decides whether to flush) this cache. page_asym: the heap had membarrier when the cache was
  // made (Heap::asymmetric_page_guard). The two share `page_gate`, one aligned word the owner
  // compares with 1 (membarrier, no purger) in one instruction; the bytes between stay 0.
  std::uint32_t page_lock;  // __atomic builtins only (TLS must be trivially initialised)
  union {
    std::uint64_t page_gate;
    struct {
      std::uint8_t page_asym;
      std::uint8_t page_gate_zero_[3];
      std::uint32_t page_flushing;  // __atomic builtins only
    };
  };
  Heap* owner;
  CacheState state;
  std::int32_t node;             // partition the cache refills from
  std::uint32_t until_recheck;   // refills until the node is looked up again
  std::uint64_t hits;            // not yet added to the heap's counters
  // Idle and sparse lists (Heap::lists_return_idle): bit c of `slow_classes` and of
  // `held_classes` is set when class c misses or overflows; at a small-object slow path DECAY_MS
  // after the last look, the held classes that were not slow since then, or whose slabs are
  // mostly free, go back to their slabs and leave `held_classes`, and `slow_classes` is cleared.
  // (Only held classes are looked at: a Central this thread never used is not touched.)
  std::uint64_t slow_classes;
  std::uint64_t held_classes;
  // Bit c set when class c refilled since the last look (cleared there): a thread without it only
  // frees the class, what other threads allocated, and its overflows go to the handoff (Heap::
  // handoff_put, NUMAP_HANDOFF_BYTES); a thread with it reuses its own frees and keeps the old path.
  std::uint64_t took_classes;
  std::uint32_t idle_looked_at;  // tick of the last look
  CacheList lists[kSmallClasses];
  // The lists' growth (slow paths only): bytes of limit above the base limits, all classes
  // together (at most NUMAP_TCACHE_BUDGET), overflows of each grown list, where the next class to
  // take budget back from is, and the heap's pressure epoch this cache last saw.
  std::uint64_t grown_bytes;
  // What this thread holds of the heap's shared pool of growth (NUMAP_TCACHE_TOTAL, Heap::
  // tcache_pool_): equal to grown_bytes between slow paths (a growth claims first, a shrink gives
  // back after). The owner writes it, other threads read it (__atomic builtins) to choose whom to
  // ask for budget: `give_back` is their request, set under the registry lock (so never on an
  // exited thread's cache) and honoured by the owner at its next slow path (it gives half its claim
  // back); nobody but the owner touches the lists. `ask_skip`: shortfalls of the pool before this
  // thread asks the others again.
  std::uint64_t claimed_bytes;
  std::uint32_t give_back;
  std::uint32_t ask_skip;
  std::uint32_t ask_every;  // the shortfalls to skip after the next ask (kAskEvery .. kAskMost)
  std::uint32_t overages[kSmallClasses];  // objects a grown list's overflows returned (kMaxOverages)
  std::uint32_t steal_next;
  std::uint32_t epoch;
  // Bit c - kLargeCachedClass: this thread has allocated a chunk of large class c (large_taken),
  // and at least twice (large_again: only then does it cache what it frees of that class).
  std::uint32_t large_taken;
  std::uint32_t large_again;
  // The page cache is the one part another thread touches: purge() flushes every registered
  // thread's page cache unless its owner is inside a page-cache operation (page_lock above; the
  // purger never waits for a busy thread).
  ThreadCache* reg_prev;         // the heap's registry of live caches
  ThreadCache* reg_next;
  PageCacheList pages[kPageCacheClasses];
};
static_assert(offsetof(ThreadCache, page_gate) % 8 == 0 && offsetof(ThreadCache, page_asym) == offsetof(ThreadCache, page_gate) &&
                  offsetof(ThreadCache, page_flushing) == offsetof(ThreadCache, page_gate) + 4,
              "page_gate is page_asym in its low byte and page_flushing in its high half (little-endian, above)");

// The calling thread's cache (zero-initialised, initial-exec TLS: one %fs-relative address).
extern __thread ThreadCache tls_cache __attribute__((tls_model("initial-exec")));
inline ThreadCache* thread_cache_tls() { return &tls_cache; }

// The owner's side of the page cache's guard against a purging thread, one try: true when the
// owner may touch its page cache, until page_unlock_own; false while a purger flushes it
// (Heap::page_enter waits). The owner stores page_lock, then reads page_flushing; a purger stores
// page_flushing, then reads page_lock, and flushes only when it finds it 0 (Dekker's pattern: each
// side's store must be visible to the other's later load, or both could go on). With membarrier
// (page_asym) the owner's side is a plain store and load: the purger's membarrier() makes every
// running thread pass a full barrier between its two steps. Without it each side's store is a
// sequentially consistent exchange and its load sequentially consistent (the owner's in
// page_enter_fenced, the purger's in Heap::flush_all_page_caches). The common case is
// one store and one compare of page_gate with 1 (membarrier, no purger): on x86 a compare against
// memory, which GCC never makes of an atomic load (ThreadSanitizer builds keep the atomic load it
// sees). The guard is 4 of a 64 KiB malloc's 36 instructions and of a free's 44 under callgrind
// (2026-12-07; docs/benchmarks.md, "Where a page-class pair's instructions go").
__attribute__((always_inline)) inline bool page_gate_open(ThreadCache* tc) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  bool open;
  asm volatile("cmpq $1, %1" : "=@ccz"(open) : "m"(tc->page_gate) : "memory");
  return open;
#else
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return __atomic_load_n(&tc->page_gate, __ATOMIC_ACQUIRE) == 1;
#endif
}

// page_try_enter's other cases: no membarrier, or a purger at work (inline too: a call here would
// make the exported free save registers on its small-object path).
__attribute__((always_inline)) inline bool page_enter_fenced(ThreadCache* tc) {
  if (!tc->page_asym) {
    // The store again as a sequentially consistent exchange (a locked instruction: a full barrier,
    // and unlike a fence one that ThreadSanitizer models), then the load.
    __atomic_exchange_n(&tc->page_lock, 1u, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&tc->page_flushing, __ATOMIC_SEQ_CST) == 0) return true;
  }
  __atomic_store_n(&tc->page_lock, 0u, __ATOMIC_RELEASE);
  return false;
}

__attribute__((always_inline)) inline bool page_try_enter(ThreadCache* tc) {
  __atomic_store_n(&tc->page_lock, 1u, __ATOMIC_RELAXED);
  if (__builtin_expect(page_gate_open(tc), 1)) return true;
  return page_enter_fenced(tc);
}
inline void page_unlock_own(ThreadCache* tc) { __atomic_store_n(&tc->page_lock, 0u, __ATOMIC_RELEASE); }

// The fast paths, inline in every caller (the exported malloc/free, Heap::malloc/free): no lock,
// no atomic read-modify-write and no fence (but the guard's where membarrier is refused), no
// call. False/null sends the caller to the slow path, which sets the cache up, refills or flushes it.

// A page chunk of the home node below kLargeCachedClass (`off` from slab_base, past the slabs):
// onto its class's stack with its charged pages, read from its Slot (a chunk may have fewer than
// its class's pages, and none resident), when the stack and NUMAP_PAGE_CACHE_BYTES have room.
__attribute__((always_inline)) inline bool page_cache_push(ThreadCache* tc, void* p, std::uintptr_t off) {
  if (__builtin_expect(off >= tc->page_fast_span, 0)) return false;
  const std::uintptr_t slot = off >> tc->span_shift;  // page class slot - 1
  Slot& sl = tc->node_slots[slot];
  const std::uint32_t ext = sl.extent(sl.index_of(p));  // the freeing thread holds the chunk
  PageCacheList& l = tc->pages[slot - 1];
  if (__builtin_expect(!page_try_enter(tc), 0)) return false;
  const std::uint32_t n = l.count;
  const bool room = n < l.limit && std::int64_t{ext} <= tc->page_room;
  if (__builtin_expect(room, 1)) {
    l.set(n, p, ext);
    l.count = n + 1;
    tc->page_room -= ext;
  }
  page_unlock_own(tc);
  return room;
}

// A request of kSmallMax < n <= kPageFastMax: the top of its class's stack when its charged pages
// cover n (the slow path looks further down, or charges more).
__attribute__((always_inline)) inline void* page_cache_pop(ThreadCache* tc, std::size_t n) {
  const std::size_t pages_less_one = (n - 1) / kPage;  // the class table's index, too
  PageCacheList& l = tc->pages[kPageLookup.cls[pages_less_one]];
  if (__builtin_expect(!page_try_enter(tc), 0)) return nullptr;
  void* p = nullptr;
  const std::uint32_t c = l.count;
  const std::uintptr_t top = l.word[c];  // the header when empty: no charged pages
  const std::uint32_t ext = static_cast<std::uint32_t>(top & (kPage - 1));
  if (__builtin_expect(ext > pages_less_one, 1)) {  // covers n
    p = reinterpret_cast<void*>(top - ext);
    if (p == nullptr) __builtin_unreachable();  // (the caller's test of the result folds away)
    l.count = c - 1;
    tc->page_room += ext;
    ++tc->hits;
  }
  page_unlock_own(tc);
  return p;
}

__attribute__((always_inline)) inline bool cache_push(ThreadCache* tc, void* p) {
  const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(p) - tc->slab_base;
  if (__builtin_expect(off >= tc->slab_span, 0)) return page_cache_push(tc, p, off);
  CacheList& l = tc->lists[tc->slab_class[off / kSlabBytes]];
  if (__builtin_expect(l.count >= l.limit, 0)) return false;
  *static_cast<void**>(p) = l.head;
  l.head = p;
  ++l.count;
  return true;
}

inline void* cache_pop(ThreadCache* tc, int cls) {
  CacheList& l = tc->lists[cls];
  void* p = l.head;
  if (__builtin_expect(p != nullptr, 1)) {
    void* next = *static_cast<void**>(p);
    l.head = next;
    --l.count;
    ++tc->hits;
    // The next pop's block: its link is the load the next malloc waits on (a batch of 256 B
    // blocks took 4.3-4.8 ns a pair without it, 3.5-3.8 with it; docs/benchmarks.md).
    if (next != nullptr) __builtin_prefetch(next, 0, 3);
  }
  return p;
}

}  // namespace numap
