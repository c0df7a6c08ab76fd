#include "allocators/numap/large.h"

namespace numap {

bool HugeTable::insert(void* p, std::uint64_t bytes, std::uint32_t node) {
  LockGuard g(lock);
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  std::size_t h = probe(a) % kEntries;
  for (std::size_t k = 0; k < kEntries; ++k, h = (h + 1) % kEntries) {
    if (entries_[h].addr <= 1) {
      entries_[h].addr = a;
      entries_[h].bytes = bytes;
      entries_[h].node = node;
      return true;
    }
  }
  return false;
}

std::uint64_t HugeTable::find(const void* p, std::uint32_t* node) {
  LockGuard g(lock);
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  std::size_t h = probe(a) % kEntries;
  for (std::size_t k = 0; k < kEntries && entries_[h].addr != 0; ++k, h = (h + 1) % kEntries) {
    if (entries_[h].addr == a) {
      if (node != nullptr) *node = static_cast<std::uint32_t>(entries_[h].node);
      return entries_[h].bytes;
    }
  }
  return 0;
}

std::uint64_t HugeTable::erase(const void* p, std::uint32_t* node) {
  LockGuard g(lock);
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  std::size_t h = probe(a) % kEntries;
  for (std::size_t k = 0; k < kEntries && entries_[h].addr != 0; ++k, h = (h + 1) % kEntries) {
    if (entries_[h].addr == a) {
      entries_[h].addr = 1;
      *node = static_cast<std::uint32_t>(entries_[h].node);
      return entries_[h].bytes;
    }
  }
  return 0;
}

}  // namespace numap
