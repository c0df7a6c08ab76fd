// The harness's one monotonic clock: CLOCK_MONOTONIC through the vDSO (no system call, no
// allocation, no lock), so it may be read inside a measured phase (workloads/call_latency.h times
// calls with it), inside malloc (the preloads) and in a forked child. Every timestamp the harness
// records (`t_ns`, phase edges, `start_ns`) is this clock, and so is every deadline, poll interval
// and elapsed time of the driver (os::Clock below): nothing else in harness/ or workloads/ reads a
// clock (tests/include_floors_test.py holds that).
#pragma once

#include <time.h>

#include <chrono>
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

// The same clock as a std::chrono clock, for the driver's deadlines and intervals (timeouts, poll
// periods, the progress display): its time points subtract to chrono durations and take them.
// libstdc++'s steady_clock reads CLOCK_MONOTONIC too, so code moved here from it times the same.
struct Clock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<Clock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return time_point(duration(monotonic_ns())); }
};

}  // namespace allocmark::os
