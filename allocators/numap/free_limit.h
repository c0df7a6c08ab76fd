// One node's free limit, one component (in its NodePart): when the free resident bytes given back
// to the node's Slots are checked against NUMAP_FREE_PERCENT of what the node holds in use, by one
// thread at a time, and how far the allowance backs off where the limit's give-backs were charged
// again, and the check queued by free() for the thread that applies it (the decay thread, or
// later allocation slow paths). Advising the pages away is the Heap's (limit_free, heap_reclaim.cpp).
#pragma once

#include <atomic>
#include <cstdint>

#include "allocators/numap/options.h"

namespace numap {

class FreeLimit {
 public:
  // A check queued by free() (queue, take): none, one free() queued, or what a bounded pass left.
  enum Queued : std::uint32_t { kNone = 0, kFresh = 1, kRest = 2 };
  static constexpr std::uint64_t kCheckBytes = 1 << 20;

  // `bytes` of resident chunks went back to the node's Slots, which have `mapped` bytes charged:
  // true (a check is due) every kCheckBytes or 1/16 of what the node has charged, whichever is
  // more. The share keeps a release of gigabytes to a few dozen passes (each scans the node's
  // Slots) instead of one per MiB, and lets more neighbouring chunks be free by the time a pass
  // advises them (fewer, longer runs: hash_build's release took 2,467 madvise calls instead of
  // 2,667 with 1/64).
  bool freed(std::uint64_t bytes, std::uint64_t mapped) {
    const std::uint64_t share = mapped / 16;
    const std::uint64_t every = share > kCheckBytes ? share : kCheckBytes;
    if (freed_since_check_.fetch_add(bytes, std::memory_order_relaxed) + bytes < every) return false;
    freed_since_check_.store(0, std::memory_order_relaxed);
    return true;
  }
  // One thread applies the limit at a time: false when another is, and the others go on freeing.
  // A check that finds it busy is not lost: it leaves a request (pending_) that the applying
  // thread honours before it leaves (again()). Dropped checks left a release's last hundreds of
  // MiB resident at its end whenever the other thread's frees came due while one thread was
  // giving pages back (orc_scan's drain, 1 cell in 10). pending_ is stored before applying_ is
  // tried, and read after it is released (sequentially consistent, both sides), so either the
  // applying thread sees the request or the requester gets the limit itself.
  bool enter() {
    pending_.store(1);
    return applying_.exchange(1) == 0;
  }
  // The applying thread, before it reads the node's figures: the requests so far are its own.
  void begin() { pending_.store(0); }
  // Releases the limit; true when a check came due meanwhile and this thread took the limit again
  // (the caller applies it once more).
  bool again() {
    applying_.store(0);
    return pending_.load() != 0 && applying_.exchange(1) == 0;
  }
  // A check came due on the free path (NUMAP_PURGE_DELAY_MS >= 0): it is queued, not applied there.
  // True when none was queued (the caller asks for a pass); false when one is, and the pass to come
  // sees these bytes too: a queued check carries no amount, the pass reads the node's figures when
  // it runs, so checks that come due meanwhile are not counted twice.
  bool queue(std::uint32_t now) {
    if (queued_.load(std::memory_order_relaxed) != 0) return false;
    queued_at_.store(now, std::memory_order_relaxed);
    return queued_.exchange(kFresh) == kNone;
  }
  std::uint32_t queued() const { return queued_.load(); }  // a Queued
  // The tick the queued check came due at (meaningful while queued()).
  std::uint32_t queued_at() const { return queued_at_.load(std::memory_order_relaxed); }
  // The applier takes the queued check before it reads the node's figures (sequentially consistent
  // with queue(): a check that comes due after this is queued anew); what was queued.
  Queued take() { return static_cast<Queued>(queued_.exchange(kNone)); }
  // A pass bounded per call (a slow path) stopped with the excess not all given back: the rest
  // stays queued, due at once (its delay was waited).
  void requeue() { queued_.store(kRest); }
  // In a forked child: the thread that was applying it is gone (a queued check stays queued: the
  // child's slow paths apply it).
  void forget_applier() {
    applying_.store(0, std::memory_order_relaxed);
    pending_.store(0, std::memory_order_relaxed);
  }

