// The background decay thread, one component: started once, on the first allocation slow path
// (NUMAP_DECAY_THREAD), it runs a pass every period until stop(); a forked child never has one.
// What a pass does is the Heap's (maybe_decay, heap_reclaim.cpp).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "allocators/numap/os.h"

namespace numap {

class DecayThread {
 public:
  // Starts the thread calling pass(arg) every period_ms, unless one was started (or refused) before.
  void start(void (*pass)(void*), void* arg, long period_ms) {
    if (state_.load(std::memory_order_relaxed) == kNone) launch(pass, arg, period_ms);
  }
  // Asks the thread to exit and joins it (the heap's destroy).
  void stop() {
    if (state_.load() != kRunning) return;
    __atomic_store_n(&stop_, 1u, __ATOMIC_RELEASE);
    Os::wake(&stop_);
    pthread_join(thread_, nullptr);
    state_.store(kNone);
  }
  // In a forked child: the thread does not exist there, and a child of a multithreaded parent may
  // not safely start threads (pthread_create is not async-signal-safe; TSan refuses it), so none is.
  void forget() { state_.store(kNever); }

 private:
  enum : int { kNone = 0, kRunning = 1, kNever = 2 };  // kNever: failed to start, or a forked child
  // Out of line: every allocation slow path calls start().
  __attribute__((noinline)) void launch(void (*pass)(void*), void* arg, long period_ms) {
    int expected = kNone;
    if (!state_.compare_exchange_strong(expected, kRunning)) return;
    pass_ = pass;
    arg_ = arg;
    period_ms_ = period_ms;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    // Joinable: stop() (the heap's destroy, tests) joins it before the heap unmaps what it reads.
    if (pthread_create(&thread_, &attr, main, this) != 0) state_.store(kNever);  // the slow path decays alone
    pthread_attr_destroy(&attr);
  }
  static void* main(void* self) {
    static_cast<DecayThread*>(self)->loop();
    return nullptr;
  }
  void loop() {
    while (__atomic_load_n(&stop_, __ATOMIC_ACQUIRE) == 0) {
      Os::sleep_unless(&stop_, 0, period_ms_);
      if (__atomic_load_n(&stop_, __ATOMIC_ACQUIRE) != 0) break;
      pass_(arg_);
    }
  }

  std::atomic<int> state_{kNone};
  pthread_t thread_{};
  std::uint32_t stop_ = 0;  // futex word: 1 asks the thread to exit
  void (*pass_)(void*) = nullptr;
  void* arg_ = nullptr;
  long period_ms_ = 0;
};

}  // namespace numap
