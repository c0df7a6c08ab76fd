// Layer 6, the heap: ties the layers together. One Heap owns an arena reserved up front
// (MAP_NORESERVE) of `parts` node partitions x (1 slab Slot + page-class Slots) x class_span, so
// the node and class of any pointer are address arithmetic. It decides the node of each
// allocation (the calling CPU's, with the seed-001 fallback order when that node is full), charges
// and enforces the RSS capacity (purging free pages, largest classes first, before failing with
// ENOMEM) and counts everything numap_stats reports. Tests build Heaps with their own Options,
// Topology and Os; the preloaded library builds one from the environment. It composes components
// that own their state (NodeBudget, FreeLimit, HugeAllocations, DecayThread, CacheRegistry, each in its own header); its
// other member functions are defined one concern per source (heap.cpp: layout, API, fork;
// heap_chunks, heap_huge, heap_small, heap_page_cache, heap_reclaim, heap_stats .cpp).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allocators/numap/cache_registry.h"
#include "allocators/numap/counters.h"
#include "allocators/numap/decay_thread.h"
#include "allocators/numap/free_limit.h"
#include "allocators/numap/include/numap.h"
#include "allocators/numap/huge.h"
#include "allocators/numap/node_budget.h"
#include "allocators/numap/options.h"
#include "allocators/numap/os.h"
#include "allocators/numap/pacer.h"
#include "allocators/numap/page_runs.h"
#include "allocators/numap/size_classes.h"
#include "allocators/numap/slabs.h"
#include "allocators/numap/thread_cache.h"
#include "allocators/numap/topology.h"

namespace numap {

constexpr int kSlabSlot = 0;  // slot index of the slabs; page class c is slot c + 1
constexpr std::uint64_t kMoveMinPages = 16;  // Heap::move_in: smaller needs and pieces fault their pages in
// Heap::move_in looks at the free runs of at most this many source Slots, this many runs of each.
constexpr int kMoveSources = 4;
constexpr int kMoveRuns = 8;
constexpr int kBorrowClasses = 4;  // a page class may borrow a free resident chunk up to a doubling above
// NUMAP_POPULATE=auto (and all): a small class's new slabs are populated once it holds this many bytes of
// slabs on the node. Below it a class may be one object in a program that allocates little (a
// first malloc(64) touches one page of its slab, target 3); above it the slab is carved within
// moments, and what is populated ahead of use is at most the newest slab (1/16 of the class's).
constexpr std::uint64_t kPopulateAfter = 1ull << 20;
// ... and with auto, classes of objects up to a page (all: every class): every page of such a slab
// holds the start of an object, so a program that writes the first byte of each object it takes
// writes every page of the slab. A larger object's later pages are written only if the program
// writes that far (a 16 KiB object with its first 256 bytes written leaves three of its four pages
// unwritten, and populating them made resident what the program never writes, issue 41): such a
// class is populated only where its last probe slab was written through (Heap::slab_populate).
constexpr std::uint32_t kPopulateObjectMax = 4096;

// What one allocation slow path gives back of the free limit's queued checks where no background
// thread takes them (NUMAP_DECAY_THREAD=0, a forked child): about this much a node (the runs stop
// at the first chunk that reaches it), one madvise per run in it: 32 for scattered 64 KiB slabs.
constexpr std::uint64_t kDeferredStep = 2ull << 20;
// A purge (the free limit's, decay's, purge()'s) advises at most this many runs per batch, and
// gives freed large chunks that came due back between batches (Heap::purge_pages).
constexpr int kPurgeBatchRuns = 32;

// Chunks this large are advised away when freed (under the free limit): glibc's largest mmap
// threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit), above which it unmaps every freed block.
constexpr std::uint64_t kGiveBackAtOnce = 32ull << 20;

// Page-aligned, so that each node's part of the metadata can be bound to that node. Never
// constructed as a whole: the metadata reservation's fresh pages are zero, which is what every
// member but `charge` and `free_limit` (constructed by Heap::init) starts as (heap_test checks it),
// and constructing it would write all of its nine pages on every node at start. Its Slots are
// initialised on first use (Heap::ready_slot).
struct alignas(4096) NodePart {
  Slot slots[1 + kMaxPageClasses];
  Central central[kSmallClasses];
  SlabMeta* slab_meta = nullptr;
  // Each slab's class, one byte per slab: what the free fast path reads (dense, and apart from the
  // SlabMeta lines that other threads write under the Central lock).
  std::uint8_t* slab_class = nullptr;
  NodeCharge charge;  // this node's share of the budget (node_budget.h)
  std::atomic<std::uint64_t> huge_bytes{0};
  std::atomic<std::uint32_t> exchange_after{0};  // tick before which exchange() does not scan again
  FreeLimit free_limit;  // this node's (free_limit.h)
  // Charged bytes of this node's chunks above 256 KiB in thread caches (bounded by
  // NUMAP_LARGE_CACHE_BYTES; free pages as far as the free limit is concerned). Its own line: every
  // thread's large-chunk cache hit writes it.
  alignas(64) std::atomic<std::uint64_t> large_cached{0};
  // Resident bytes of this node's freed chunks whose give-back is queued (Heap::queue_give_back):
  // neither in use nor in a Slot, so the free limit would otherwise count them as in use and
  // allow that much more of the small classes' free pages to stay after the release.
  std::atomic<std::uint64_t> give_back_queued{0};
  // Bit c set once class c's handoff was first pushed to: what a decay pass looks at (the other
  // classes' Centrals stay untouched, their pages unwritten).
  std::atomic<std::uint64_t> handoff_classes{0};
};

class Heap {
 public:
  // Reserves the arena and metadata at options.class_span, else (an address-space limit, ulimit -v,
  // or vm.overcommit_memory=2) at the largest smaller span that fits, with one warning
  // (option_fallback: options().class_span and option_warnings say so); false (errno set) when
  // even NUMAP_CLASS_SPAN's smallest value does not fit.
  bool init(const Options& options, const Topology& topology, Os* os);
  // Unmaps everything (tests only; every pointer becomes invalid).
  void destroy();

