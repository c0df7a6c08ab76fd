// The Heap's chunk store: chunks of a (node, class) Slot taken, given back and grown, with the
// node fallback and borrowing from larger classes.
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "allocators/numap/heap.h"
#include "allocators/numap/heap_internal.h"

namespace numap {

void* Heap::chunk_alloc(int node, int slot0, std::uint64_t bytes, std::uint64_t* old_bytes, int* out_part,
                        bool borrow) {
  on_slow_path();
  int order[kMaxNodes];
  std::uint64_t free_bytes[kMaxNodes];
  for (int pass = 0; pass < 2; ++pass) {
    int n = 1;
    order[0] = 0;
    if (numa_) {
      for (int i = 0; i < nparts_; ++i) free_bytes[i] = budget_.headroom(i);
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
      // A borrowed chunk's Slot had a free mapped chunk, so it is initialised; the slot's own may
      // not be yet.
      Slot& sl = ready_slot(m, slot);
      const std::uint64_t need = round_up(pages_for(bytes), sl.grain_pages());
      if (i < 0) i = sl.take();
      if (i < 0) continue;
      std::uint32_t& ext = sl.extent(static_cast<std::uint64_t>(i));
      if (ext < need) ext += static_cast<std::uint32_t>(move_in(m, slot, static_cast<std::uint64_t>(i), ext, need));
      const std::uint64_t had = ext;
      if (ext < need) {
        apply_give_backs(false);  // freed large chunks queued: given back before fresh pages are charged
        const Charge r = budget_.charge(m, (need - ext) * kPage);
        if (r != Charge::kOk) {
          sl.give(static_cast<std::uint64_t>(i), tick());
          (r == Charge::kGlobalFull ? global_full : node_full) = true;
          continue;
        }
        charged_fresh(m, slot, static_cast<std::uint64_t>(i), ext, need);
        ext = static_cast<std::uint32_t>(need);
      } else if (slot != slot0) {
        counters_.borrowed_bytes.fetch_add(ext * kPage, std::memory_order_relaxed);
      }
      sl.allocs.fetch_add(1, std::memory_order_relaxed);
      sl.in_use_bytes.fetch_add(sl.chunk(), std::memory_order_relaxed);
      if (m != node) budget_.note_fallback(node, m);
      *old_bytes = had * kPage;
      *out_part = m;
      return sl.address(static_cast<std::uint64_t>(i));
    }
    if (pass == 1) break;
    const std::uint64_t need = round_up(pages_for(bytes), slot_grain(slot0));
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
  const std::uint64_t resident = std::uint64_t{sl.extent(index)} * kPage;
  // The chunk is still ours here: no lock, nothing else can take it (see queue_give_back).
  if (opt_.free_percent > 0 && sl.chunk() >= kGiveBackAtOnce && resident != 0) {
    if (opt_.purge_delay_ms < 0 || !queue_give_back(part, slot, index)) release_chunk(part, slot, index);
    return;
  }
  sl.give(index, tick());
  if (resident != 0) {
    note_given_back();
    note_freed(part, resident);
  }
}

std::uint64_t Heap::release_chunk(int part, int slot, std::uint64_t index) {
  Slot& sl = part_[part].slots[slot];
  const std::uint64_t resident = std::uint64_t{sl.extent(index)} * kPage;
  const bool gone = resident != 0 && discard_run(part, sl, index, 1, resident);
  if (gone) {
    sl.extent(index) = 0;
    budget_.uncharge(part, resident);
    sl.mapped_bytes.fetch_sub(resident, std::memory_order_relaxed);
    sl.advised_bytes.fetch_add(resident, std::memory_order_relaxed);
    counters_.advised_bytes.fetch_add(resident, std::memory_order_relaxed);
    counters_.limited_bytes.fetch_add(resident, std::memory_order_relaxed);
  }
  sl.give(index, tick());
  if (resident != 0 && !gone) {
    note_given_back();
    note_freed(part, resident);
  }
  return gone ? resident : 0;
}

bool Heap::queue_give_back(int part, int slot, std::uint64_t index) {
  // Read while the chunk is still this thread's: once queued, another thread may apply it.
  const std::uint64_t resident = std::uint64_t{part_[part].slots[slot].extent(index)} * kPage;
  {
    LockGuard g(give_back_lock_);
    if (ngive_backs_ == kMaxGiveBacks) return false;
    give_backs_[ngive_backs_++] = GiveBack{part, slot, index, tick(), resident};
    part_[part].give_back_queued.fetch_add(resident, std::memory_order_relaxed);
    give_backs_queued_.store(true, std::memory_order_relaxed);
  }
  counters_.deferred_purges.fetch_add(1, std::memory_order_relaxed);
  note_given_back();  // the background thread is wanted (started where no lock is held)
  decay_thread_.request();
  return true;
}

std::uint64_t Heap::apply_give_backs(bool delayed) {
  if (!give_backs_queued()) return 0;
  GiveBack due[kMaxGiveBacks];
  int n = 0;
  const std::uint32_t now = tick();
  {
    LockGuard g(give_back_lock_);
    int kept = 0;
    for (int k = 0; k < ngive_backs_; ++k) {
      const GiveBack& e = give_backs_[k];
      if (delayed && static_cast<std::int64_t>(now - e.at) < opt_.purge_delay_ms)
        give_backs_[kept++] = e;
      else
        due[n++] = e;
    }
    ngive_backs_ = kept;
    give_backs_queued_.store(kept != 0, std::memory_order_relaxed);
  }
  std::uint64_t got = 0;
  for (int k = 0; k < n; ++k) {
    const GiveBack& e = due[k];
    counters_.deferred_wait_ms.fetch_add(now - e.at, std::memory_order_relaxed);
    got += release_chunk(e.part, e.slot, e.index);
    part_[e.part].give_back_queued.fetch_sub(e.resident, std::memory_order_relaxed);
  }
  return got;
}

bool Heap::grow_extent(int part, int slot, std::uint64_t index, std::uint64_t bytes, std::uint64_t* dirty) {
  Slot& sl = part_[part].slots[slot];
  const std::uint64_t need = round_up(pages_for(bytes), sl.grain_pages());
  std::uint32_t& ext = sl.extent(index);
  if (ext >= need) return true;
  ext += static_cast<std::uint32_t>(move_in(part, slot, index, ext, need));
  if (dirty != nullptr) *dirty = std::uint64_t{ext} * kPage;
  if (ext >= need) return true;
  refresh_capacity(false);
  apply_give_backs(false);  // as chunk_alloc, before the fresh charge
  for (int pass = 0; pass < 2; ++pass) {
    const Charge r = budget_.charge(part, (need - ext) * kPage);
    if (r == Charge::kOk) {
      charged_fresh(part, slot, index, ext, need);
      ext = static_cast<std::uint32_t>(need);
      return true;
    }
    if (pass == 1 || purge((need - ext) * kPage, r == Charge::kNodeFull ? part : -1) == 0) break;
  }
  return false;
}

void Heap::charged_fresh(int part, int slot, std::uint64_t index, std::uint64_t have, std::uint64_t need) {
  Slot& sl = part_[part].slots[slot];
  const std::uint64_t bytes = (need - have) * kPage;
  sl.mapped_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (sl.limit_owed.load(std::memory_order_relaxed) != 0) note_refault(part, sl, bytes);
  exchange(part, slot, bytes);
  // Slabs are populated by refill, which knows whether their class is busy.
  if (slot == kSlabSlot || opt_.populate == Populate::kNone) return;
  std::uint64_t fill = bytes;
  if (opt_.populate == Populate::kAuto) {
    // As far as the free limit gave this node's pages back within its window: the program is
    // rebuilding in other sizes what it just freed (rss_budget's tables after its cache), and
    // will write these pages as it wrote those. They come back in one call instead of a fault
    // each, and RSS goes no higher than it was before the give-back.
    // And only for a class whose chunks the program writes through (a probe's residency says so):
    // a dense give-back of sort buffers says nothing of the blocks written in part that follow
    // (insert_phases at --writes lines held 1.29-1.79x of none's peak when it did).
    FreeLimit& limit = part_[part].free_limit;
    char* chunk = sl.address(index);
    const bool credit = limit.has_recent();
    fill = sl.written.populate(chunk, need * kPage, have == 0, credit,
                               [this](char* p, std::uint64_t n) { return os_->resident_bytes(p, n); })
               ? limit.take_recent(bytes, tick(), opt_) / kPage * kPage
               : 0;
  }
  if (fill != 0) populate(sl.address(index) + have * kPage, fill);
}

void Heap::populate(char* p, std::uint64_t bytes) {
  if (populate_off_.load(std::memory_order_relaxed)) return;
  // The allocation it serves succeeds either way: a refusal must not leave its errno behind.
  const int saved_errno = errno;
  if (!os_->populate(p, bytes) && errno != ENOMEM && errno != EAGAIN && errno != EINTR)
    populate_off_.store(true, std::memory_order_relaxed);
  errno = saved_errno;
}

std::uint64_t Heap::move_in(int part, int slot, std::uint64_t index, std::uint64_t have, std::uint64_t need) {
  // A move costs a system call and a TLB shootdown (~5 us here) whatever its size, a fault and a
  // zeroed page ~1.4 us per page: below 16 pages faulting is cheaper.
  if (need - have < kMoveMinPages || opt_.move_pieces <= 0 || thp() || moves_off_.load(std::memory_order_relaxed))
    return 0;
  Slot& dst = part_[part].slots[slot];
  NodePart& np = part_[part];
  const std::uint64_t start = have;
  const std::uint32_t now = tick();
  int tried[kMoveSources];
  for (int source = 0; source < kMoveSources && need - have >= kMoveMinPages; ++source) {
    // The Slot with the most free resident bytes: the longest runs, the fewest calls.
    int from = -1;
    std::uint64_t most = kMoveMinPages * kPage - 1;
    for (int s = 0; s < nslots_; ++s) {
      bool seen = s == slot;
      for (int t = 0; t < source; ++t) seen = seen || tried[t] == s;
      const std::uint64_t b = seen ? 0 : np.slots[s].free_mapped_bytes();
      if (b > most) {
        most = b;
        from = s;
      }
    }
    if (from < 0) break;
    tried[source] = from;
    Slot& src = np.slots[from];
    // Idle pages first, as the exchange takes; then young ones only as far as the class holds more
    // free bytes than it has in use (a structure freed): a class in steady churn reuses the chunks
    // it has just freed, and taking them made it fault them again (orc_scan's steady phase lost a
    // third of its speed, docs/benchmarks.md "Several moved runs per chunk").
    for (int young = opt_.exchange_ms > 0 ? 0 : 1; young < 2 && need - have >= kMoveMinPages; ++young) {
      std::uint64_t want = (need - have) * kPage;
      if (young) {
        const std::uint64_t free = src.free_mapped_bytes(), in_use = src.in_use_bytes.load(std::memory_order_relaxed);
        const std::uint64_t spare = free > in_use ? free - in_use : 0;
        if (spare < kMoveMinPages * kPage) break;
        if (want > spare) want = spare;
      }
      PurgeRun runs[kMoveRuns];
      const int n = src.purge_begin(runs, kMoveRuns, want, !young, now - static_cast<std::uint32_t>(opt_.exchange_ms));
      have += move_runs(src, runs, n, dst, index, have, need);
    }
    if (moves_off_.load(std::memory_order_relaxed)) break;
  }
  return have - start;
}

std::uint64_t Heap::move_runs(Slot& src, const PurgeRun* runs, int n, Slot& dst, std::uint64_t index,
                              std::uint64_t have, std::uint64_t need) {
  const std::uint64_t start = have;
  for (int r = 0; r < n; ++r) {
    const PurgeRun& run = runs[r];
    // One mremap cannot span mappings: only the run's part after its last chunk holding a moved
    // piece can go. Its last bytes go, so that what stays is still each chunk's first pages.
    const std::int64_t last = src.last_moved(run.first, run.count);
    const std::uint64_t skip = last < 0 ? 0 : (static_cast<std::uint64_t>(last) + 1 - run.first) * src.chunk();
    std::uint64_t bytes = run.bytes > skip ? run.bytes - skip : 0;
    if (bytes > (need - have) * kPage) bytes = (need - have) * kPage;
    std::uint64_t kept = run.bytes;
    if (bytes >= kMoveMinPages * kPage && dst.pieces(index) < Slot::kMaxPieces &&
        !moves_off_.load(std::memory_order_relaxed) && take_piece()) {
      if (os_->move_pages(src.address(run.first) + (run.bytes - bytes), dst.address(index) + have * kPage, bytes)) {
        kept = run.bytes - bytes;
        have += bytes / kPage;
        dst.add_piece(index);
        src.mapped_bytes.fetch_sub(bytes, std::memory_order_relaxed);
        dst.mapped_bytes.fetch_add(bytes, std::memory_order_relaxed);
        counters_.moved_bytes.fetch_add(bytes, std::memory_order_relaxed);
      } else {
        // The kernel may have unmapped the destination before refusing: Linux 6.1 (the lab's)
        // unmaps the target of MREMAP_FIXED first, then refuses a source that spans two mappings
        // (EFAULT; 6.18 moves across them), and a range remap_fresh bound again stays a mapping
        // of its own on a multi-node 6.1 kernel. The chunk is handed out next and written (issue
        // 41's segfault): its range gets a fresh mapping back, or numap stops, naming why.
        char* to = dst.address(index) + have * kPage;
        if (!remap_fresh(part_of_chunk(to), to, bytes))
          fatal("a refused mremap left a chunk unmapped and mmap could not map it again");
        moved_pieces_.fetch_sub(1, std::memory_order_relaxed);
        moves_off_.store(true, std::memory_order_relaxed);
      }
    }
    src.move_done(run, kept);
  }
  return have - start;
}

bool Heap::discard_run(int part, Slot& sl, std::uint64_t first, std::uint64_t count, std::uint64_t bytes) {
  char* p = sl.address(first);
  // The run's chunks are the caller's (purged or being freed): their piece counts are stable.
  if (!sl.any_moved(first, count) || !remap_fresh(part, p, bytes)) return os_->advise_free(p, bytes);
  moved_pieces_.fetch_sub(static_cast<std::int64_t>(sl.take_moved(first, count)), std::memory_order_relaxed);
  return true;
}

bool Heap::remap_fresh(int part, char* p, std::uint64_t bytes) {
  if (!os_->replace(p, bytes)) return false;
  // The arena's advice and binding (init), so the fresh mapping merges with its neighbours.
  if (!thp()) os_->advise_huge(p, bytes, false);
  if (numa_) bind_part(p, bytes, part);
  return true;
}

}  // namespace numap
