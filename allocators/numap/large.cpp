#include "allocators/numap/large.h"

namespace numap {

HugeTable::Entry* HugeTable::lookup(std::uintptr_t a) {
  std::size_t h = probe(a) % kEntries;
  for (std::size_t k = 0; k < kEntries && entries_[h].addr != 0; ++k, h = (h + 1) % kEntries)
    if (entries_[h].addr == a) return &entries_[h];
  return nullptr;
}

HugeTable::Entry* HugeTable::vacant(std::uintptr_t a) {
  std::size_t h = probe(a) % kEntries;
  for (std::size_t k = 0; k < kEntries; ++k, h = (h + 1) % kEntries)
    if (entries_[h].addr <= 1) return &entries_[h];
  return nullptr;
}

bool HugeTable::insert(void* p, const HugePiece* pieces, int count) {
  LockGuard g(lock);
  std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  for (int k = 0; k < count; ++k) {
    Entry* e = vacant(a);
    if (e == nullptr) {
      // Full: take back the pieces already entered.
      std::uintptr_t b = reinterpret_cast<std::uintptr_t>(p);
      for (int j = 0; j < k; ++j) {
        lookup(b)->addr = 1;
        b += pieces[j].bytes;
      }
      return false;
    }
    e->addr = a;
    e->bytes = pieces[k].bytes;
    e->node = pieces[k].node;
    e->more = k + 1 < count;
    e->piece = k != 0;
    a += pieces[k].bytes;
  }
  return true;
}

std::uint64_t HugeTable::find(const void* p) {
  LockGuard g(lock);
  std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  Entry* e = lookup(a);
  if (e == nullptr || e->piece) return 0;
  std::uint64_t total = 0;
  for (;;) {
    total += e->bytes;
    if (!e->more) return total;
    a += e->bytes;
    e = lookup(a);
    if (e == nullptr) return total;  // cannot happen: pieces are entered and removed together
  }
}

int HugeTable::erase(const void* p, HugePiece* out, int max) {
  LockGuard g(lock);
  std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  Entry* e = lookup(a);
  if (e == nullptr || e->piece) return 0;
  int n = 0;
  for (;;) {
    if (n < max) out[n] = HugePiece{e->bytes, static_cast<std::uint32_t>(e->node)};
    ++n;
    e->addr = 1;
    if (!e->more) break;
    a += e->bytes;
    e = lookup(a);
    if (e == nullptr) break;
  }
  return n < max ? n : max;
}

}  // namespace numap
