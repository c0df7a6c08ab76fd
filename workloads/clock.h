// Monotonic seconds and a sleep that finishes its interval through signals: for workloads whose
// phases run for a time (rate-limited writers, idle phases) rather than a count.
#pragma once

#include <time.h>

namespace allocmark::workloads {

inline double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

inline void sleep_s(double seconds) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

}  // namespace allocmark::workloads
