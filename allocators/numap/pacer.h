// "At most once per period, by one thread": the decay passes and the capacity re-reads are paced
// this way (a tick before which nobody starts one; the thread that moves it does the work, the
// others go on allocating). Ticks are milliseconds wrapping at 2^32, compared wrap-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace numap {

class Pacer {
 public:
  // True for the one caller that may act at tick `now`, which moves the next turn to now + period.
  // `force`: act whatever the tick (the next turn still moves when this caller wins it).
  bool claim(std::uint32_t now, std::uint32_t period, bool force = false) {
    std::uint32_t next = next_.load(std::memory_order_relaxed);
    if (!force && static_cast<std::int32_t>(now - next) < 0) return false;
    return next_.compare_exchange_strong(next, now + period, std::memory_order_relaxed) || force;
  }

 private:
  std::atomic<std::uint32_t> next_{0};
};

}  // namespace numap
