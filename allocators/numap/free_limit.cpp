// The free limit's back-off (free_limit.h).
#include "allocators/numap/free_limit.h"

namespace numap {

std::uint64_t FreeLimit::allowance(std::uint32_t now, std::uint64_t free, std::uint64_t in_use, const Options& opt,
                                   bool* new_window) {
  const std::uint64_t pct = static_cast<std::uint64_t>(opt.free_percent);
  const std::uint64_t by_share = in_use / 100 * pct + in_use % 100 * pct / 100;  // exact, no overflow
  // Back off where the limit gave back pages that the same classes then charged again (a program
  // that frees and rebuilds the same sizes, or churn whose free share is above FREE_PERCENT):
  // every refault costs a zeroed page, so the allowance doubles. Counts run in windows of DECAY_MS
  // (1 s when decay is off). A window that ends with no doubling lowers the allowance to what its
  // checks needed (so an adequate allowance is kept, not halved into thrash and doubled back),
  // halves it once more per further quiet period (nothing freed then), and forgets its debts (a
  // rebuild long after a release is no thrash). The floor scales at most kMaxFloorScale times, so
  // a release down to almost nothing in use still goes back to a few floors.
  std::uint32_t scale = scale_.load(std::memory_order_relaxed);
  const std::uint32_t quiet = window_ms(opt);
  const std::uint32_t elapsed = now - window_.load(std::memory_order_relaxed);
  const std::uint64_t given = given_.load(std::memory_order_relaxed);
  const bool thrash = given >= 4 * kCheckBytes && refaulted_.load(std::memory_order_relaxed) * 4 >= given;
  auto allowance = [&](std::uint32_t sc) {
    const std::uint64_t floor = opt.free_floor * (sc < kMaxFloorScale ? sc : kMaxFloorScale);
    return by_share * sc > floor ? by_share * sc : floor;
  };
  std::uint32_t need = 1;  // the smallest scale that would have kept this check's free pages
  while (need < kMaxScale && allowance(need) < free) need *= 2;
  *new_window = thrash || elapsed > quiet;
  if (*new_window) {
    if (thrash && elapsed <= quiet) {
      if (scale < kMaxScale) scale *= 2;
    } else {
      const std::uint32_t window_need = need_.load(std::memory_order_relaxed);
      const std::uint32_t periods = elapsed / quiet;
      if (window_need < scale) scale = window_need;
      scale = periods > 31 ? 1 : scale >> (periods - 1);
      if (scale == 0) scale = 1;
    }
    given_.store(0, std::memory_order_relaxed);
    refaulted_.store(0, std::memory_order_relaxed);
    window_.store(now, std::memory_order_relaxed);
    need_.store(need, std::memory_order_relaxed);
  } else if (need > need_.load(std::memory_order_relaxed)) {
    need_.store(need, std::memory_order_relaxed);
  }
  scale_.store(scale, std::memory_order_relaxed);
  return allowance(scale);
}

}  // namespace numap
