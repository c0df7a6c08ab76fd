// The Heap's reclaim: purges (capacity pressure, numap_purge, malloc_trim), decay by age and its
// background thread, the exchange across classes and the free limit (queued by free(), applied by
// the background thread or later slow paths).
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "allocators/numap/heap.h"
#include "allocators/numap/heap_internal.h"

namespace numap {

std::size_t Heap::purge(std::uint64_t want, int only_part) {
  counters_.purges.fetch_add(1, std::memory_order_relaxed);
  tcache_pressure();  // grown small-object lists back to their base limits, each at its next slow path
  drain_transfers();  // parked batches keep their slabs from emptying
  // Cached page chunks are charged but not free in their Slots: return every thread's first.
  flush_all_page_caches();
  // Queued give-backs of freed large chunks, whatever the delay (numap_purge, malloc_trim, capacity);
  // they count toward `want` only for a purge of every node (they may be any node's).
  std::size_t got = apply_give_backs(false);
  const std::uint64_t counted = only_part < 0 ? got : 0;
  if (want == 0 || counted < want) got += purge_pages(want == 0 ? 0 : want - counted, only_part, -1, false, 0);
  start_decay_thread();  // what the flushes gave back and a partial purge left (no lock is held)
  return got;
}

std::uint64_t Heap::purge_pages(std::uint64_t want, int only_part, int skip_slot, bool aged, std::uint32_t freed_by,
                                bool owe, FreeLimit::Given* given) {
  std::uint64_t got = 0;
  PurgeRun runs[kPurgeBatchRuns];
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
          const int n = sl.purge_begin(runs, kPurgeBatchRuns, want != 0 ? want - got : 0, aged, freed_by, /*spans=*/true);
          if (n == 0) break;
          std::uint64_t released = 0;
          for (int r = 0; r < n; ++r) {
            const bool count = given != nullptr && si != kSlabSlot && runs[r].bytes != 0;
            std::uint64_t sample = 0, was = 0;
            if (count && given->sampled < FreeLimit::kSampleBytes) {
              // Charged pages only: a run that spans chunks charged in part has uncharged pages
              // after its first chunk's extent, so its sample stays inside that extent.
              const std::uint64_t charged = runs[r].span == runs[r].bytes ? runs[r].bytes
                                                                            : std::uint64_t{sl.extent(runs[r].first)} * kPage;
              sample = FreeLimit::kSampleBytes - given->sampled;
              if (sample > charged) sample = charged;
              was = os_->resident_bytes(sl.address(runs[r].first), sample);
            }
            runs[r].ok = runs[r].bytes == 0 || discard_run(p, sl, runs[r].first, runs[r].count, runs[r].span);
            if (runs[r].ok) {
              released += runs[r].bytes;
              if (count) {
                given->chunk_bytes += runs[r].bytes;
                given->sampled += sample;
                given->resident += was;
              }
            }
          }
          sl.purge_done(runs, n);
          budget_.uncharge(p, released);
          sl.mapped_bytes.fetch_sub(released, std::memory_order_relaxed);
          sl.advised_bytes.fetch_add(released, std::memory_order_relaxed);
          if (owe) sl.limit_owed.fetch_add(released, std::memory_order_relaxed);
          counters_.advised_bytes.fetch_add(released, std::memory_order_relaxed);
          got += released;
          // Freed large chunks that came due meanwhile go back between batches, not after the
          // whole walk: one madvise each returns the most bytes per call, and a release's
          // scattered runs take the thread about 3 ms a MiB here (hash_build's 500 MiB: 200 ms),
          // past the return curve's +100 ms. Not counted in `got`: the free limit never counted
          // them (queued chunks are neither in use nor free to it).
          if (give_backs_queued()) apply_give_backs(true);
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
  if (tc->owner == this) {
    for (int c = 0; c < kSmallClasses; ++c) {
      flush_list(&tc->lists[c], tc->lists[c].count);
      list_shrink(tc, c, kMaxListLength);
    }
    settle_claim(tc);  // the lists' growth back to the pool
  }
  return purge();
}

void Heap::maybe_decay() {
  const std::uint32_t now = tick();
  if (!decay_pacer_.claim(now, decay_period_)) return;
  counters_.decay_passes.fetch_add(1, std::memory_order_relaxed);
  // Batches handed over that nobody took for a while keep their slabs from emptying: back first,
  // so the slabs they empty age from now.
  drain_stale_handoffs();
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

void Heap::limit_due(int part) {
  if (opt_.purge_delay_ms < 0) {
    limit_free(part);
    return;
  }
  if (!part_[part].free_limit.queue(tick())) return;  // one is queued: its pass reads these bytes too
  counters_.deferred_purges.fetch_add(1, std::memory_order_relaxed);
  limit_queued_.store(true);  // after the node's queue, before the request (limit_deferred reads them so)
  decay_thread_.request();
}

void Heap::limit_deferred(std::uint64_t bound, bool delayed) {
  if (!limit_queued_.exchange(false)) return;
  const std::uint32_t now = tick();
  bool left = false;
  for (int p = 0; p < nparts_; ++p) {
    FreeLimit& fl = part_[p].free_limit;
    if (!fl.queued()) continue;
    const std::uint32_t waited = now - fl.queued_at();
    if (delayed && fl.queued() == FreeLimit::kFresh && static_cast<std::int64_t>(waited) < opt_.purge_delay_ms) {
      left = true;
      continue;
    }
    const FreeLimit::Queued took = fl.take();
    if (took == FreeLimit::kNone) continue;
    if (took == FreeLimit::kFresh) counters_.deferred_wait_ms.fetch_add(waited, std::memory_order_relaxed);
    // A bounded pass that reached its bound may have left some of the excess: the next slow path
    // looks again (a pass that finds none left gives nothing back, and queues nothing).
    if (limit_free(p, bound) >= bound && bound != 0) {
      fl.requeue();
      left = true;
    }
  }
  if (left) limit_queued_.store(true);
}

void Heap::background_pass(void* heap) {
  Heap* h = static_cast<Heap*>(heap);
  // Stale handoffs before the free limit, so the slabs they empty go back in this pass; looked at
  // again after it, since a long limit pass (many scattered slabs: tens of ms) ages them too.
  // Batches still young: another pass after the delay (a push's request started this); none once
  // every handoff is taken from or drained, so an idle program's thread sleeps.
  // Freed large chunks that came due go back first, and during the limit pass between its batches
  // of runs (purge_pages); those not due yet, a pass later.
  h->apply_give_backs(true);
  bool young = h->opt_.handoff_ms > 0 && h->drain_stale_handoffs();
  h->limit_deferred(0, false);  // the thread waited PURGE_DELAY_MS after the request itself
  if (young) {
    young = h->drain_stale_handoffs();
    h->limit_deferred(0, false);  // what that drain emptied (one load when it queued nothing)
    if (young) h->decay_thread_.request();
  }
  h->apply_give_backs(true);
  if (h->give_backs_queued()) h->decay_thread_.request();
  if (h->opt_.decay_ms > 0) h->maybe_decay();
}

std::uint64_t Heap::limit_free(int part, std::uint64_t bound) {
  NodePart& np = part_[part];
  if (!np.free_limit.enter()) return 0;  // the thread applying it looks again before it leaves
  std::uint64_t got = 0;
  do {
    np.free_limit.begin();
    got += limit_pass(part, bound);
  } while (np.free_limit.again());
  return got;
}

std::uint64_t Heap::limit_pass(int part, std::uint64_t bound) {
  NodePart& np = part_[part];
  std::uint64_t free = 0;
  for (int s = 0; s < nslots_; ++s) free += np.slots[s].free_mapped_bytes();
  // Large chunks waiting in thread caches are free memory too: the limit trims the Slots' free
  // pages for them, so the cache holds part of the allowance instead of adding to it.
  free += np.large_cached.load(std::memory_order_relaxed);
  const std::uint64_t mapped = np.charge.mapped.load(std::memory_order_relaxed);
  // Chunks whose give-back is queued are going back anyway: neither in use (on which the allowance
  // is a percentage) nor free pages this pass could take.
  const std::uint64_t gone = free + np.give_back_queued.load(std::memory_order_relaxed);
  const std::uint64_t in_use = mapped > gone ? mapped - gone : 0;
  const std::uint32_t now = tick();
  bool new_window;
  const std::uint64_t allowed = np.free_limit.allowance(now, free, in_use, opt_, &new_window);
  if (new_window)
    for (int s = 0; s < nslots_; ++s) np.slots[s].limit_owed.store(0, std::memory_order_relaxed);
  if (free <= allowed) return 0;
  // Down to three quarters of the allowance, so that a release does not come back every MiB.
  std::uint64_t want = free - allowed / 4 * 3;
  if (bound != 0 && want > bound) want = bound;
  std::uint64_t got = 0;
  // How much of its page chunks was resident (mincore per run) only where NUMAP_POPULATE=auto reads it.
  FreeLimit::Given given;
  FreeLimit::Given* count = opt_.populate == Populate::kAuto ? &given : nullptr;
  if (opt_.exchange_ms > 0)
    got = purge_pages(want, part, -1, true, now - static_cast<std::uint32_t>(opt_.exchange_ms), true, count);
  if (got < want) got += purge_pages(want - got, part, -1, false, 0, true, count);
  np.free_limit.gave(got, given, now);
  if (got != 0) tcache_pressure();
  counters_.limited_bytes.fetch_add(got, std::memory_order_relaxed);
  return got;
}

void Heap::note_refault(int part, Slot& sl, std::uint64_t bytes) {
  std::uint64_t owed = sl.limit_owed.load(std::memory_order_relaxed);
  std::uint64_t take;
  do {
    if (owed == 0) return;
    take = owed < bytes ? owed : bytes;
  } while (!sl.limit_owed.compare_exchange_weak(owed, owed - take, std::memory_order_relaxed));
  part_[part].free_limit.refaulted(take);
}

}  // namespace numap
