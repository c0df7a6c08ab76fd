// Layer 2, size classes. Small classes (16 B .. 16 KiB) are objects carved from 64 KiB slabs;
// page classes (4 KiB .. the largest class, 1 GiB by default) are chunks of whole pages, four per
// doubling above 16 KiB (at most 25% internal waste, and every chunk a page multiple, so it can be
// advised away exactly). Power-of-two page classes serve alignments of 4 KiB and above. Requests
// of 3.5-16 KiB are slab objects rather than whole pages: as pages, a 4.1 KiB request took 8 KiB
// (hash_build's 3-16 KiB payloads: +13% over live, issue 12). Above 4 KiB each class is the
// largest multiple of 16 B of which n fit a 64 KiB slab (n = 15 .. 4): the slab's tail is at most
// 128 B, where classes of 1-2 KiB spacing left up to 8 KiB (14 KiB objects, 4 to a slab) and
// averaged 15% over the request on hash_build's payloads (8% now; both computed from its size
// distribution).
#pragma once

#include <cstddef>
#include <cstdint>

namespace numap {

constexpr std::size_t kSmallMax = 16384;
constexpr int kSmallClasses = 40;
constexpr std::size_t kSlabBytes = 64 << 10;

constexpr std::uint32_t kSmallSize[kSmallClasses] = {
    16,   32,   48,   64,   80,   96,   112,  128,  160,  192,  224,  256,  320,  384,
    448,  512,  640,  768,  896,  1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096,
    4368, 4672, 5040, 5456, 5952, 6544, 7280, 8192, 9360, 10912, 13104, 16384};

struct SmallLookup {
  std::uint8_t cls[kSmallMax / 16 + 1];
  constexpr SmallLookup() : cls{} {
    int c = 0;
    for (std::size_t i = 0; i <= kSmallMax / 16; ++i) {
      while (kSmallSize[c] < i * 16) ++c;
      cls[i] = static_cast<std::uint8_t>(c);
    }
  }
};
inline constexpr SmallLookup kSmallLookup{};

// Small class for 1 <= n <= kSmallMax (0 maps to the 16-byte class).
inline int small_class(std::size_t n) { return kSmallLookup.cls[(n + 15) >> 4]; }

// Page classes: 0..3 are 4, 8, 12, 16 KiB; then four per doubling.
constexpr int kMaxPageClasses = 4 + 4 * 16;  // up to 1 GiB

constexpr std::size_t page_class_size(int i) {
  if (i < 4) return static_cast<std::size_t>(i + 1) << 12;
  int j = i - 4;
  int k = 14 + j / 4;
  return (std::size_t{1} << k) + (static_cast<std::size_t>(j % 4 + 1) << (k - 2));
}

// Smallest page class holding n bytes (n >= 1); may exceed the configured count.
inline int page_class(std::size_t n) {
  if (n <= (16 << 10)) return n == 0 ? 0 : static_cast<int>((n - 1) >> 12);
  int k = 63 - __builtin_clzll(n - 1);  // 2^k < n <= 2^(k+1)
  std::size_t base = std::size_t{1} << k;
  std::size_t step = base >> 2;  // 2^(k-2): a shift, not a division
  return 4 + (k - 14) * 4 + static_cast<int>((n - base + step - 1) >> (k - 2)) - 1;
}

// page_class(n) by table for the thread-cached page classes (n up to 4 MiB), indexed by the
// request's pages less one: the page-cache hit's class without the clz arithmetic (1 KiB; a hit
// reads one line of it).
constexpr std::size_t kPageLookupMax = 4 << 20;
struct PageLookup {
  std::uint8_t cls[kPageLookupMax >> 12];
  constexpr PageLookup() : cls{} {
    for (std::size_t i = 0; i < (kPageLookupMax >> 12); ++i) {
      int c = 0;
      while (page_class_size(c) < ((i + 1) << 12)) ++c;
      cls[i] = static_cast<std::uint8_t>(c);
    }
  }
};
inline constexpr PageLookup kPageLookup{};

// For 1 <= n <= kPageLookupMax: the same class as page_class(n).
inline int page_class_cached(std::size_t n) { return kPageLookup.cls[(n - 1) >> 12]; }

// Smallest power-of-two page class holding n bytes and aligned to `align` (a power of two).
inline int page_class_pow2(std::size_t n, std::size_t align) {
  std::size_t need = n > align ? n : align;
  if (need <= 4096) return 0;
  int k = 64 - __builtin_clzll(need - 1);  // 2^k >= need
  if (k <= 13) return k == 12 ? 0 : 1;     // 4 KiB, 8 KiB
  if (k == 14) return 3;                   // 16 KiB
  return 4 + (k - 15) * 4 + 3;             // 2^k is the last class of its doubling
}

// The page-class count and largest class for a span: classes up to min(1 GiB, span / 4).
inline int page_class_count(std::size_t span) {
  std::size_t max = span / 4 < (std::size_t{1} << 30) ? span / 4 : (std::size_t{1} << 30);
  int n = 0;
  while (n < kMaxPageClasses && page_class_size(n) <= max) ++n;
  return n;
}

}  // namespace numap
