// One (node, small class)'s handoff (issue 45): whole batches a thread cache's overflow hands to
// the next refill without the Central's lock. A producer-consumer burst larger than the transfer
// cache otherwise put every object back into its slab (about 65 instructions each) and the
// producer walked the slabs again, both under the Central lock the other side wanted.
//
// A stack of batches (Treiber's), bounded in bytes (NUMAP_HANDOFF_BYTES per node and class):
//  - push: any thread, no lock: one compare-exchange for a whole chain of batches;
//  - take: one thread at a time, behind a try-lock (a refill that finds another taker there goes
//    to the Central instead: nobody waits), one compare-exchange for several batches;
//  - drain (purge, decay, an idle class, a stale handoff): the same lock, waited for, then one exchange.
// Its clock (age): batches no refill takes for NUMAP_HANDOFF_MS go back to their slabs (Heap::
// handoff_put, drain_stale_handoffs): a consumer freeing what nobody allocates again would
// otherwise keep up to the bound resident per class until a decay pass.
// Why ABA cannot happen: the classic failure is a pop that read top A and A's next B, while
// others popped A and B and pushed A again, so its compare-exchange (A -> B) succeeds with B in
// use. Here only the holder of take_lock_ removes batches, so between its read of A and its
// compare-exchange A stays in the stack (nobody else can take it out, hence nobody can push it
// again), and a batch's links below the top never change while it is in the stack (pushes only
// add above it). If the top is still A, what lies below it is what was read. A push depends on
// the top's identity only (it writes the old top below its own batch), which is ABA-safe.
//
// A batch is a null-terminated list of objects (each object's first word links the next, as in a
// thread cache's list); its header lives in the second words of its first three objects (every
// small object is at least 16 bytes): the next batch of the stack, its length, its last object.
#pragma once

#include <atomic>
#include <cstdint>

#include "allocators/numap/lock.h"

namespace numap {

class Handoff {
 public:
  static constexpr std::uint32_t kMinBatch = 3;  // the header's three objects

  static void*& link(void* o) { return *static_cast<void**>(o); }
  // Header word k (0: next batch, 1: length, 2: last object) of the batch headed by b.
  static void*& header(void* b, int k) {
    void* o = b;
    for (int i = 0; i < k; ++i) o = link(o);
    return static_cast<void**>(o)[1];
  }
  static std::uint32_t length(void* b) {
    return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(header(b, 1)));
  }
  // Writes batch b's header (n >= kMinBatch objects from b to last) and ends its list at last.
  static void seal(void* b, std::uint32_t n, void* last) {
    link(last) = nullptr;
    header(b, 1) = reinterpret_cast<void*>(static_cast<std::uintptr_t>(n));
    header(b, 2) = last;
  }

