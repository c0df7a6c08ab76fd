// The background decay thread, one component: started once, on the first allocation slow path
// (NUMAP_DECAY_THREAD), it runs a pass every period until stop(), and delay_ms after a request()
// (the free limit's purges, queued by free(): the thread is what makes their system calls); a
// forked child never has one. What a pass does is the Heap's (background_pass, heap_reclaim.cpp).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "allocators/numap/os.h"

namespace numap {

class DecayThread {
 public:
  // Starts the thread calling pass(arg) every period_ms and delay_ms after each request(), unless
  // one was started (or refused) before.
  void start(void (*pass)(void*), void* arg, long period_ms, long delay_ms) {
    if (state_.load(std::memory_order_relaxed) == kNone) launch(pass, arg, period_ms, delay_ms);
  }
  bool running() const { return state_.load(std::memory_order_relaxed) == kRunning; }
  // Asks for a pass delay_ms from now. Only the first request since the thread took the last one
  // makes a system call (one futex wake); later ones find it asked already and cost one load, so
  // a release that comes due a hundred times in 10 ms wakes the thread once. A request made before
  // the thread starts is its first pass; one where it never runs (refused, a forked child) is none.
  void request() {
    if (__atomic_load_n(&requested_, __ATOMIC_RELAXED) != 0) return;
    if (__atomic_exchange_n(&requested_, 1u, __ATOMIC_SEQ_CST) == 0 && running()) Os::wake(&requested_);
  }
  // Asks the thread to exit and joins it (the heap's destroy).
  void stop() {
    if (state_.load() != kRunning) return;
    __atomic_store_n(&stop_, 1u, __ATOMIC_RELEASE);
    Os::wake(&stop_);  // in a request's delay
    __atomic_store_n(&requested_, 1u, __ATOMIC_SEQ_CST);
    Os::wake(&requested_);  // between passes
    pthread_join(thread_, nullptr);
    state_.store(kNone);
  }
  // In a forked child: the thread does not exist there, and a child of a multithreaded parent may
  // not safely start threads (pthread_create is not async-signal-safe; TSan refuses it), so none is.
  void forget() { state_.store(kNever); }

 private:
  enum : int { kNone = 0, kRunning = 1, kNever = 2 };  // kNever: failed to start, or a forked child
  // Out of line: every allocation slow path calls start().
  __attribute__((noinline)) void launch(void (*pass)(void*), void* arg, long period_ms, long delay_ms) {
    int expected = kNone;
    if (!state_.compare_exchange_strong(expected, kRunning)) return;
    pass_ = pass;
    arg_ = arg;
    period_ms_ = period_ms;
    delay_ms_ = delay_ms;
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
  bool stopping() const { return __atomic_load_n(&stop_, __ATOMIC_ACQUIRE) != 0; }
  void loop() {
    while (!stopping()) {
      Os::sleep_unless(&requested_, 0, period_ms_);  // at once when a request is pending
      if (stopping()) break;
      if (__atomic_load_n(&requested_, __ATOMIC_SEQ_CST) != 0) {
        // The delay lets the release go on meanwhile: more neighbouring chunks free by the pass
        // (fewer, longer runs), and pages the program takes again at once are never discarded.
        if (delay_ms_ > 0) Os::sleep_unless(&stop_, 0, delay_ms_);
        if (stopping()) break;
        // Taken before the pass reads what was queued (sequentially consistent, as the requester
        // queues before it asks): a request after this wakes the thread again.
        __atomic_store_n(&requested_, 0u, __ATOMIC_SEQ_CST);
      }
      pass_(arg_);
    }
  }

  std::atomic<int> state_{kNone};
  pthread_t thread_{};
  std::uint32_t stop_ = 0;  // futex word: 1 asks the thread to exit
  std::uint32_t requested_ = 0;  // futex word: 1 asks for a pass after the delay (request, stop)
  void (*pass_)(void*) = nullptr;
  void* arg_ = nullptr;
  long period_ms_ = 0;
  long delay_ms_ = 0;
};

}  // namespace numap
