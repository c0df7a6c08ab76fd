// Layer 3, page runs: one Slot per (node, page class), a fixed range of address space reserved up
// front (MAP_NORESERVE) cut into equal chunks, with two bitmaps: `alloc` (handed out, or being
// purged) and `mapped` (a free chunk whose pages may be resident), plus one-bit-per-word summaries
// so finding a free mapped chunk (reuse before touching new pages) or the lowest free chunk does
// not scan the whole bitmap. `extent[i]` is how many pages of chunk i may be resident: what was
// charged to the capacity for it; `freed_at[i]` when a free mapped chunk was last given back (the
// heap's millisecond tick), so decay can advise away only chunks idle longer than the decay time. A Slot makes no system call: purging hands runs out under the
// lock and takes them back after the caller's madvise, so the lock is never held across a syscall.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocators/numap/lock.h"
#include "allocators/numap/write_probe.h"

namespace numap {

// Division by a chunk size without a `div`: every chunk size is 2^shift x m with m in 1..8 (page
// classes are four per doubling, the slab 64 KiB), so i = ((off >> shift) x ceil(2^32 / m)) >> 32,
// exact for off below 2^40 (NUMAP_CLASS_SPAN's maximum): off >> shift < 2^28, and the rounding of
// the multiplier adds under 2^28 / 2^32 = 1/16 to a quotient whose fraction is at most 7/8
// (size_classes_test checks every class at the largest span).
struct ChunkDivider {
  std::uint32_t shift = 0;
  std::uint64_t mul = 0;
  static ChunkDivider for_chunk(std::uint64_t chunk) {
    ChunkDivider d;
    d.shift = static_cast<std::uint32_t>(__builtin_ctzll(chunk));
    const std::uint64_t m = chunk >> d.shift;
    d.mul = ((std::uint64_t{1} << 32) + m - 1) / m;
    return d;
  }
  std::uint64_t divide(std::uint64_t off) const { return ((off >> shift) * mul) >> 32; }
};

struct PurgeRun {
  std::uint32_t first;   // chunk index
  std::uint32_t count;   // chunks
  std::uint64_t bytes;   // charged (resident) bytes: the chunks' extents together
  std::uint64_t span;    // bytes to advise away from the first chunk's start: `bytes` unless the
                         // run spans chunks charged in part (purge_begin's `spans`)
  bool ok;               // set by the caller: the advice succeeded (else the pages stay charged)
};

class Slot {
 public:
  // `meta` must point to metadata_bytes(nchunks) zeroed bytes (lazily touched is fine: init
  // writes none of them, and the first take writes one word of `alloc`).
  static std::size_t metadata_bytes(std::uint64_t nchunks);
  // A Slot is all zero bytes until init (the heap leaves the Slots of fresh metadata pages
  // unconstructed and initialises each on its first use, so an unused class touches no page):
  // ready() is false until then and take() must not be called before.
  void init(char* base, std::uint64_t chunk, std::uint64_t nchunks, std::uint32_t grain_pages, void* meta);
  bool ready() const { return ready_.load(std::memory_order_acquire) != 0; }

  // Takes a free chunk, a mapped one if any (its extent tells how much is already charged);
  // -1 when the slot is full. Locks inside.
  std::int64_t take();
  // Takes a free mapped chunk only; -1 when there is none. Locks inside.
  std::int64_t take_mapped();
  // Returns chunk i at tick `now`; it stays mapped iff extent(i) > 0.
  void give(std::uint64_t i, std::uint32_t now);
  // Up to n chunks under one lock acquisition (thread caches' transfers): mapped ones first, then
  // fresh ones. Returns how many were written to out.
  int take_batch(std::uint64_t* out, int n, bool mapped_only);
  void give_batch(const std::uint64_t* idx, int n, std::uint32_t now);
  // Marks up to max_runs runs of free mapped chunks as being purged (taken) and clears their
  // mapped bits; returns how many runs. The caller advises them away, then calls purge_done.
  // With `aged`, only chunks given back at or before tick `freed_by` qualify (decay by age).
  // With `spans`, a run goes on past a chunk charged in part (its `span` covers the uncharged
  // pages between, which hold nothing: discarding them is free): one call for neighbouring free
  // chunks however much of each was written (a release of 60 KiB blocks in 64 KiB chunks made
  // one madvise per chunk). Without it (moves, which keep each chunk's first pages), a run ends
  // at such a chunk and every chunk but its last is whole.
  int purge_begin(PurgeRun* runs, int max_runs, std::uint64_t want_bytes, bool aged = false,
                  std::uint32_t freed_by = 0, bool spans = false);
  void purge_done(const PurgeRun* runs, int n);
  // After the last (run.bytes - kept) bytes of a purge_begin run were moved away: the run's chunks
  // are free again, each resident up to what is left of the first `kept` bytes (mapped iff any).
  void move_done(const PurgeRun& run, std::uint64_t kept);

