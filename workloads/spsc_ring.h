// Single-producer single-consumer ring with capacity fixed up front: handing a block to another
// thread for freeing must not allocate inside a measured phase.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

namespace allocmark::workloads {

template <class T>
class SpscRing {
 public:
  void reserve(std::size_t capacity) {
    capacity_ = capacity + 1;
    items_ = std::make_unique<T[]>(capacity_);
  }
  bool push(const T& item) {
    std::size_t head = head_.load(std::memory_order_relaxed);
    std::size_t next = head + 1 == capacity_ ? 0 : head + 1;
    if (next == tail_.load(std::memory_order_acquire)) return false;
    items_[head] = item;
    head_.store(next, std::memory_order_release);
    return true;
  }
  bool pop(T& item) {
    std::size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    item = items_[tail];
    tail_.store(tail + 1 == capacity_ ? 0 : tail + 1, std::memory_order_release);
    return true;
  }

 private:
  std::unique_ptr<T[]> items_;
  std::size_t capacity_ = 0;
  alignas(64) std::atomic<std::size_t> head_{0};
  alignas(64) std::atomic<std::size_t> tail_{0};
};

}  // namespace allocmark::workloads
