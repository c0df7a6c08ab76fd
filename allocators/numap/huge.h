// The heap's huge allocations, one component: the table of live mappings (large.h, under its own
// lock) and how many there are, so that owns() answers for a foreign pointer without the table's
// lock while none is alive. Which nodes a mapping is charged to and how it is mapped and bound is
// the Heap's policy (heap_huge.cpp); this keeps what each mapping is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allocators/numap/large.h"

namespace numap {

class HugeAllocations {
 public:
  static std::size_t metadata_bytes() { return HugeTable::metadata_bytes(); }
  void init(void* meta) { table_.init(meta); }

  // Records the mapping at p made of `count` pieces; false (nothing recorded) when the table is full.
  bool add(void* p, const HugePiece* pieces, int count) {
    if (!table_.insert(p, pieces, count)) return false;
    live_.fetch_add(1, std::memory_order_relaxed);
    allocs_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // Forgets the mapping at p; writes its pieces (up to max) and returns how many (0: p is none).
  int remove(const void* p, HugePiece* out, int max) {
    const int count = table_.erase(p, out, max);
    if (count != 0) live_.fetch_sub(1, std::memory_order_relaxed);
    return count;
  }
  // Bytes of the mapping starting at p, 0 when p starts none.
  std::uint64_t size_of(const void* p) { return table_.find(p); }
  bool holds(const void* p) { return live_.load(std::memory_order_relaxed) != 0 && table_.find(p) != 0; }
  // Mappings made since init (numap_stats' allocs).
  std::uint64_t allocs() const { return allocs_.load(std::memory_order_relaxed); }
  Lock& lock() { return table_.lock; }

 private:
  HugeTable table_;
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> allocs_{0};
};

}  // namespace numap
