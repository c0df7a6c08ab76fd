#include "allocators/numap/page_runs.h"

#include "allocators/numap/os.h"

namespace numap {
namespace {

std::uint64_t words_for(std::uint64_t bits) { return (bits + 63) / 64; }
std::uint64_t round8(std::uint64_t b) { return (b + 7) & ~std::uint64_t{7}; }

}  // namespace

std::size_t Slot::metadata_bytes(std::uint64_t nchunks) {
  std::uint64_t w = words_for(nchunks);
  std::uint64_t s = words_for(w);
  return (2 * w + 2 * s) * 8 + 2 * round8(nchunks * 4) + round8(nchunks);
}

void Slot::init(char* base, std::uint64_t chunk, std::uint64_t nchunks, std::uint32_t grain_pages, void* meta) {
  base_ = base;
  chunk_ = chunk;
  divider_ = ChunkDivider::for_chunk(chunk);
  nchunks_ = nchunks;
  grain_ = grain_pages;
  nwords_ = words_for(nchunks);
  std::uint64_t s = words_for(nwords_);
  auto* m = static_cast<std::uint64_t*>(meta);
  alloc_ = m;
  mapped_ = alloc_ + nwords_;
  full_sum_ = mapped_ + nwords_;
  fm_sum_ = full_sum_ + s;
  extent_ = reinterpret_cast<std::uint32_t*>(fm_sum_ + s);
  freed_at_ = reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(extent_) + round8(nchunks * 4));
  pieces_ = reinterpret_cast<std::uint8_t*>(freed_at_) + round8(nchunks * 4);
  // Bits past the end stay free in the bitmap (writing them would touch a page of every class's
  // metadata at start); take_locked never returns an index at or past nchunks.
  ready_.store(1, std::memory_order_release);
}

void Slot::refresh(std::uint64_t w) {
  const std::uint64_t bit = std::uint64_t{1} << (w % 64);
  const std::uint64_t full = alloc_[w] == ~std::uint64_t{0} ? bit : 0;
  const std::uint64_t fm = (~alloc_[w] & mapped_[w]) != 0 ? bit : 0;
  // Stored only when a bit changes: a summary page is first written when a word first fills or
  // first holds a free mapped chunk, not on the first take.
  if ((full_sum_[w / 64] & bit) != full) full_sum_[w / 64] ^= bit;
  if ((fm_sum_[w / 64] & bit) != fm) fm_sum_[w / 64] ^= bit;
}

std::int64_t Slot::take() {
  LockGuard g(lock);
  return take_locked();
}

std::int64_t Slot::take_mapped() {
  LockGuard g(lock);
  if (free_mapped_ == 0) return -1;
  return take_locked();  // takes a mapped chunk when there is one
}

int Slot::take_batch(std::uint64_t* out, int n, bool mapped_only) {
  LockGuard g(lock);
  int got = 0;
  while (got < n && (!mapped_only || free_mapped_ != 0)) {
    const std::int64_t i = take_locked();
    if (i < 0) break;
    out[got++] = static_cast<std::uint64_t>(i);
  }
  return got;
}

void Slot::give(std::uint64_t i, std::uint32_t now) {
  LockGuard g(lock);
  give_locked(i, now);
}

void Slot::give_batch(const std::uint64_t* idx, int n, std::uint32_t now) {
  LockGuard g(lock);
  for (int k = 0; k < n; ++k) give_locked(idx[k], now);
}

std::int64_t Slot::take_locked() {
  const std::uint64_t swords = words_for(nwords_);
  if (free_mapped_ > 0) {
    for (std::uint64_t s = fm_hint_ / 64; s < swords; ++s) {
      if (fm_sum_[s] == 0) continue;
      std::uint64_t w = s * 64 + static_cast<std::uint64_t>(__builtin_ctzll(fm_sum_[s]));
      std::uint64_t bits = ~alloc_[w] & mapped_[w];
      std::uint64_t b = static_cast<std::uint64_t>(__builtin_ctzll(bits));
      alloc_[w] |= std::uint64_t{1} << b;
      mapped_[w] &= ~(std::uint64_t{1} << b);
      --free_mapped_;
      move_free_bytes(0, std::uint64_t{extent_[w * 64 + b]} * kPage);
      refresh(w);
      fm_hint_ = w;
      return static_cast<std::int64_t>(w * 64 + b);
    }
  }
  for (std::uint64_t s = nonfull_hint_ / 64; s < swords; ++s) {
    std::uint64_t nonfull = ~full_sum_[s];
    if (s == swords - 1 && nwords_ % 64 != 0) nonfull &= (std::uint64_t{1} << (nwords_ % 64)) - 1;
    if (nonfull == 0) continue;
    std::uint64_t w = s * 64 + static_cast<std::uint64_t>(__builtin_ctzll(nonfull));
    // Lowest free chunk; prefer one that is not mapped (a mapped one would have been found above
    // unless free_mapped_ is 0, in which case none is).
    std::uint64_t b = static_cast<std::uint64_t>(__builtin_ctzll(~alloc_[w]));
    // The last word's bits past the end read as free: the lowest free chunk being one of them
    // means every real chunk is taken.
    if (w * 64 + b >= nchunks_) return -1;
    alloc_[w] |= std::uint64_t{1} << b;
    if (mapped_[w] & (std::uint64_t{1} << b)) {  // cannot happen while free_mapped_ == 0; kept exact
      mapped_[w] &= ~(std::uint64_t{1} << b);
      --free_mapped_;
      move_free_bytes(0, std::uint64_t{extent_[w * 64 + b]} * kPage);
    }
    refresh(w);
    nonfull_hint_ = w;
    return static_cast<std::int64_t>(w * 64 + b);
  }
  return -1;
}

