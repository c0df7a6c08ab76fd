// Layer 4b, allocations above the largest page class ("huge", 1 GiB by default), and page-class
// requests no single node can hold: each is its own mapping, recorded in a fixed open-addressing
// table so free and malloc_usable_size can find its size. A mapping may be split across nodes
// (pieces, each bound to its node and charged there): the head entry is keyed by its address,
// every further piece by its own start, flagged so that it is never taken for an allocation.
// Rare by construction (at most a few per second in any sane program), so this is the one path
// that calls mmap and munmap per allocation; everything up to the largest class reuses address
// ranges from the per-class free bitmaps and never unmaps.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocators/numap/lock.h"

namespace numap {

struct HugePiece {
  std::uint64_t bytes;  // consecutive: piece k starts where piece k-1 ends
  std::uint32_t node;   // partition charged for it
};

class HugeTable {
 public:
  static constexpr std::size_t kEntries = 16384;
  static std::size_t metadata_bytes() { return kEntries * sizeof(Entry); }
  void init(void* meta) { entries_ = static_cast<Entry*>(meta); }

  // All pieces or none (false: the table is full).
  bool insert(void* p, const HugePiece* pieces, int count);
  // Total bytes of the allocation starting at p, or 0 when p is not one.
  std::uint64_t find(const void* p);
  // Removes the allocation at p; writes its pieces (up to max) and returns how many (0: none).
  int erase(const void* p, HugePiece* out, int max);

  Lock lock;

 private:
  struct Entry {
    std::uintptr_t addr;   // 0 empty, 1 deleted
    std::uint64_t bytes : 47;
    std::uint64_t node : 15;
    std::uint64_t more : 1;   // another piece follows at addr + bytes
    std::uint64_t piece : 1;  // not the head: never an allocation's address
  };
  std::size_t probe(std::uintptr_t a) const { return (a >> 12) * 0x9E3779B97F4A7C15ull >> 50; }
  Entry* lookup(std::uintptr_t a);  // under the lock
  Entry* vacant(std::uintptr_t a);  // under the lock; null when full
  Entry* entries_ = nullptr;
};

}  // namespace numap