  // Reserves `bytes` of the bound for a push; false (nothing reserved) when they do not fit.
  bool reserve(std::uint64_t bytes, std::uint64_t bound) {
    if (bytes_.load(std::memory_order_relaxed) + bytes > bound) return false;
    if (bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes <= bound) return true;
    bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  // Pushes the chain first..last (batches linked by header word 0; last's is overwritten) whose
  // bytes reserve() granted. True when it started the handoff's clock (none was running: the
  // first push since a drain), so the caller can ask for a look once the age has passed.
  bool push(void* first, void* last, std::uint32_t now) {
    void* top = head_.load(std::memory_order_relaxed);
    do {
      header(last, 0) = top;
    } while (!head_.compare_exchange_weak(top, first, std::memory_order_acq_rel, std::memory_order_relaxed));
    if (since_.load(std::memory_order_relaxed) != 0) return false;
    since_.store(now | 1, std::memory_order_relaxed);  // never 0 (0: no clock); odd ms do not matter
    return true;
  }

  // Takes batches from the top while fewer than `want` objects are taken and the next batch still
  // fits within `most`, linked into one null-terminated list (*head); returns how many objects
  // (0: none parked, the first too long, or another thread taking).
  // A take restarts the clock at now() (read only then): a producer is there, and what it left is
  // young again.
  template <class Now>
  std::uint32_t take(void** head, std::uint32_t want, std::uint32_t most, std::uint32_t size, Now now) {
    if (head_.load(std::memory_order_relaxed) == nullptr || !take_lock_.try_lock()) return 0;
    void* top = head_.load(std::memory_order_acquire);
    void* below;
    std::uint32_t got, batches;
    for (;;) {
      got = batches = 0;
      below = top;
      while (below != nullptr && got < want && got + length(below) <= most) {
        got += length(below);
        ++batches;
        below = header(below, 0);
      }
      if (got == 0) break;
      // Fails only when a push put batches above top (top is reloaded): what lies below is fixed.
      if (head_.compare_exchange_weak(top, below, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    if (got != 0) {
      for (void* b = top; b != below;) {
        void* next = header(b, 0);
        link(header(b, 2)) = next == below ? nullptr : next;
        b = next;
      }
      bytes_.fetch_sub(std::uint64_t{got} * size, std::memory_order_relaxed);
      taken_.fetch_add(batches, std::memory_order_relaxed);
      since_.store(now() | 1, std::memory_order_relaxed);
      *head = top;
    }
    take_lock_.unlock();
    return got;
  }

  // Every batch out: fn(head, length) for each; returns how many objects.
  template <class Fn>
  std::uint64_t drain(std::uint32_t size, Fn fn) {
    if (head_.load(std::memory_order_relaxed) == nullptr) return 0;
    take_lock_.lock();
    void* b = head_.exchange(nullptr, std::memory_order_acq_rel);
    since_.store(0, std::memory_order_relaxed);  // a push after the exchange restarts it (or age() does)
    take_lock_.unlock();
    std::uint64_t objects = 0;
    while (b != nullptr) {
      void* next = header(b, 0);
      const std::uint32_t n = length(b);
      objects += n;
      fn(b, n);  // may write the batch's objects: next was read first
      b = next;
    }
    bytes_.fetch_sub(objects * size, std::memory_order_relaxed);
    return objects;
  }

  // How long batches have waited with no take: kEmpty, kYoung (less than `limit` ms since the
  // first push after a drain, or since the last take) or kStale. Batches found without a clock (a
  // push that raced a drain's reset) start it now: at most one look late.
  enum Age { kEmpty, kYoung, kStale };
  Age age(std::uint32_t now, std::uint32_t limit) {
    if (head_.load(std::memory_order_relaxed) == nullptr) return kEmpty;
    const std::uint32_t since = since_.load(std::memory_order_relaxed);
    if (since == 0) {
      since_.store(now | 1, std::memory_order_relaxed);
      return kYoung;
    }
    // Signed: a take may stamp a later time than the caller's `now`, read before it.
    return static_cast<std::int32_t>((now | 1) - since) >= static_cast<std::int32_t>(limit) ? kStale : kYoung;
  }
  // In a forked child (the only thread, holding take_lock_): a push in flight in another thread
  // at the fork had reserved bytes it never pushed; the bound counts what is there.
  void recount(std::uint32_t size) {
    std::uint64_t objects = 0;
    for (void* b = head_.load(std::memory_order_relaxed); b != nullptr; b = header(b, 0)) objects += length(b);
    bytes_.store(objects * size, std::memory_order_relaxed);
  }

  std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // Batches refills took whole (numap_stats' handoff_batches).
  std::uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }
  Lock& lock() { return take_lock_; }

 private:
  std::atomic<void*> head_{nullptr};
  // The clock (ms, the heap's tick, odd: 0 is none), beside head_: pushes and takes touch that line anyway.
  std::atomic<std::uint32_t> since_{0};
  std::atomic<std::uint64_t> bytes_{0};
  Lock take_lock_;
  std::atomic<std::uint64_t> taken_{0};
};

}  // namespace numap