  // The free bytes the node may keep now (tick `now`), holding `free` free and `in_use` in use,
  // after the back-off below; called by the thread inside enter(). *new_window: a window ended,
  // and the Slots' debts (Slot::limit_owed) are to be forgotten with its counts.
  std::uint64_t allowance(std::uint32_t now, std::uint64_t free, std::uint64_t in_use, const Options& opt,
                          bool* new_window);
  // What a pass of the limit gave back of page chunks (page classes' Slots; slabs apart, see gave):
  // their charged bytes and how many of those were resident when it did (the kernel's answer,
  // Os::resident_bytes). A chunk's charged pages are resident only where the program wrote them or
  // numap populated or moved them in.
  // The residency is sampled: the first kSampleBytes of a pass's page-chunk runs (one mincore of
  // 1024 pages), so that the limit's discards, a system call per run, do not each take a second.
  struct Given {
    std::uint64_t chunk_bytes = 0, sampled = 0, resident = 0;
  };
  static constexpr std::uint64_t kSampleBytes = 4 << 20;
  // Bytes the limit advised away (at tick `now`), of which `chunks` in page chunks, and bytes of
  // them the same classes charged again. Only a give-back whose page chunks were nearly all
  // resident (kDense, in the sample) is remembered for take_recent, as many bytes as were resident: the program
  // writes the chunks it allocates whole, and will write the ones it builds next as it wrote those.
  // One whose page chunks were not (blocks written in part: a buffer reserved ahead, a vector grown
  // by doubling, a header written in a 256 KiB block) forgets what was remembered: populating their
  // charged pages made resident what the program never writes (issue 41: 136 MiB where faults alone
  // held 50). Slabs say nothing either way: every page of a slab of small objects is written when
  // each object's first bytes are, whatever the program does with its larger blocks (orc_scan with
  // the first 256 bytes of each block written gave back dense slabs beside sparse buffers).
  void gave(std::uint64_t bytes, const Given& chunks, std::uint32_t now) {
    given_.fetch_add(bytes, std::memory_order_relaxed);
    if (chunks.sampled == 0) return;
    if (chunks.resident * kDenseOf < chunks.sampled * kDense) {
      recent_.store(0, std::memory_order_relaxed);
      return;
    }
    recent_tick_.store(now, std::memory_order_relaxed);
    // The page chunks' bytes at the sample's share resident (at least 7/8 of them).
    recent_.fetch_add(chunks.chunk_bytes / chunks.sampled * chunks.resident +
                          chunks.chunk_bytes % chunks.sampled * chunks.resident / chunks.sampled,
                      std::memory_order_relaxed);
  }
  // A give-back counts as written through when kDense / kDenseOf of its bytes were resident.
  static constexpr std::uint64_t kDense = 7, kDenseOf = 8;
  // The limit's window: DECAY_MS, or 1 s when decay is off.
  static std::uint32_t window_ms(const Options& opt) {
    return static_cast<std::uint32_t>(opt.decay_ms > 0 ? opt.decay_ms : 1000);
  }
  // Whether the limit gave back pages that no fresh charge has taken since (one relaxed load, so
  // that a fresh charge reads the clock only then).
  bool has_recent() const { return recent_.load(std::memory_order_relaxed) != 0; }
  // Up to `bytes` of what the limit gave back within the window before tick `now`, taken (each
  // byte once; all of it is forgotten once a window passes with no give-back).
  std::uint64_t take_recent(std::uint64_t bytes, std::uint32_t now, const Options& opt) {
    std::uint64_t have = recent_.load(std::memory_order_relaxed);
    if (have == 0) return 0;
    if (now - recent_tick_.load(std::memory_order_relaxed) > window_ms(opt)) {
      recent_.store(0, std::memory_order_relaxed);
      return 0;
    }
    std::uint64_t take;
    do {
      if (have == 0) return 0;
      take = have < bytes ? have : bytes;
    } while (!recent_.compare_exchange_weak(have, have - take, std::memory_order_relaxed));
    return take;
  }
  void refaulted(std::uint64_t bytes) { refaulted_.fetch_add(bytes, std::memory_order_relaxed); }

 private:
  static constexpr std::uint32_t kMaxScale = 64;
  static constexpr std::uint32_t kMaxFloorScale = 4;  // FREE_FLOOR backs off at most 4x (32 MiB)

  std::atomic<std::uint64_t> freed_since_check_{0};
  std::atomic<std::uint32_t> applying_{0};
  std::atomic<std::uint32_t> pending_{0};  // a check came due while another thread was applying
  std::atomic<std::uint32_t> queued_{0};   // a check came due on the free path, not applied yet
  std::atomic<std::uint32_t> queued_at_{0};
  // The back-off: the allowance is multiplied by scale_ (1, 2, 4 .. kMaxScale), doubled when,
  // within a window of DECAY_MS from window_, a quarter of what the limit gave back (given_) was
  // charged again by the same classes (refaulted_: see Slot::limit_owed); at the end of a window
  // without one, lowered to the largest scale its checks needed (need_) and halved once per
  // further DECAY_MS. Written by the thread inside enter().
  std::atomic<std::uint32_t> scale_{1}, window_{0}, need_{1};
  std::atomic<std::uint64_t> given_{0}, refaulted_{0};
  // What the limit gave back lately, resident and written through (gave), that no fresh charge
  // has populated since (take_recent), and the tick of its latest give-back.
  std::atomic<std::uint64_t> recent_{0};
  std::atomic<std::uint32_t> recent_tick_{0};
};

}  // namespace numap