void Slot::give_locked(std::uint64_t i, std::uint32_t now) {
  if (extent_[i] != 0) freed_at_[i] = now;
  mark_free_locked(i);
}

void Slot::mark_free_locked(std::uint64_t i) {
  const std::uint64_t w = i / 64, bit = std::uint64_t{1} << (i % 64);
  alloc_[w] &= ~bit;
  if (extent_[i] != 0) {
    mapped_[w] |= bit;
    ++free_mapped_;
    move_free_bytes(std::uint64_t{extent_[i]} * kPage, 0);
    if (w < fm_hint_) fm_hint_ = w;
  }
  if (w < nonfull_hint_) nonfull_hint_ = w;
  refresh(w);
}

int Slot::purge_begin(PurgeRun* runs, int max_runs, std::uint64_t want_bytes, bool aged, std::uint32_t freed_by,
                      bool spans) {
  LockGuard g(lock);
  int n = 0;
  std::uint64_t got = 0;
  if (free_mapped_ == 0) return 0;
  const std::uint64_t swords = words_for(nwords_);
  bool open = false;  // runs[n-1] may still grow
  for (std::uint64_t s = 0; s < swords && n <= max_runs; ++s) {
    if (fm_sum_[s] == 0) {
      open = false;
      continue;
    }
    for (std::uint64_t ww = 0; ww < 64; ++ww) {
      std::uint64_t w = s * 64 + ww;
      if (w >= nwords_) break;
      std::uint64_t bits = ~alloc_[w] & mapped_[w];
      if (aged) {
        // Wrap-safe: ticks are milliseconds in 32 bits; a chunk freed after `freed_by` is young.
        for (std::uint64_t young = bits; young != 0; young &= young - 1) {
          const std::uint64_t b = static_cast<std::uint64_t>(__builtin_ctzll(young));
          if (static_cast<std::int32_t>(freed_by - freed_at_[w * 64 + b]) < 0) bits &= ~(std::uint64_t{1} << b);
        }
      }
      if (bits == 0) {
        open = false;
        continue;
      }
      for (std::uint64_t b = 0; b < 64; ++b) {
        if (!(bits & (std::uint64_t{1} << b))) {
          open = false;
          continue;
        }
        const std::uint64_t i = w * 64 + b;
        const std::uint64_t bytes = std::uint64_t{extent_[i]} * kPage;
        if (want_bytes != 0 && got >= want_bytes) goto done;  // no more than asked (exchange, capacity)
        if (open && runs[n - 1].first + runs[n - 1].count == i &&
            (spans || runs[n - 1].span == std::uint64_t{runs[n - 1].count} * chunk_)) {
          runs[n - 1].span = std::uint64_t{runs[n - 1].count} * chunk_ + bytes;
          runs[n - 1].count++;
          runs[n - 1].bytes += bytes;
        } else {
          if (n == max_runs) goto done;
          runs[n++] = PurgeRun{static_cast<std::uint32_t>(i), 1, bytes, bytes, false};
        }
        open = true;
        got += bytes;
        alloc_[w] |= std::uint64_t{1} << b;
        mapped_[w] &= ~(std::uint64_t{1} << b);
        --free_mapped_;
        move_free_bytes(0, bytes);
      }
      refresh(w);
    }
  }
done:
  // The word being scanned when we stopped may have changed bits without a refresh.
  for (int r = 0; r < n; ++r) {
    refresh(runs[r].first / 64);
    refresh((runs[r].first + runs[r].count - 1) / 64);
  }
  return n;
}

void Slot::purge_done(const PurgeRun* runs, int n) {
  LockGuard g(lock);
  for (int r = 0; r < n; ++r) {
    for (std::uint64_t i = runs[r].first; i < std::uint64_t{runs[r].first} + runs[r].count; ++i) {
      const std::uint64_t w = i / 64;
      alloc_[w] &= ~(std::uint64_t{1} << (i % 64));
      if (!runs[r].ok) {  // still resident: free and mapped again
        mapped_[w] |= std::uint64_t{1} << (i % 64);
        ++free_mapped_;
        move_free_bytes(std::uint64_t{extent_[i]} * kPage, 0);
        if (w < fm_hint_) fm_hint_ = w;
      } else {
        extent_[i] = 0;
      }
      if (w < nonfull_hint_) nonfull_hint_ = w;
      refresh(w);
    }
  }
}

void Slot::move_done(const PurgeRun& run, std::uint64_t kept) {
  LockGuard g(lock);
  for (std::uint64_t k = 0; k < run.count; ++k) {
    const std::uint64_t i = std::uint64_t{run.first} + k;
    // The run is resident from its first chunk's start (every chunk but the last is whole), so
    // chunk k keeps what of the first `kept` bytes falls inside it, free since it was freed (its
    // tick stays: the move did not use it).
    const std::uint64_t start = k * chunk_;
    const std::uint64_t left = kept > start ? kept - start : 0;
    const std::uint64_t had = std::uint64_t{extent_[i]} * kPage;
    extent_[i] = static_cast<std::uint32_t>((left < had ? left : had) / kPage);
    mark_free_locked(i);
  }
}

std::uint64_t Slot::take_moved(std::uint64_t first, std::uint64_t count) {
  std::uint64_t n = 0;
  for (std::uint64_t i = first; i < first + count; ++i)
    if (moved(i)) n += __atomic_exchange_n(&pieces_[i], std::uint8_t{0}, __ATOMIC_RELAXED);
  return n;
}

std::int64_t Slot::last_moved(std::uint64_t first, std::uint64_t count) const {
  for (std::uint64_t i = first + count; i > first; --i)
    if (moved(i - 1)) return static_cast<std::int64_t>(i - 1);
  return -1;
}

}  // namespace numap
