// The Heap's small objects: the per-thread caches (creation, refill, flush, thread exit), slabs
// going back to their Slot and the per-(node, class) transfer caches.
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "allocators/numap/heap.h"
#include "allocators/numap/heap_internal.h"

namespace numap {

namespace {

pthread_key_t cache_key;
bool cache_key_made = false;
pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

void cache_destructor(void* arg) {
  auto* tc = static_cast<ThreadCache*>(arg);
  tc->slab_span = tc->page_fast_span = 0;  // later frees (other TLS destructors) take the slow path
  Heap* heap = tc->owner;
  if (heap != nullptr) heap->flush_cache(tc);
  tc->owner = nullptr;
  tc->state = CacheState::kDead;
  // What the cache held may be the first pages given back: the decay thread's start (which
  // allocates) once this cache is gone, so nothing it allocates lands in a dead cache.
  if (heap != nullptr) heap->start_decay_thread();
}

void make_cache_key() { cache_key_made = pthread_key_create(&cache_key, cache_destructor) == 0; }

}  // namespace

ThreadCache* Heap::cache() {
  ThreadCache* tc = thread_cache_tls();
  if (tc->owner == this) return tc;
  if (!opt_.tcache || tc->state == CacheState::kDead) return nullptr;
  // Without a key (the process used up PTHREAD_KEYS_MAX) a thread's exit could not return its cache,
  // which would stay registered after its thread is gone; cache_key (0) would be another
  // component's key. No thread caches then: every call takes the central paths.
  pthread_once(&cache_key_once, make_cache_key);
  if (!cache_key_made) return nullptr;
  if (tc->owner != nullptr) tc->owner->flush_cache(tc);
  tc->owner = this;
  tc->state = CacheState::kLive;
  tc->node = budget_.current_node();
  set_home(tc);
  tc->until_recheck = 64;
  tc->hits = 0;
  for (int c = 0; c < kSmallClasses; ++c) {
    tc->lists[c] = CacheList{nullptr, 0, base_limit_[c]};
    tc->overages[c] = 0;
  }
  tc->grown_bytes = 0;
  tc->took_classes = 0;
  __atomic_store_n(&tc->claimed_bytes, std::uint64_t{0}, __ATOMIC_RELAXED);
  __atomic_store_n(&tc->give_back, 0u, __ATOMIC_RELAXED);
  tc->ask_skip = 0;
  tc->ask_every = kAskEvery;
  tc->steal_next = 0;
  tc->epoch = tcache_epoch_.load(std::memory_order_relaxed);
  tc->page_room = static_cast<std::int64_t>(opt_.page_cache_bytes / kPage);
  tc->page_asym = asym_guard_;
  tc->large_taken = tc->large_again = 0;
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
  registry_.add(tc);
  pthread_setspecific(cache_key, tc);
  return tc;
}

namespace {

// The first batch a (node, class) hands out takes at most a page of objects: the links written
// into them are what a first allocation touches of its fresh slab (one page, not up to 16 KiB
// for 64 B objects); every later refill takes half a limit. Under the Central's lock.
std::uint32_t first_batch(const Central& c, std::uint32_t size, std::uint32_t want) {
  if (__builtin_expect(c.allocs.load(std::memory_order_relaxed) != 0, 1)) return want;
  const std::uint32_t page = size < kPage ? static_cast<std::uint32_t>(kPage / size) : 1;
  return want < page ? want : page;
}

}  // namespace

bool Heap::slab_populate(Central& c, char* slab, std::uint64_t old, std::uint32_t size) {
  if (opt_.populate == Populate::kNone) return false;
  const bool busy = c.slab_bytes.load(std::memory_order_relaxed) >= kPopulateAfter && old < kSlabBytes;
  if (size <= kPopulateObjectMax || opt_.populate == Populate::kAll) return busy;
  // The pages the slab's objects cover: a class whose last object ends before the slab does
  // (12 KiB objects: five in 60 KiB) never writes the rest.
  const std::uint64_t covered = pages_for(std::uint64_t{kSlabBytes / size} * size) * kPage;
  return c.written.populate(slab, covered, old == 0, busy,
                            [this](char* p, std::uint64_t n) { return os_->resident_bytes(p, n); });
}

void* Heap::refill(ThreadCache* tc, int cls) {
  int node;
  std::uint32_t want = 1;
  if (tc != nullptr) {
    recheck_node(tc);
    note_slow(tc, cls);
    lists_check_pressure(tc);
    node = tc->node;
    want = tc->lists[cls].limit / 2 > 0 ? tc->lists[cls].limit / 2 : 1;  // half the (grown) limit
  } else {
    node = budget_.current_node();
  }
  const std::uint32_t size = kSmallSize[cls];
  void* head = nullptr;
  std::uint32_t got = 0;
  for (int attempt = 0; attempt < 2 && got == 0; ++attempt) {
    Central& c = part_[node].central[cls];
    // A node whose slab Slot is not initialised has no slab and no parked batch: its Central's
    // lock is not taken (nor its page touched), which lets a fork skip it (for_each_used_lock).
    if (part_[node].slots[kSlabSlot].ready()) {
      // Whole batches other threads' overflows handed over, taken without the Central's lock.
      if (tc != nullptr && attempt == 0 && opt_.handoff_bytes != 0)
        got = c.handoff.take(&head, want, tc->lists[cls].limit, size, [this] { return tick(); });
      if (got == 0) {
        LockGuard g(c.lock);
        if (tc != nullptr) got = c.transfer.take(&head, size);  // a whole batch another overflow left
        if (got == 0)
          got = c.pop(slot_base(node, kSlabSlot), kSlabBytes, part_[node].slab_meta, &head, first_batch(c, size, want));
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
    if (slab_populate(c2, slab, old, size)) populate(slab + old, kSlabBytes - old);
    c2.slab_bytes.fetch_add(kSlabBytes, std::memory_order_relaxed);
    LockGuard g(c2.lock);
    central_link(&c2, s);
    got = c2.pop(np.slots[kSlabSlot].base(), kSlabBytes, np.slab_meta, &head, first_batch(c2, size, want));
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
    tc->took_classes |= std::uint64_t{1} << cls;
    CacheList& l = tc->lists[cls];
    // The list was empty: the rest of the batch becomes it.
    l.head = head;
    l.count = got - 1;
    list_grow(tc, cls);
  }
  return result;
}

void Heap::list_grow(ThreadCache* tc, int cls) {
  CacheList& l = tc->lists[cls];
  if (l.limit >= max_limit_[cls]) return;
  const std::uint64_t size = kSmallSize[cls];
  // By half the limit, at least a batch (the refills are half a limit too), up to the cap.
  std::uint32_t by = l.limit / 2 > list_batch(cls) ? l.limit / 2 : list_batch(cls);
  if (by > max_limit_[cls] - l.limit) by = max_limit_[cls] - l.limit;
  // A batch back from each other grown class in turn, round robin, until this growth fits under
  // `bound` (tcmalloc's IncreaseCacheLimit steals from other threads' budgets; the thread's own
  // classes go first here, since only the owner may touch its lists). When this class holds the
  // whole growth there is none to take.
  auto take_back = [&](std::uint64_t bound) {
    if (tc->grown_bytes == std::uint64_t{l.limit - base_limit_[cls]} * size) return;
    for (int i = 0; i < kSmallClasses && tc->grown_bytes + by * size > bound; ++i) {
      const int c = static_cast<int>(tc->steal_next++ % kSmallClasses);
      if (c != cls && tc->lists[c].limit > base_limit_[c]) list_shrink(tc, c, 1);
    }
  };
  // Over the thread's own budget (NUMAP_TCACHE_BUDGET): from its other classes.
  if (tc->grown_bytes + by * size > opt_.tcache_budget) {
    take_back(opt_.tcache_budget);
    const std::uint64_t room = opt_.tcache_budget > tc->grown_bytes ? opt_.tcache_budget - tc->grown_bytes : 0;
    if (by * size > room) by = static_cast<std::uint32_t>(room / size);
  }
  // Beyond what the thread has claimed (what the other classes gave back above is still claimed):
  // from the pool of all threads (NUMAP_TCACHE_TOTAL), one atomic; when it is short, from the
  // thread's other classes, then what is left, and the threads holding more are asked for some.
  if (by != 0 && tc->grown_bytes + by * size > tc->claimed_bytes) {
    const std::uint64_t need = tc->grown_bytes + by * size - tc->claimed_bytes;
    const std::uint64_t got = pool_claim(need);
    if (got != 0) __atomic_store_n(&tc->claimed_bytes, tc->claimed_bytes + got, __ATOMIC_RELAXED);
    if (got == need) {
      tc->ask_skip = 0;
      tc->ask_every = kAskEvery;
    } else {
      take_back(tc->claimed_bytes);
      const std::uint64_t room = tc->claimed_bytes > tc->grown_bytes ? tc->claimed_bytes - tc->grown_bytes : 0;
      if (by * size > room) {
        by = static_cast<std::uint32_t>(room / size);
        ask_give_back(tc);
      }
    }
  }
  if (by != 0) {
    l.limit += by;
    tc->grown_bytes += by * size;
    tc->overages[cls] = 0;
    counters_.tcache_grows.fetch_add(1, std::memory_order_relaxed);
  }
  settle_claim(tc);  // what the other classes gave back beyond this growth
}

void Heap::ask_give_back(ThreadCache* tc) {
  if (tc->ask_skip != 0) {
    --tc->ask_skip;
    return;
  }
  tc->ask_skip = tc->ask_every;
  if (tc->ask_every < kAskMost) tc->ask_every *= 2;
  counters_.tcache_asks.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t mine = tc->claimed_bytes;
  // Under the registry lock: a cache leaves the registry (its thread's exit) under it, so the
  // request is never written into a thread's TLS after it is gone.
  LockGuard g(registry_.lock());
  registry_.for_each([&](ThreadCache* other) {
    if (other != tc && __atomic_load_n(&other->claimed_bytes, __ATOMIC_RELAXED) > mine)
      __atomic_store_n(&other->give_back, 1u, __ATOMIC_RELAXED);
  });
}

void Heap::lists_release_growth(ThreadCache* tc, std::uint64_t bytes) {
  const std::uint64_t target = tc->grown_bytes > bytes ? tc->grown_bytes - bytes : 0;
  for (int i = 0; i < kSmallClasses && tc->grown_bytes > target; ++i) {
    const int c = static_cast<int>(tc->steal_next++ % kSmallClasses);
    if (tc->lists[c].limit <= base_limit_[c]) continue;
    const std::uint64_t batch_bytes = std::uint64_t{list_batch(c)} * kSmallSize[c];
    const std::uint64_t batches = (tc->grown_bytes - target + batch_bytes - 1) / batch_bytes;
    list_shrink(tc, c, static_cast<std::uint32_t>(batches < kMaxListLength ? batches : kMaxListLength));
  }
  settle_claim(tc);
}

void Heap::list_shrink(ThreadCache* tc, int cls, std::uint32_t batches, bool release) {
  // (The claim is settled by the caller, once for all the classes it shrinks.)
  CacheList& l = tc->lists[cls];
  tc->overages[cls] = 0;
  if (l.limit <= base_limit_[cls]) return;
  const std::uint64_t most = std::uint64_t{batches} * list_batch(cls);
  const std::uint32_t n = most < l.limit - base_limit_[cls] ? static_cast<std::uint32_t>(most) : l.limit - base_limit_[cls];
  l.limit -= n;
  tc->grown_bytes -= std::uint64_t{n} * kSmallSize[cls];
  counters_.tcache_shrinks.fetch_add(1, std::memory_order_relaxed);
  // What the list holds beyond its new limit goes back in one step (or by the next overflows).
  if (release && l.count > l.limit) list_release(tc, cls, tc->node, l.count - l.limit);
}

void Heap::list_overflow(ThreadCache* tc, int cls, int part) {
  note_slow(tc, cls);
  lists_check_pressure(tc);
  CacheList& l = tc->lists[cls];
  if (l.count < l.limit) return;  // the pressure check made room
  const std::uint32_t half = l.limit / 2 > 0 ? l.limit / 2 : 1;
  // A consumer's overflow goes to the handoff, up to a refill's batch: no lock, a walk of objects
  // it has just freed. What takes a lock (the transfer cache, the slabs: a cache miss an object in a
  // shuffled release) moves at most kOverflowMove objects per free. The caller then pushes one
  // object: a list within its limit stays within it.
  std::uint32_t n = handoff_put(tc, cls, part, half < list_batch(cls) ? half : list_batch(cls));
  if (n == 0) {
    n = half < kOverflowMove ? half : kOverflowMove;
    if (!transfer_put(&l, cls, part, n)) flush_list(&l, n);
  }
  // A grown list that keeps overflowing holds more than its thread reuses (a thread that frees
  // what others allocated): once its overflows have returned kMaxOverages halves of its limit, the
  // limit loses a batch (ListTooLong). What the list holds past the new limit stays for now: each
  // free that finds the list over its limit overflows again, so no overflow moves more than above
  // (an idle look, a pressure epoch or a budget request, at most once per DECAY_MS or per event,
  // still put whole lists back).
  if (l.limit > base_limit_[cls] && (tc->overages[cls] += n) > kMaxOverages * half) {
    list_shrink(tc, cls, 1, false);
    settle_claim(tc);
  }
}

void Heap::lists_return_idle(ThreadCache* tc) {
  const std::uint64_t slow = tc->slow_classes;
  tc->slow_classes = 0;
  tc->took_classes = 0;
  tc->idle_looked_at = tick();
  bool shrunk = false;
  for (int c = 0; c < kSmallClasses; ++c) {
    if (!(tc->held_classes >> c & 1)) continue;
    if (slow >> c & 1) {
      const Central& ce = part_[tc->node].central[c];
      const std::uint64_t slabs = ce.slab_bytes.load(std::memory_order_relaxed);
      const std::uint64_t in_use = ce.in_use_bytes.load(std::memory_order_relaxed);
      if (slabs < 2 * in_use + kSparseSlack) continue;  // in use and not sparse: keep it
    }
    tc->held_classes &= ~(std::uint64_t{1} << c);
    CacheList& l = tc->lists[c];
    // Into the slabs, not the transfer cache: an object parked there pins its slab as well. The
    // batches this thread's overflows parked on its node go back too (another thread still
    // using the class refills from the slabs instead); a handoff's only where no background
    // thread drains it by its age (it may hold NUMAP_HANDOFF_BYTES: not a free's work).
    const std::uint64_t bytes =
        drain_transfer(tc->node, c, !decay_thread_.running()) + std::uint64_t{l.count} * kSmallSize[c];
    if (bytes != 0) counters_.tcache_idle_bytes.fetch_add(bytes, std::memory_order_relaxed);
    flush_list(&l, l.count);
    if (l.limit > base_limit_[c]) {
      list_shrink(tc, c, kMaxListLength);
      shrunk = true;
    }
  }
  if (shrunk) settle_claim(tc);
}

void Heap::recheck_node(ThreadCache* tc) {
  if (--tc->until_recheck == 0) {
    tc->node = budget_.current_node();
    set_home(tc);
    tc->until_recheck = 64;
  }
}

void Heap::set_home(ThreadCache* tc) {
  // By address arithmetic: the node's Slots may not be initialised yet.
  tc->slab_base = reinterpret_cast<std::uintptr_t>(slot_base(tc->node, kSlabSlot));
  tc->slab_class = part_[tc->node].slab_class;
  tc->slab_span = span_ / kSlabBytes * kSlabBytes;
  tc->page_fast_span = static_cast<std::uint64_t>(1 + (npage_ < kLargeCachedClass ? npage_ : kLargeCachedClass)) * span_;
  tc->span_shift = static_cast<std::uint8_t>(span_shift_);
  tc->node_slots = part_[tc->node].slots;
}


void Heap::release_slab(int part, SlabMeta* s) {
  part_[part].central[s->cls].slab_bytes.fetch_sub(kSlabBytes, std::memory_order_relaxed);
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
    if (!c.transfer.park(list->head, tail, n, kSmallSize[cls], list_batch(cls))) return false;
    c.frees.fetch_add(n, std::memory_order_relaxed);
    c.in_use_bytes.fetch_sub(std::uint64_t{n} * kSmallSize[cls], std::memory_order_relaxed);
  }
  list->head = rest;
  list->count -= n;
  return true;
}

std::uint32_t Heap::handoff_put(ThreadCache* tc, int cls, int part, std::uint32_t n) {
  CacheList* list = &tc->lists[cls];
  const std::uint32_t size = kSmallSize[cls];
  const std::uint32_t batch = list_batch(cls);
  if (opt_.handoff_bytes == 0 || (tc->took_classes >> cls & 1) != 0 || batch < Handoff::kMinBatch ||
      n < Handoff::kMinBatch || list->count < n)
    return 0;
  Central& c = part_[part].central[cls];
  const std::uint32_t now = tick();
  // Nobody took from it for HANDOFF_MS: no producer is there, and this overflow takes the locked
  // path. What the handoff holds goes back to the slabs from the background thread, asked now (a
  // release's 50 ms of pushes is thousands of objects, which put free()'s tail at 10-30 us when a
  // free drained them); without one, here. The next push after the drain starts the clock again.
  if (opt_.handoff_ms > 0 && c.handoff.age(now, static_cast<std::uint32_t>(opt_.handoff_ms)) == Handoff::kStale) {
    if (decay_thread_.running())
      decay_thread_.request();
    else
      counters_.handoff_stale_bytes.fetch_add(drain_handoff(part, cls) * size, std::memory_order_relaxed);
    return 0;
  }
  // As many whole batches as there is room for now (reserve() checks again); every batch holds its
  // header's objects, so a shorter remainder (a 16 B class's) stays in the list. After the age: a
  // full handoff nobody takes from is stale too.
  const std::uint64_t held = c.handoff.bytes();
  const std::uint64_t room = opt_.handoff_bytes > held ? (opt_.handoff_bytes - held) / size : 0;
  if (n > room) n = static_cast<std::uint32_t>(room / batch * batch);
  if (n % batch != 0 && n % batch < Handoff::kMinBatch) n -= n % batch;
  if (n == 0) return 0;
  if (nparts_ != 1) {  // a list may hold objects of a node the thread has left
    void* o = list->head;
    for (std::uint32_t i = 0; i < n; ++i, o = Handoff::link(o))
      if (locate(o).part != part) return 0;
  }
  if (!c.handoff.reserve(std::uint64_t{n} * size, opt_.handoff_bytes)) return 0;
  void* first = list->head;
  void* o = first;
  void* prev = nullptr;
  for (std::uint32_t left = n; left != 0;) {
    const std::uint32_t k = left < batch ? left : batch;
    void* b = o;
    for (std::uint32_t i = 1; i < k; ++i) o = Handoff::link(o);
    void* next = Handoff::link(o);
    Handoff::seal(b, k, o);
    if (prev != nullptr) Handoff::header(prev, 0) = b;
    prev = b;
    o = next;
    left -= k;
  }
  list->head = o;
  list->count -= n;
  c.frees.fetch_add(n, std::memory_order_relaxed);
  c.in_use_bytes.fetch_sub(std::uint64_t{n} * size, std::memory_order_relaxed);
  std::atomic<std::uint64_t>& used = part_[part].handoff_classes;
  if ((used.load(std::memory_order_relaxed) >> cls & 1) == 0) used.fetch_or(std::uint64_t{1} << cls, std::memory_order_relaxed);
  // A clock started: a background pass looks PURGE_DELAY_MS from now, and again until the batches
  // are taken or stale, so the last push of a release is not left to the next decay pass. Batches
  // that may have to go back are work for the thread as a free page is: it starts (at the end of
  // this free, where no lock is held) if nothing started it yet.
  if (c.handoff.push(first, prev, now) && opt_.handoff_ms > 0) {
    note_given_back();
    decay_thread_.request();
  }
  return n;
}

std::uint64_t Heap::drain_handoff(int part, int cls) {
  Central& c = part_[part].central[cls];
  const std::uint32_t size = kSmallSize[cls];
  return c.handoff.drain(size, [&](void* b, std::uint32_t n) {
    // flush_list counts them freed again: undo the handoff's accounting first.
    c.frees.fetch_sub(n, std::memory_order_relaxed);
    c.in_use_bytes.fetch_add(std::uint64_t{n} * size, std::memory_order_relaxed);
    CacheList l{b, n, 0};
    flush_list(&l, n);
  });
}

bool Heap::drain_stale_handoffs() {
  if (opt_.handoff_bytes == 0) return false;
  const std::uint32_t now = tick();
  // No age bound: a decay pass period's wait, as a pass sees it.
  const std::uint32_t limit = opt_.handoff_ms > 0 ? static_cast<std::uint32_t>(opt_.handoff_ms) : decay_period_;
  bool young = false;
  for (int p = 0; p < nparts_; ++p) {
    const std::uint64_t used = part_[p].handoff_classes.load(std::memory_order_relaxed);
    for (int cls = 0; cls < kSmallClasses; ++cls) {
      if ((used >> cls & 1) == 0) continue;
      const Handoff::Age age = part_[p].central[cls].handoff.age(now, limit);
      if (age == Handoff::kStale)
        counters_.handoff_stale_bytes.fetch_add(drain_handoff(p, cls) * kSmallSize[cls], std::memory_order_relaxed);
      young |= age == Handoff::kYoung;
    }
  }
  return young;
}

void Heap::drain_transfers() {
  for (int p = 0; p < nparts_; ++p)
    for (int cls = 0; cls < kSmallClasses; ++cls) drain_transfer(p, cls);
}

std::uint64_t Heap::drain_transfer(int part, int cls, bool handoff) {
  if (!part_[part].slots[kSlabSlot].ready()) return 0;  // no slab yet: nothing parked (see refill)
  Central& c = part_[part].central[cls];
  CacheList taken[kTransferBatches];
  int n = 0;
  std::uint64_t objects = 0;
  {
    LockGuard g(c.lock);
    c.transfer.drain([&](void* head, std::uint32_t count) { taken[n++] = CacheList{head, count, 0}; });
    // Back in the slabs they count as flushed already: undo the transfer's accounting, which
    // flush_list repeats.
    for (int i = 0; i < n; ++i) {
      objects += taken[i].count;
      c.frees.fetch_sub(taken[i].count, std::memory_order_relaxed);
      c.in_use_bytes.fetch_add(std::uint64_t{taken[i].count} * kSmallSize[cls], std::memory_order_relaxed);
    }
  }
  for (int i = 0; i < n; ++i) flush_list(&taken[i], taken[i].count);  // n is 0 for most classes
  if (handoff) objects += drain_handoff(part, cls);
  return objects * kSmallSize[cls];
}

void Heap::park_list(ThreadCache* tc, int cls, int part) {
  CacheList* list = &tc->lists[cls];
  // Batches of what a refill at the base limit takes (list_batch), so a taker's list never holds
  // more than its limit; the transfer cache's own bound (kTransferBytes) applies as for overflows.
  const std::uint32_t batch = list_batch(cls);
  handoff_put(tc, cls, part, list->count);  // first (a class the thread only freed), within its bound
  while (list->count != 0 && transfer_put(list, cls, part, list->count < batch ? list->count : batch)) {
  }
  flush_list(list, list->count);  // what the transfer cache had no room for
}

void Heap::flush_cache(ThreadCache* tc) {
  for (int c = 0; c < kSmallClasses; ++c) {
    if (opt_.exit_transfer)
      park_list(tc, c, tc->node);
    else
      flush_list(&tc->lists[c], tc->lists[c].count);
  }
  // The lists' growth goes back to the pool with them (the cache is set up afresh if used again).
  for (int c = 0; c < kSmallClasses; ++c) tc->lists[c].limit = base_limit_[c];
  tc->grown_bytes = 0;
  settle_claim(tc);
  page_enter(tc);
  // Not checked against the free limit here: a pool whose threads exit and are replaced
  // (arena_churn) would advise pages away at every exit that the next thread charges again (its
  // steady phase ran at 0.6 of the speed); the next MiB freed anywhere on the node checks.
  flush_pages(tc);
  page_unlock_own(tc);
  registry_.remove(tc);
  counters_.tcache_hits.fetch_add(tc->hits, std::memory_order_relaxed);
  tc->hits = 0;
}

void* Heap::small_alloc_slow(int cls) {
  ThreadCache* tc = live_cache();
  if (tc != nullptr)
    if (void* p = cache_pop(tc, cls)) return p;
  return refill(tc, cls);
}

}  // namespace numap
