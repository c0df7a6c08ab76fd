// Whether a class's new memory is populated under NUMAP_POPULATE=auto (issue 41): only where the
// program's own writes show it writes that class's blocks through. The kernel's residency is the
// evidence, and it says "written" only for memory numap neither populated nor moved pages into:
// a populated chunk, or one reused with its pages still resident, is resident whatever the
// program writes. So a probe is a block of the class taken with no page resident and left to its
// faults; it is read (one mincore) when the class takes its kRipeAfter-th block after it, by then
// handed to the program and written if the program writes such blocks through: written through
// when every page of the bytes the block serves is resident (a request's pages, a slab's objects). While the verdict
// is yes, one block in kProbeEvery is left to its faults as the next probe, so a class whose use
// changes is noticed. One mechanism for slabs of objects above a page (Central) and page chunks
// (Slot): both are "blocks" here.
#pragma once

#include <atomic>
#include <cstdint>

namespace numap {

struct WriteProbe {
  static constexpr std::uint32_t kProbeEvery = 8;
  static constexpr std::uint32_t kRipeAfter = 2;

  // For a block `bytes` long at `block` that the class takes now: whether to populate it, given
  // that the caller `wants` to (its own rule: a busy class, credit from the free limit). `untouched`:
  // no page of it is resident (it may become the probe). `resident(p, n)` counts resident bytes;
  // it is asked only when the caller wants to populate and a probe is ripe. Safe to call from
  // several threads at once (all relaxed atomics; a lost race loses a probe, never a block).
  template <class Resident>
  bool populate(char* block, std::uint64_t bytes, bool untouched, bool wants, Resident resident) {
    const std::uint32_t n = taken_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (wants) read_ripe(n, resident);
    const bool fill = wants && writes_through_.load(std::memory_order_relaxed) && n % kProbeEvery != 0;
    if (!fill && untouched && probe_.load(std::memory_order_relaxed) == nullptr) {
      probe_bytes_.store(bytes, std::memory_order_relaxed);
      probe_at_.store(n, std::memory_order_relaxed);
      probe_.store(block, std::memory_order_relaxed);
    }
    return fill;
  }
  bool writes_through() const { return writes_through_.load(std::memory_order_relaxed); }

 private:
  template <class Resident>
  void read_ripe(std::uint32_t n, Resident resident) {
    char* probe = probe_.load(std::memory_order_relaxed);
    if (probe == nullptr || n - probe_at_.load(std::memory_order_relaxed) < kRipeAfter) return;
    const std::uint64_t bytes = probe_bytes_.load(std::memory_order_relaxed);
    if (!probe_.compare_exchange_strong(probe, nullptr, std::memory_order_relaxed)) return;
    writes_through_.store(resident(probe, bytes) >= bytes, std::memory_order_relaxed);
  }

  // All zero bytes is the initial state (a Slot is zeroed metadata until its first use).
  std::atomic<char*> probe_{nullptr};
  std::atomic<std::uint64_t> probe_bytes_{0};
  std::atomic<std::uint32_t> probe_at_{0}, taken_{0};
  std::atomic<bool> writes_through_{false};
};

}  // namespace numap
