// A counted lock: one per (node, class), never held across mmap/munmap/madvise. Uncontended it is
// one atomic exchange; contended it spins briefly then sleeps on a futex (Drepper's three-state
// mutex). It counts acquisitions, contended acquisitions and the time spent waiting, which is what
// the harness reports as numap's contention.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace numap {

inline std::uint64_t monotonic_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

class Lock {
 public:
  void lock() {
    std::uint32_t expected = 0;
    if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      bump(acquisitions_);
      return;
    }
    lock_slow();
  }
  // Acquires only when free (never waits): false when another thread holds it.
  bool try_lock() {
    std::uint32_t expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) return false;
    bump(acquisitions_);
    return true;
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2)
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  // After fork, in the child: only the forking thread exists, and it held every lock.
  void reset() { state_.store(0, std::memory_order_relaxed); }

  std::uint64_t acquisitions() const { return acquisitions_.load(std::memory_order_relaxed); }
  std::uint64_t contended() const { return contended_.load(std::memory_order_relaxed); }
  std::uint64_t wait_ns() const { return wait_ns_.load(std::memory_order_relaxed); }

 private:
  // Counters change only while the lock is held, so a load and a store suffice; readers are racy
  // by design (statistics) but never torn.
  static void bump(std::atomic<std::uint64_t>& c, std::uint64_t by = 1) {
    c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }

  __attribute__((noinline)) void lock_slow() {
    const std::uint64_t start = monotonic_ns();
    for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      std::uint32_t expected = 0;
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
        acquired_after_wait(start);
        return;
      }
    }
    while (state_.exchange(2, std::memory_order_acquire) != 0)
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
    acquired_after_wait(start);
  }
  void acquired_after_wait(std::uint64_t start) {
    bump(acquisitions_);
    bump(contended_);
    bump(wait_ns_, monotonic_ns() - start);
  }

  std::atomic<std::uint32_t> state_{0};
  std::atomic<std::uint64_t> acquisitions_{0}, contended_{0}, wait_ns_{0};
};

class LockGuard {
 public:
  explicit LockGuard(Lock& l) : l_(l) { l_.lock(); }
  ~LockGuard() { l_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& l_;
};

}  // namespace numap