  // The thread-cache hit is inline (a class lookup and a list pop or push; page classes up to
  // 256 KiB a stack pop or push); everything else is the out-of-line slow path.
  void* malloc(std::size_t n) {
    if (__builtin_expect(n <= kSmallMax, 1)) return small_alloc(small_class(n));
    if (__builtin_expect(n <= kPageFastMax, 1)) {
      if (void* p = page_hit(n)) return p;
      return page_malloc_uncached(n);
    }
    return page_malloc(n);
  }
  void free(void* p) {
    if (!cache_push(thread_cache_tls(), p)) free_slow(p);
  }
  void free_slow(void* p);
  void* calloc(std::size_t count, std::size_t size);
  void* realloc(void* p, std::size_t n);
  // align: a power of two. Null with errno ENOMEM on failure.
  void* memalign(std::size_t align, std::size_t n);
  std::size_t usable_size(const void* p);
  // True when p was allocated by this heap (arena or huge table).
  bool owns(const void* p);
  bool in_arena(const void* p) const {
    return static_cast<const char*>(p) >= arena_ && static_cast<const char*>(p) < arena_ + arena_bytes_;
  }

  // Capacity pressure, numap_purge: every thread's cached page chunks, then free mapped pages of
  // any age, largest classes first, until want_bytes (0: all). Returns the bytes advised away.
  std::size_t purge(std::uint64_t want_bytes = 0, int part = -1);
  // malloc_trim: the calling thread's cached small objects too, then purge().
  std::size_t trim();
  // Advises away free pages idle longer than the decay time, at most once per quarter of it
  // (the allocation slow path and the background thread call this).
  void maybe_decay();
  std::size_t stats(struct numap_stats* out, numap_class_stats* classes, std::size_t max_classes);

  void fork_prepare();
  void fork_parent();
  void fork_child();

  // Returns the thread cache's objects to the Centrals (thread exit, or a cache changing heaps).
  void flush_cache(ThreadCache* tc);
  // Starts the background decay thread when it has work (note_given_back) and is wanted; the
  // caller holds no numap lock (a thread's exit calls it once its cache is gone).
  void start_decay_thread() {
    if (__builtin_expect(decay_start_due_.load(std::memory_order_relaxed), 0)) launch_decay_thread();
  }

  const Options& options() const { return opt_; }
  const Topology& topology() const { return topo_; }
  // The heap's own copy, for a caller to detect the topology into before init(options,
  // *own_topology(), os): the preloaded library does, so the process holds one Topology (7 KiB)
  // rather than a copy of it too (start-up footprint, issue 24's target 3).
  Topology* own_topology() { return &topo_; }
  bool numa() const { return numa_; }
  // True when the page caches' owners take no atomic read-modify-write (membarrier available).
  bool asymmetric_page_guard() const { return asym_guard_; }
  int parts() const { return nparts_; }
  int page_classes() const { return npage_; }
  std::size_t max_class() const { return page_class_size(npage_ - 1); }
  std::uint64_t mapped_bytes() const { return budget_.mapped(); }
  int node_for_cpu(int cpu) const { return budget_.node_for_cpu(cpu); }
  std::uint64_t headroom(int part) const { return budget_.headroom(part); }
  // The metadata reservation (tests check its advice and binding).
  const char* metadata() const { return meta_; }
  std::uint64_t metadata_bytes() const { return meta_bytes_; }
  void refresh_capacity(bool force) {
    if (budget_.follows_kernel()) budget_.refresh(tick(), force);
  }
  // Partition that holds p, or -1.
  int node_of(const void* p) const;

