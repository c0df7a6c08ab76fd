// The harness's one monotonic clock: CLOCK_MONOTONIC through the vDSO (no system call, no
// allocation, no lock), so it may be read inside a measured phase (workloads/call_latency.h times
// calls with it), inside malloc (the preloads) and in a forked child. Every timestamp the harness
// records (`t_ns`, phase edges, `start_ns`) is this clock; std::chrono::steady_clock is the same
// clock in libstdc++, kept only for timeouts in the driver.
#pragma once

#include <time.h>

#include <cstdint>

namespace allocmark::os {

// Nanoseconds of CLOCK_MONOTONIC.
inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The same clock in seconds: for workloads whose phases run for a time rather than a count.
inline double monotonic_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace allocmark::os
