#include "allocators/numap/size_classes.h"

#include "allocators/numap/page_runs.h"

#include <gtest/gtest.h>

#include <vector>

namespace numap {
namespace {

TEST(NumapSizeClasses, SmallClassIsTheSmallestThatFits) {
  for (std::size_t n = 0; n <= kSmallMax; ++n) {
    const int c = small_class(n);
    ASSERT_GE(kSmallSize[c], n);
    if (c > 0) {
      ASSERT_LT(kSmallSize[c - 1], n == 0 ? 1 : n) << n;
    }
    ASSERT_EQ(kSmallSize[c] % 16, 0u);
  }
}

// Above 4 KiB a class is sized to its slab: at most 128 B of each 64 KiB slab is left over
// (14 KiB objects left 8 KiB, an eighth of every slab of that class).
TEST(NumapSizeClasses, ClassesAboveFourKiBFillTheirSlab) {
  int above = 0;
  for (int c = 0; c < kSmallClasses; ++c) {
    if (kSmallSize[c] <= 4096) continue;
    ++above;
    EXPECT_LE(kSlabBytes % kSmallSize[c], 128u) << kSmallSize[c];
    if (c > 0) {
      EXPECT_EQ(kSlabBytes / kSmallSize[c] + 1, kSlabBytes / kSmallSize[c - 1]) << kSmallSize[c];
    }
  }
  EXPECT_EQ(above, 12);  // 15 .. 4 objects per slab
}

// Chunk indexes are computed by multiplication (ChunkDivider): exact for every class, including
// the slab, at the largest span, at both ends of each chunk near the top of the span (where the
// rounding error is largest) and across it.
TEST(NumapSizeClasses, ChunkIndexByMultiplicationIsExact) {
  const std::uint64_t span = std::uint64_t{1} << 40;
  std::vector<std::uint64_t> chunks{kSlabBytes};
  for (int i = 0; i < kMaxPageClasses; ++i) chunks.push_back(page_class_size(i));
  for (std::uint64_t chunk : chunks) {
    const ChunkDivider d = ChunkDivider::for_chunk(chunk);
    const std::uint64_t n = span / chunk;
    auto check = [&](std::uint64_t k) {
      ASSERT_EQ(d.divide(k * chunk), k) << chunk << " " << k;
      ASSERT_EQ(d.divide(k * chunk + chunk - 1), k) << chunk << " " << k;
      ASSERT_EQ(d.divide(k * chunk + chunk / 2), k) << chunk << " " << k;
    };
    for (std::uint64_t k = n > 4096 ? n - 4096 : 0; k < n; ++k) check(k);
    for (std::uint64_t k = 0; k < n; k += 1 + n / 4096) check(k);
  }
}

TEST(NumapSizeClasses, PageClassByTableMatchesTheArithmetic) {
  for (std::size_t n = 1; n <= kPageLookupMax; ++n) ASSERT_EQ(page_class_cached(n), page_class(n)) << n;
}

TEST(NumapSizeClasses, PageClassesArePageMultiplesWithBoundedWaste) {
  for (int i = 0; i < kMaxPageClasses; ++i) {
    EXPECT_EQ(page_class_size(i) % 4096, 0u) << i;
    if (i > 0) {
      EXPECT_GT(page_class_size(i), page_class_size(i - 1));
    }
  }
  EXPECT_EQ(page_class_size(0), 4096u);
  EXPECT_EQ(page_class_size(kMaxPageClasses - 1), std::size_t{1} << 30);
  for (std::size_t n = 1; n <= (64u << 20); n += 1 + n / 7) {
    const int c = page_class(n);
    ASSERT_GE(page_class_size(c), n) << n;
    if (c > 0) {
      ASSERT_LT(page_class_size(c - 1), n) << n;
    }
    if (n > (16u << 10)) {
      ASSERT_LE(page_class_size(c), n + n / 4 + 4096) << n;
    }
  }
}

TEST(NumapSizeClasses, PowerOfTwoClassesServeAlignment) {
  for (std::size_t align = 4096; align <= (1u << 20); align *= 2)
    for (std::size_t n : {std::size_t{1}, align / 2, align, align + 1, 3 * align}) {
      const std::size_t size = page_class_size(page_class_pow2(n, align));
      EXPECT_EQ(size & (size - 1), 0u) << n;
      EXPECT_GE(size, n);
      EXPECT_EQ(size % align, 0u);
    }
}

TEST(NumapSizeClasses, ClassCountFollowsTheSpan) {
  EXPECT_EQ(page_class_size(page_class_count(std::size_t{16} << 30) - 1), std::size_t{1} << 30);
  EXPECT_EQ(page_class_size(page_class_count(std::size_t{1} << 30) - 1), std::size_t{256} << 20);
}

}  // namespace
}  // namespace numap