 private:
  struct Where {
    int part;
    int slot;
    std::uint64_t index;
  };

  // ---- layout, locating, the API (heap.cpp) ----
  bool init_at(const Options& options, const Topology& topology, Os* os);  // init at options.class_span
  Where locate(const void* p) const;
  // The arena's span a pointer falls in (node x slots + slot), and its node (a shift, and a
  // division only with several nodes).
  int global_slot(const void* p) const {
    return static_cast<int>(static_cast<std::uint64_t>(static_cast<const char*>(p) - arena_) >> span_shift_);
  }
  int part_of_chunk(const void* p) const { return nparts_ == 1 ? 0 : global_slot(p) / nslots_; }
  void* small_alloc(int cls) {
    ThreadCache* tc = thread_cache_tls();
    if (__builtin_expect(tc->owner == this, 1))
      if (void* p = cache_pop(tc, cls)) return p;
    return small_alloc_slow(cls);
  }
  // Above kSmallMax: page classes, then huge mappings.
  void* page_malloc(std::size_t n);
  // kSmallMax < n <= kPageFastMax: the thread's page cache when its top chunk covers n.
  void* page_hit(std::size_t n) {
    ThreadCache* tc = thread_cache_tls();
    return __builtin_expect(tc->owner == this, 1) ? page_cache_pop(tc, n) : nullptr;
  }
  // The paths behind the thread caches' hits (out of line: their frames cost the hits nothing).
  __attribute__((noinline)) void* page_malloc_uncached(std::size_t n);
  __attribute__((noinline)) void free_uncached(void* p);
  void free_central(void* p);  // free_uncached's work, before the decay thread's start check

  BindResult bind_part(void* p, std::uint64_t bytes, int part) {
    return os_->bind(p, static_cast<std::size_t>(bytes), topo_.os_node[part], allowed_os_);
  }
  // Slot `slot` of `part` by address arithmetic (valid before the Slot is initialised).
  char* slot_base(int part, int slot) const {
    return arena_ + (static_cast<std::uint64_t>(part) * static_cast<std::uint64_t>(nslots_) +
                     static_cast<std::uint64_t>(slot)) * span_;
  }
  static std::uint64_t slot_chunk(int slot) { return slot == kSlabSlot ? kSlabBytes : page_class_size(slot - 1); }
  // Huge pages asked for (NUMAP_THP, or NUMAP_THP_EVERY_CLASS, which implies it).
  bool thp() const { return opt_.thp || opt_.thp_every_class; }
  std::uint32_t slot_grain(int slot) const {
    return thp() && slot_chunk(slot) % (std::uint64_t{2} << 20) == 0 ? (2u << 20) / kPage : 1;
  }
  // The Slot, initialised if this is its first use: a class or node never used touches no page of
  // its metadata (the pages were bound to their node at init, so they fault in there).
  Slot& ready_slot(int part, int slot) {
    Slot& sl = part_[part].slots[slot];
    if (__builtin_expect(!sl.ready(), 0)) init_slot(part, slot);
    return sl;
  }
  __attribute__((noinline)) void init_slot(int part, int slot);
  // The locks fork_prepare takes (and fork_parent/child release): those of the initialised Slots
  // and of the Centrals of nodes whose slab Slot is (no other is ever taken), then the huge table's.
  void for_each_used_lock(void (*fn)(Lock&));

