// The recording preload's live blocks: address -> (object id, requested size). It must not
// allocate through the traced allocator and must not serialise the program's threads, so it is
// sharded (kShards shards chosen by a hash of the address, each an open-addressing table with
// linear probing under its own small spinlock) and its storage is mmap'ed: a shard starts at
// kInitialSlots slots on its first insert and doubles (mmap, rehash, munmap) under its lock when
// it is half full. Removal shifts the following entries back (no tombstones), so a table that
// churns stays as short to probe as one that only grows.
//
// An AddressTable is constant-initialised (`constinit`: a static one is ready before any code runs). Address 0 is
// never stored (it is the empty slot).
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace allocmark::trace {

class AddressTable {
 public:
  static constexpr std::size_t kShards = 256;
  static constexpr std::size_t kInitialSlots = 512;

  struct Entry {
    uintptr_t addr;  // 0: empty
    uint64_t id;
    uint64_t size;
  };

  // Stores addr (not 0). An address already there is overwritten (its block was freed where the
  // recorder did not see it). False only when the shard could not grow (mmap failed).
  bool insert(uintptr_t addr, uint64_t id, uint64_t size) {
    const uint64_t h = mix(addr);
    Shard& s = shards_[h & (kShards - 1)];
    Lock lock(s);
    if ((s.used + 1) * 2 > s.capacity && !grow(s)) return false;
    const std::size_t mask = s.capacity - 1;
    for (std::size_t i = slot_of(h, mask);; i = (i + 1) & mask) {
      Entry& e = s.slots[i];
      if (e.addr == 0) {
        e = Entry{addr, id, size};
        ++s.used;
        return true;
      }
      if (e.addr == addr) {
        e.id = id;
        e.size = size;
        return true;
      }
    }
  }

  // Takes addr out; false (out untouched) when it is not there.
  bool remove(uintptr_t addr, Entry& out) {
    const uint64_t h = mix(addr);
    Shard& s = shards_[h & (kShards - 1)];
    Lock lock(s);
    if (s.used == 0) return false;
    const std::size_t mask = s.capacity - 1;
    std::size_t i = slot_of(h, mask);
    for (;; i = (i + 1) & mask) {
      if (s.slots[i].addr == 0) return false;
      if (s.slots[i].addr == addr) break;
    }
    out = s.slots[i];
    // Backward shift: an entry after the hole moves into it unless its home slot lies
    // (cyclically) after the hole and at or before the entry itself.
    for (std::size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
      Entry& e = s.slots[j];
      if (e.addr == 0) break;
      const std::size_t home = slot_of(mix(e.addr), mask);
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      s.slots[i] = e;
      i = j;
    }
    s.slots[i].addr = 0;
    --s.used;
    return true;
  }

  bool find(uintptr_t addr, Entry& out) {
    const uint64_t h = mix(addr);
    Shard& s = shards_[h & (kShards - 1)];
    Lock lock(s);
    if (s.used == 0) return false;
    const std::size_t mask = s.capacity - 1;
    for (std::size_t i = slot_of(h, mask);; i = (i + 1) & mask) {
      if (s.slots[i].addr == 0) return false;
      if (s.slots[i].addr == addr) {
        out = s.slots[i];
        return true;
      }
    }
  }

  // Entries in all shards (takes every shard's lock in turn: for tests and the end of a recording).
  std::size_t size() {
    std::size_t n = 0;
    for (Shard& s : shards_) {
      Lock lock(s);
      n += s.used;
    }
    return n;
  }

  // Gives the storage back (tests; the recorder keeps its table until the process ends).
  void release() {
    for (Shard& s : shards_) {
      Lock lock(s);
      if (s.slots) ::munmap(s.slots, s.capacity * sizeof(Entry));
      s.slots = nullptr;
      s.capacity = s.used = 0;
    }
  }

 private:
  struct alignas(64) Shard {
    std::atomic<bool> locked{false};
    Entry* slots = nullptr;
    std::size_t capacity = 0, used = 0;  // capacity: a power of two, 0 before the first insert
  };
  static_assert(sizeof(Shard) == 64, "one cache line a shard");

  struct Lock {
    explicit Lock(Shard& s) : s_(s) {
      while (s_.locked.exchange(true, std::memory_order_acquire))
        while (s_.locked.load(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        }
    }
    ~Lock() { s_.locked.store(false, std::memory_order_release); }
    Shard& s_;
  };

  // splitmix64's finaliser: the low bits pick the shard, the next ones the slot.
  static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }
  static std::size_t slot_of(uint64_t h, std::size_t mask) { return static_cast<std::size_t>(h >> 8) & mask; }

  static bool grow(Shard& s) {
    const std::size_t capacity = s.capacity ? s.capacity * 2 : kInitialSlots;
    void* mem = ::mmap(nullptr, capacity * sizeof(Entry), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return false;
    Entry* slots = static_cast<Entry*>(mem);  // zero-filled: every slot empty
    const std::size_t mask = capacity - 1;
    for (std::size_t k = 0; k < s.capacity; ++k) {
      const Entry& e = s.slots[k];
      if (e.addr == 0) continue;
      std::size_t i = slot_of(mix(e.addr), mask);
      while (slots[i].addr != 0) i = (i + 1) & mask;
      slots[i] = e;
    }
    if (s.slots) ::munmap(s.slots, s.capacity * sizeof(Entry));
    s.slots = slots;
    s.capacity = capacity;
    return true;
  }

  Shard shards_[kShards];
};

}  // namespace allocmark::trace
