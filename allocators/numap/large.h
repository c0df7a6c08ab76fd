// Layer 4b, allocations above the largest page class ("huge", 1 GiB by default): each is its own
// mapping, recorded in a fixed open-addressing table so free and malloc_usable_size can find its
// size. Rare by construction (at most a few per second in any sane program), so this is the one
// path that calls mmap and munmap per allocation; everything up to the largest class reuses
// address ranges from the per-class free bitmaps and never unmaps.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocators/numap/lock.h"

namespace numap {

class HugeTable {
 public:
  static constexpr std::size_t kEntries = 16384;
  static std::size_t metadata_bytes() { return kEntries * sizeof(Entry); }
  void init(void* meta) { entries_ = static_cast<Entry*>(meta); }

  bool insert(void* p, std::uint64_t bytes, std::uint32_t node);
  // Size and node of p, or 0 when p is not a huge allocation.
  std::uint64_t find(const void* p, std::uint32_t* node = nullptr);
  std::uint64_t erase(const void* p, std::uint32_t* node);

  Lock lock;

 private:
  struct Entry {
    std::uintptr_t addr;   // 0 empty, 1 deleted
    std::uint64_t bytes : 48;
    std::uint64_t node : 16;
  };
  std::size_t probe(std::uintptr_t a) const { return (a >> 12) * 0x9E3779B97F4A7C15ull >> 50; }
  Entry* entries_ = nullptr;
};

}  // namespace numap