  // ---- chunk store (heap_chunks.cpp) ----
  // Takes a chunk of slot `slot` on `node` or a fallback node with at least `bytes` charged;
  // *old_bytes: what was already resident (dirty) in it. Null (errno ENOMEM) when nothing fits.
  // borrow: when the slot has no free mapped chunk, a free mapped chunk of one of the next
  // kBorrowClasses (larger) classes may serve instead of touching fresh pages (not for alignments
  // above a page: only the slot's own chunks are aligned to its power-of-two size).
  void* chunk_alloc(int node, int slot, std::uint64_t bytes, std::uint64_t* old_bytes, int* out_part,
                    bool borrow = false);
  void chunk_free(int part, int slot, std::uint64_t index);
  // A freed chunk of kGiveBackAtOnce or more under the free limit: glibc unmaps blocks that large,
  // and a hash table's old array, freed before its doubled successor (another class) is built,
  // would otherwise stay resident beside it within the allowance. free() only queues its give-back
  // (Frees never wait for the kernel): the chunk stays out of its Slot's free chunks, so nothing
  // reuses it while queued, until the next fresh charge (chunk_alloc, grow_extent: the successor's
  // malloc pays the madvise, before its own pages are charged, so the peak is as before), the
  // background thread PURGE_DELAY_MS later, a slow path where there is no thread, or a purge
  // advises it away and gives it to the Slot. The queue is the heap's, not a thread's: a thread's
  // exit leaves it to those; a forked child keeps it (its slow paths apply it). False when the
  // queue is full (the caller gives the chunk back at once).
  bool queue_give_back(int part, int slot, std::uint64_t index);
  // The queued give-backs applied (delayed: only those queued PURGE_DELAY_MS ago); bytes advised away.
  std::uint64_t apply_give_backs(bool delayed);
  // Chunk `index` advised away (its charge returned) and given to its Slot; bytes advised away
  // (0 where the advice failed: the chunk is then free and resident, as any other).
  std::uint64_t release_chunk(int part, int slot, std::uint64_t index);
  bool give_backs_queued() const { return give_backs_queued_.load(std::memory_order_relaxed); }
  // Charges chunk `index` up to `bytes`; *dirty (when given): its bytes that may hold old data after
  // (pages moved in from another class are not zero, as fresh ones are).
  bool grow_extent(int part, int slot, std::uint64_t index, std::uint64_t bytes, std::uint64_t* dirty = nullptr);
  // Chunk `index` of (part, slot) was just charged from `have` to `need` pages (chunk_alloc,
  // grow_extent): the Slot's mapped share, a refault of what the free limit took from the Slot, the
  // exchange of as many idle bytes of other classes, and the pages themselves populated: all of them
  // with NUMAP_POPULATE=all, with auto as many as the free limit gave back lately (FreeLimit::take_recent).
  void charged_fresh(int part, int slot, std::uint64_t index, std::uint64_t have, std::uint64_t need);
  // Makes fresh charged pages [p, p + bytes) resident in one call (NUMAP_POPULATE) instead of a
  // fault per page when the program touches them. A kernel that refuses the advice (before 5.14, a
  // sandbox) turns it off for the process; other failures (no memory now) leave the pages to fault.
  void populate(char* p, std::uint64_t bytes);
  // Chunk `index` of (part, slot) has `have` pages and needs `need`: moves the resident pages of
  // other classes' free chunks (runs of the Slots with the most free resident bytes, idle ones
  // first) into its pages from `have` on, one mremap per run instead of a page fault and a zeroed
  // page each, until the need is covered or no run of kMoveMinPages is left. Returns the pages
  // moved (charged on the node already: only the Slots' shares change). NUMAP_MOVE_PIECES bounds
  // the moved pieces at once (each a mapping of its own until discard_run).
  std::uint64_t move_in(int part, int slot, std::uint64_t index, std::uint64_t have, std::uint64_t need);
  // move_in's work on n runs that purge_begin marked in `src`: each run's clean tail, as much as
  // the chunk still needs, moves into chunk `index` of `dst` from page `have` on (one mremap and
  // one piece each); every run is then free again with what stayed. Returns the pages moved.
  std::uint64_t move_runs(Slot& src, const PurgeRun* runs, int n, Slot& dst, std::uint64_t index, std::uint64_t have,
                          std::uint64_t need);
  // Room for one more moved piece under NUMAP_MOVE_PIECES (false at the bound).
  bool take_piece() {
    if (moved_pieces_.fetch_add(1, std::memory_order_relaxed) < opt_.move_pieces) return true;
    moved_pieces_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  // Discards a purge run's resident pages: MADV_DONTNEED, or where moved pages lie in it a fresh
  // mapping over it, with the arena's advice and binding, so their mappings merge back into the arena.
  bool discard_run(int part, Slot& sl, std::uint64_t first, std::uint64_t count, std::uint64_t bytes);
  // A fresh mapping over [p, p + bytes) of part's arena with the arena's advice and binding (init),
  // so that it merges with its neighbours where the kernel merges them; false when mmap refuses it.
  bool remap_fresh(int part, char* p, std::uint64_t bytes);

  // ---- huge allocations (heap_huge.cpp) ----
  void* huge_alloc(std::size_t n, std::size_t align);
  // A page-class request that no single node can hold goes across nodes as a huge mapping.
  void* page_or_split(int cls, std::size_t n, std::uint64_t* old_bytes, bool borrow, std::size_t align);
  void huge_free(void* p);

  // ---- small objects, their thread and transfer caches (heap_small.cpp) ----
  void* small_alloc_slow(int cls);
  ThreadCache* cache();
  // The calling thread's cache when it is this heap's (inline), else cache().
  ThreadCache* live_cache() {
    ThreadCache* tc = thread_cache_tls();
    return __builtin_expect(tc->owner == this, 1) ? tc : cache();
  }
  void small_free(NodePart& part, SlabMeta* s, void* p);
  void* refill(ThreadCache* tc, int cls);
  void flush_list(CacheList* list, std::uint32_t n);
  // The first n objects of the thread's list of class cls go back: to the transfer cache of node
  // `part` as one batch when it takes them, else into their slabs.
  // (A class the thread only frees goes to the handoff first, without a lock: NUMAP_HANDOFF_BYTES.)
  void list_release(ThreadCache* tc, int cls, int part, std::uint32_t n) {
    CacheList* list = &tc->lists[cls];
    n -= handoff_put(tc, cls, part, n);
    if (n != 0 && !transfer_put(list, cls, part, n)) flush_list(list, n);
  }
  // A whole list out at its thread's exit (NUMAP_EXIT_TRANSFER): parked in node `part`'s transfer
  // cache in refill-sized batches while it has room, for the next thread's refills to take whole
  // (a server's threads replaced, each taking over objects its predecessor freed), the rest into
  // the slabs. The objects stay off their slabs until taken or a purge drains them.
  void park_list(ThreadCache* tc, int cls, int part);
  // ---- adaptive list limits (thread_cache.h; heap_small.cpp) ----
  // A list's batch, half its base limit: the least a list grows by, what it shrinks by.
  std::uint32_t list_batch(int cls) const { return base_limit_[cls] / 2 > 0 ? base_limit_[cls] / 2 : 1; }
  // A miss of class cls (its refill took half the limit): the limit grows by half (at least a
  // batch) while the class is below its cap and the thread's budget has room, taking a batch back
  // from other grown classes when it has not. The growth is claimed from the heap's pool
  // (NUMAP_TCACHE_TOTAL); when the pool is short, the thread's other grown classes give batches
  // back first, then it asks other threads (ask_give_back) and grows by what it has.
  void list_grow(ThreadCache* tc, int cls);
  // Takes up to `want` bytes from the shared pool (one compare-exchange); what it got.
  std::uint64_t pool_claim(std::uint64_t want) {
    std::uint64_t have = tcache_pool_.load(std::memory_order_relaxed);
    std::uint64_t take;
    do {
      take = have < want ? have : want;
      if (take == 0) return 0;
    } while (!tcache_pool_.compare_exchange_weak(have, have - take, std::memory_order_relaxed));
    return take;
  }
  // The cache's claim back down to what its lists have grown by (after a shrink): the rest goes
  // back to the pool.
  void settle_claim(ThreadCache* tc) {
    if (tc->claimed_bytes > tc->grown_bytes) {
      tcache_pool_.fetch_add(tc->claimed_bytes - tc->grown_bytes, std::memory_order_relaxed);
      __atomic_store_n(&tc->claimed_bytes, tc->grown_bytes, __ATOMIC_RELAXED);
    }
  }
  // The pool could not cover a growth: ask every other thread that holds more of it than this one
  // to give half of its claim back at its next slow path (ThreadCache::give_back), at most once per
  // kAskEvery shortfalls of this thread (it walks the registry under its lock).
  void ask_give_back(ThreadCache* tc);
  // Lowers the grown classes' limits, round robin, until `bytes` of growth are released (or none is
  // left), then settles the claim.
  void lists_release_growth(ThreadCache* tc, std::uint64_t bytes);
  // The free of an object of class cls on node `part` found its list full (or over its limit):
  // half the limit goes back, at most kOverflowMove objects; a grown list that keeps overflowing
  // gives a batch of its limit back.
  void list_overflow(ThreadCache* tc, int cls, int part);
  // Lowers class cls's limit by up to `batches` batches (not below its base), returning what the
  // list holds beyond the new limit unless `release` is false (an overflow: later frees return it).
  void list_shrink(ThreadCache* tc, int cls, std::uint32_t batches, bool release = true);
  // Every list back to its base limit when the heap's pressure epoch moved since the cache last
  // looked (slow paths only; the owner's own lists: no other thread touches them).
  // Also honours another thread's request for budget (ThreadCache::give_back), and looks at the
  // idle and sparse lists once DECAY_MS has passed (lists_return_idle).
  void lists_check_pressure(ThreadCache* tc) {
    if (__builtin_expect(tick() - tc->idle_looked_at >= idle_look_ms_, 0)) lists_return_idle(tc);
    const std::uint32_t e = tcache_epoch_.load(std::memory_order_relaxed);
    if (__builtin_expect(tc->epoch != e, 0)) {
      tc->epoch = e;
      for (int c = 0; c < kSmallClasses; ++c) list_shrink(tc, c, kMaxListLength);
      settle_claim(tc);
    }
    if (__builtin_expect(__atomic_load_n(&tc->give_back, __ATOMIC_RELAXED) != 0, 0)) {
      __atomic_store_n(&tc->give_back, 0u, __ATOMIC_RELAXED);
      if (tc->grown_bytes != 0) {
        counters_.tcache_give_backs.fetch_add(1, std::memory_order_relaxed);
        lists_release_growth(tc, (tc->grown_bytes + 1) / 2);
      }
    }
  }
  // Once DECAY_MS has passed since the last look (a coarse clock read per small-object slow path):
  // the list of a class that neither missed nor overflowed since then, or whose slabs are sparse
  // (kSparseSlack), goes back to its slabs with the batches parked on the thread's node, and its
  // limit to its base. Otherwise a thread keeps objects of a class it has moved on from, each
  // pinning its 64 KiB slab: insert_phases' set nodes, 1,500 cached objects of 64 B, held 15 MiB
  // of slabs from l.x to its end.
  void lists_return_idle(ThreadCache* tc);
  // A miss or an overflow of class cls: the class is in use and held (the idle look's bits).
  static void note_slow(ThreadCache* tc, int cls) {
    tc->slow_classes |= std::uint64_t{1} << cls;
    tc->held_classes |= std::uint64_t{1} << cls;
  }
  // A class's slabs are sparse when their free objects are more than half of them and at least
  // this much: objects that live on or sit in caches then pin mostly empty slabs.
  static constexpr std::uint64_t kSparseSlack = 1 << 20;
  // Memory pressure (a purge, the free limit giving pages back): every thread's grown lists go
  // back to their base limits at its next slow path.
  void tcache_pressure() {
    if (lists_adapt_) tcache_epoch_.fetch_add(1, std::memory_order_relaxed);
  }
  // An overflow of the thread's list of class cls: its first n objects go to the transfer cache
  // of their node as one batch when they all live on node `part` and it has room; false (nothing
  // changed) otherwise.
  bool transfer_put(CacheList* list, int cls, int part, std::uint32_t n);
  // The first n objects of the thread's list of class cls handed to node `part`'s handoff (no lock)
  // as batches of at most list_batch objects, one compare-exchange, when the thread has not refilled
  // the class since its last look (it frees what others allocate): returns how many went (0 when
  // the handoff is off, full, the thread allocates the class itself, or an object lives on another
  // node; a 16 B class's last one or two objects may stay).
  std::uint32_t handoff_put(ThreadCache* tc, int cls, int part, std::uint32_t n);
  // The handoffs no refill took from for NUMAP_HANDOFF_MS (0: a decay pass period) go back into
  // their slabs (decay and background passes); true when some still hold younger batches.
  bool drain_stale_handoffs();
  // One (node, class)'s handoff back into its slabs; returns how many objects.
  std::uint64_t drain_handoff(int part, int cls);
  // Every transfer cache's batches back into their slabs (purge, trim), so empty slabs can go.
  void drain_transfers();
  // One (node, class)'s parked batches (transfer cache and, unless `handoff` is false, handoff)
  // back into their slabs; returns their bytes.
  std::uint64_t drain_transfer(int part, int cls, bool handoff = true);
  void recheck_node(ThreadCache* tc);
  // Points the fast paths' ranges (slab_base/span, page_fast_span) at the cache's node, tc->node.
  void set_home(ThreadCache* tc);
  void release_slab(int part, SlabMeta* s);
  // Whether class c's new slab (`old` bytes of it resident already) is populated: under
  // NUMAP_POPULATE=auto once the class holds kPopulateAfter of slabs, and for objects above a page
  // only where the program writes them through, as the class's last probe slab said (WriteProbe).
  bool slab_populate(Central& c, char* slab, std::uint64_t old, std::uint32_t size);

  // ---- page-class thread cache (heap_page_cache.cpp; the owner's guard: heap_internal.h) ----
  // Page classes: the thread cache in front of the Slots (classes < kPageCacheClasses).
  void* page_alloc(int cls, std::size_t n, std::uint64_t* old_bytes, bool borrow);
  // False (nothing cached) when a chunk above 256 KiB finds its class's place taken or the
  // large-chunk bound reached: the caller gives it back to its Slot.
  bool page_push(ThreadCache* tc, int cls, void* p, std::uint32_t extent_pages);
  // The bound on cached chunks above 256 KiB of node `part`, all threads together: take room for
  // `bytes` (false when there is none) and give it back when such a chunk leaves a cache.
  bool large_cache_take(int part, std::uint64_t bytes);
  void large_cache_give(int part, std::uint64_t bytes) {
    part_[part].large_cached.fetch_sub(bytes, std::memory_order_relaxed);
  }
  void page_refill(ThreadCache* tc, int cls);
  // limit: apply the free limit to what goes back (not while the registry lock is held: a purge
  // flushing every cache advises away what it needs itself, and the other threads would wait).
  void page_flush(ThreadCache* tc, int cls, std::uint32_t keep, bool limit = true);
  void flush_pages(ThreadCache* tc);
  void flush_all_page_caches();
  // The owner's side of a page-cache operation (ThreadCache::page_lock).
  void page_enter(ThreadCache* tc) const;

  // ---- reclaim: purge, decay, exchange, free limit (heap_reclaim.cpp) ----
  void on_slow_path() {
    refresh_capacity(false);
    start_decay_thread();
    if (opt_.decay_ms > 0) maybe_decay();
    // Free-limit checks that free() queued, where no background thread takes them (one load).
    if (__builtin_expect(limit_queued_.load(std::memory_order_relaxed), 0) && !decay_thread_.running())
      limit_deferred(kDeferredStep, true);
    if (__builtin_expect(give_backs_queued(), 0) && !decay_thread_.running()) apply_give_backs(true);
  }
  // The background thread has work once a resident chunk is free in a Slot (decay ages nothing
  // else): note_given_back() marks that, start_decay_thread() starts the thread then, from the
  // places that hold no lock (the allocation slow path, the end of a slow free, a purge, a thread's
  // exit; starting a thread allocates). A program that never gives a page back has no extra thread.
  void note_given_back() {
    if (__builtin_expect(!given_back_.load(std::memory_order_relaxed), 0)) {
      given_back_.store(true, std::memory_order_relaxed);
      if (opt_.decay_thread && (opt_.decay_ms > 0 || limit_deferred_on()))
        decay_start_due_.store(true, std::memory_order_relaxed);
    }
  }
  __attribute__((noinline)) void launch_decay_thread() {
    decay_start_due_.store(false, std::memory_order_relaxed);
    // With decay off the thread only answers the free limit's requests (its period is then idle).
    decay_thread_.start(background_pass, this, opt_.decay_ms > 0 ? decay_period_ : 1000, opt_.purge_delay_ms);
  }
  // The thread's pass: the free limit's queued checks, then decay by age.
  static void background_pass(void* heap);
  // Milliseconds since init, wrapping at 2^32 (chunk ages are compared wrap-safe).
  std::uint32_t tick() const { return static_cast<std::uint32_t>(os_->now_ms() - epoch_ms_); }
  // The purge loop shared by purge, decay and exchange: free mapped chunks of part `only_part`
  // (-1: all), skipping slot `skip_slot`, largest classes first; `aged`: only those given back at
  // or before tick `freed_by`. Returns bytes advised away.
  // `owe`: each Slot remembers what was taken from it (Slot::limit_owed; the free limit's purges).
  // `given` (when not null): adds the page classes' discarded bytes and those of them that were
  // resident (Os::resident_bytes; the free limit's FreeLimit::Given).
  std::uint64_t purge_pages(std::uint64_t want, int only_part, int skip_slot, bool aged, std::uint32_t freed_by,
                            bool owe = false, FreeLimit::Given* given = nullptr);
  // Fresh pages are about to be charged for slot `slot` of `part`: advise away as many bytes of
  // free resident chunks of the node's other classes idle for NUMAP_EXCHANGE_MS, so RSS does not
  // grow while idle resident memory exists.
  void exchange(int part, int slot, std::uint64_t bytes);
  // `bytes` of resident chunks went back to part's Slots: the free limit's check, when one is due.
  void note_freed(int part, std::uint64_t bytes) {
    if (opt_.free_percent == 0) return;
    NodePart& np = part_[part];
    if (np.free_limit.freed(bytes, np.charge.mapped.load(std::memory_order_relaxed))) limit_due(part);
  }
  // The free limit's checks are queued by free() and applied off the free path (PURGE_DELAY_MS >= 0).
  bool limit_deferred_on() const { return opt_.free_percent > 0 && opt_.purge_delay_ms >= 0; }
  // A check came due on part (a free): with PURGE_DELAY_MS -1 applied here, else queued and the
  // background thread asked for a pass (one futex wake for the first check since its last pass;
  // none for the checks that join it).
  void limit_due(int part);
  // The queued checks applied (by the background thread, or a slow path where there is none): each
  // node's excess over its allowance advised away, at most `bound` bytes a node (0: all; what is
  // left stays queued). delayed: only checks queued PURGE_DELAY_MS ago (the thread waited itself).
  void limit_deferred(std::uint64_t bound, bool delayed);
  // The node's free resident bytes above NUMAP_FREE_PERCENT of its in-use bytes (and above
  // NUMAP_FREE_FLOOR) are advised away now, those idle for EXCHANGE_MS first: a program that frees
  // most of what it holds (a release phase, a structure dropped before the next is built) gives the
  // pages back within PURGE_DELAY_MS, where decay by age would wait DECAY_MS; steady churn, whose free pages
  // are a small share of what it holds, keeps them.
  // bound: at most that many bytes (0: all the excess); returns the bytes advised away.
  std::uint64_t limit_free(int part, std::uint64_t bound = 0);
  std::uint64_t limit_pass(int part, std::uint64_t bound);  // limit_free's work, by the thread inside FreeLimit::enter()
  // Fresh pages charged for a Slot the free limit took pages from: the limit was too tight.
  void note_refault(int part, Slot& sl, std::uint64_t bytes);

  Options opt_;
  Topology topo_;
  Os* os_ = nullptr;
  bool numa_ = false;
  int nparts_ = 1;
  int npage_ = 0;
  int nslots_ = 0;
  std::uint64_t span_ = 0;
  int span_shift_ = 0;  // log2(span_)
  bool asym_guard_ = false;  // membarrier registered: see ThreadCache::page_lock
  char* arena_ = nullptr;
  std::uint64_t arena_bytes_ = 0;
  char* meta_ = nullptr;
  std::uint64_t meta_bytes_ = 0;
  NodePart* part_ = nullptr;
  std::uint64_t part_meta_bytes_ = 0;  // each node's slab headers, class bytes and Slot metadata, after the NodeParts
  std::uint64_t slot_meta_off_[1 + kMaxPageClasses] = {};  // each Slot's metadata within its node's share
  Lock slot_init_lock_;  // init_slot; held across fork (no Slot becomes ready meanwhile)
  std::atomic<bool> given_back_{false};  // a resident chunk went back to a Slot (note_given_back)
  std::atomic<std::int64_t> moved_pieces_{0};  // moved pieces now (Slot::pieces)
  std::atomic<bool> moves_off_{false};  // a move was refused (no MREMAP_DONTUNMAP, the map count): none again
  std::atomic<bool> populate_off_{false};  // MADV_POPULATE_WRITE refused: none again
  std::atomic<bool> decay_start_due_{false};  // ... and the background thread is wanted, not yet started
  std::atomic<bool> limit_queued_{false};  // a node's FreeLimit has a queued check (limit_due)
  // Freed chunks of kGiveBackAtOnce or more whose give-back is queued (queue_give_back); held
  // across fork. 64 of 32 MiB and more is 2 GiB freed within one PURGE_DELAY_MS: past that, at once.
  struct GiveBack {
    int part, slot;
    std::uint64_t index;
    std::uint32_t at;  // tick queued
    std::uint64_t resident;  // its extent when queued (NodePart::give_back_queued)
  };
  static constexpr int kMaxGiveBacks = 64;
  Lock give_back_lock_;
  GiveBack give_backs_[kMaxGiveBacks] = {};
  int ngive_backs_ = 0;  // under give_back_lock_
  std::atomic<bool> give_backs_queued_{false};  // ngive_backs_ != 0 (one relaxed load on the slow paths)
  HugeAllocations huge_;
  NodeBudget budget_;
  HeapCounters counters_;
  CacheRegistry registry_;
  DecayThread decay_thread_;
  std::uint64_t epoch_ms_ = 0;
  Pacer decay_pacer_;
  std::uint32_t decay_period_ = 1;  // ms: decay passes run at most once per quarter of the decay time
  std::uint32_t idle_look_ms_ = ~0u;  // ms between a thread's looks at its idle lists: DECAY_MS, or never (0)
  std::uint64_t allowed_os_ = 0;  // kernel nodes the process may use (bind masks)
  // Each small class's base list limit (NUMAP_TCACHE_BYTES / size, 4..512) and the most it may
  // grow to (base + NUMAP_TCACHE_BUDGET / size in whole batches, at most kMaxListLength).
  std::uint32_t base_limit_[kSmallClasses] = {};
  std::uint32_t max_limit_[kSmallClasses] = {};
  std::atomic<std::uint32_t> tcache_epoch_{0};  // bumped by tcache_pressure()
  bool lists_adapt_ = false;  // NUMAP_TCACHE_BUDGET and NUMAP_TCACHE_TOTAL both above 0
  // The unclaimed part of NUMAP_TCACHE_TOTAL: list growth no thread holds (ThreadCache::
  // claimed_bytes). Its own line: every thread's growth and shrink steps write it.
  alignas(64) std::atomic<std::uint64_t> tcache_pool_{0};
};

}  // namespace numap
