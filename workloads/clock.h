// Monotonic seconds and a sleep that finishes its interval through signals: for workloads whose
// phases run for a time (rate-limited writers, idle phases) rather than a count.
#pragma once

#include <time.h>
#include "harness/os/clock.h"

namespace allocmark::workloads {

inline double now_s() { return allocmark::os::monotonic_s(); }

inline void sleep_s(double seconds) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

}  // namespace allocmark::workloads