  // Pieces of pages moved into chunk i from other Slots (Heap::move_in): each is a mapping of its
  // own until the chunk's pages are discarded by a fresh mapping. Counted by whoever holds the
  // chunk (a byte each, atomically: neighbouring chunks' counts share the word).
  static constexpr std::uint32_t kMaxPieces = 255;
  std::uint32_t pieces(std::uint64_t i) const { return __atomic_load_n(&pieces_[i], __ATOMIC_RELAXED); }
  bool moved(std::uint64_t i) const { return pieces(i) != 0; }
  void add_piece(std::uint64_t i) { __atomic_fetch_add(&pieces_[i], std::uint8_t{1}, __ATOMIC_RELAXED); }
  // The pieces of chunks first .. first + count - 1 together; clears their counts.
  std::uint64_t take_moved(std::uint64_t first, std::uint64_t count);
  bool any_moved(std::uint64_t first, std::uint64_t count) const { return last_moved(first, count) >= 0; }
  // The last of chunks first .. first + count - 1 that holds a moved piece; -1 when none does.
  std::int64_t last_moved(std::uint64_t first, std::uint64_t count) const;

  char* base() const { return base_; }
  std::uint64_t chunk() const { return chunk_; }
  std::uint64_t nchunks() const { return nchunks_; }
  std::uint32_t grain_pages() const { return grain_; }
  bool contains(const void* p) const {
    return static_cast<const char*>(p) >= base_ && static_cast<const char*>(p) < base_ + chunk_ * nchunks_;
  }
  std::uint64_t index_of(const void* p) const {
    return divider_.divide(static_cast<std::uint64_t>(static_cast<const char*>(p) - base_));
  }
  char* address(std::uint64_t i) const { return base_ + i * chunk_; }
  // Pages of chunk i that may be resident; owned by whoever holds the chunk.
  std::uint32_t& extent(std::uint64_t i) { return extent_[i]; }
  std::uint64_t free_mapped() const { return free_mapped_.load(std::memory_order_relaxed); }
  // Resident bytes (charged extents) of the free mapped chunks: what a purge of this slot could
  // give back now. Read racily by the heap's free limit.
  std::uint64_t free_mapped_bytes() const { return free_mapped_bytes_.load(std::memory_order_relaxed); }

  Lock lock;
  // Statistics (relaxed atomics; updated by the chunk's owner or under the lock).
  std::atomic<std::uint64_t> in_use_bytes{0}, mapped_bytes{0}, advised_bytes{0}, allocs{0}, frees{0};
  // Bytes the heap's free limit advised away here and the Slot has not charged again since.
  std::atomic<std::uint64_t> limit_owed{0};
  // Whether the program writes this class's chunks through (Heap::charged_fresh; issue 41).
  WriteProbe written;

 private:
  void refresh(std::uint64_t w);  // recompute both summaries for word w
  std::int64_t take_locked();
  void give_locked(std::uint64_t i, std::uint32_t now);
  void mark_free_locked(std::uint64_t i);  // clears the alloc bit; mapped when resident (extent)

  char* base_ = nullptr;
  std::uint64_t chunk_ = 0, nchunks_ = 0, nwords_ = 0;
  ChunkDivider divider_;
  std::uint32_t grain_ = 0;  // set by init (zero: the state of an untouched Slot)
  std::atomic<std::uint32_t> ready_{0};  // init done (release), so other threads may take
  std::uint64_t* alloc_ = nullptr;
  std::uint64_t* mapped_ = nullptr;
  std::uint64_t* full_sum_ = nullptr;  // bit w: alloc word w is all ones (no free chunk)
  std::uint64_t* fm_sum_ = nullptr;    // bit w: word w has a free mapped chunk
  std::uint32_t* extent_ = nullptr;
  std::uint32_t* freed_at_ = nullptr;  // tick at which each free mapped chunk was given back
  std::uint8_t* pieces_ = nullptr;     // chunk i's moved pieces (each a mapping of its own)
  std::atomic<std::uint64_t> free_mapped_{0};  // written under the lock; read racily to skip empty slots
  std::atomic<std::uint64_t> free_mapped_bytes_{0};  // sum of their extents x page; same rules
  // Under the lock there is one writer: a plain load and store, no locked read-modify-write on
  // every take and give.
  void move_free_bytes(std::uint64_t add, std::uint64_t sub) {
    free_mapped_bytes_.store(free_mapped_bytes_.load(std::memory_order_relaxed) + add - sub, std::memory_order_relaxed);
  }
  std::uint64_t nonfull_hint_ = 0;     // no word below this has a free chunk
  std::uint64_t fm_hint_ = 0;          // no word below this has a free mapped chunk
};

}  // namespace numap
