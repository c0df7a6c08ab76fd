// The heap's registry of live thread caches, one component: so that a purge (capacity pressure,
// numap_purge, malloc_trim) can return every thread's cached page chunks. A cache is linked in
// when set up and out when it flushes for good (thread exit, a change of heap). Lock order: this
// lock, then Slot locks; a purger takes a cache's page chunks through its page_flushing flag, never
// a lock its owner could wait on (thread_cache.h, the page cache's guard).
#pragma once

#include "allocators/numap/lock.h"
#include "allocators/numap/thread_cache.h"

namespace numap {

class CacheRegistry {
 public:
  void add(ThreadCache* tc) {
    LockGuard g(lock_);
    tc->reg_prev = nullptr;
    tc->reg_next = first_;
    if (first_ != nullptr) first_->reg_prev = tc;
    first_ = tc;
  }
  void remove(ThreadCache* tc) {
    LockGuard g(lock_);
    if (tc->reg_prev != nullptr) tc->reg_prev->reg_next = tc->reg_next; else first_ = tc->reg_next;
    if (tc->reg_next != nullptr) tc->reg_next->reg_prev = tc->reg_prev;
    tc->reg_prev = tc->reg_next = nullptr;
  }
  // fn(tc) for every live cache; the caller holds lock(), so none comes or goes meanwhile.
  template <class Fn>
  void for_each(Fn fn) const {
    for (ThreadCache* tc = first_; tc != nullptr; tc = tc->reg_next) fn(tc);
  }
  Lock& lock() { return lock_; }

 private:
  Lock lock_;
  ThreadCache* first_ = nullptr;
};

}  // namespace numap
