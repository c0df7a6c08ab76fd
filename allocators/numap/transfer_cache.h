// One (node, small class)'s transfer cache, one component (in its Central, under the Central's
// lock): whole batches a thread cache's overflow left for the next refill, so a batch goes in and
// out in O(1) instead of object by object through the slabs (tcmalloc's transfer cache). Bounded,
// since parked objects keep their slabs from emptying: at most kTransferBatches batches and
// kTransferBytes of objects per (node, class), 5 MiB per node in all (40 classes).
#pragma once

#include <atomic>
#include <cstdint>

namespace numap {

constexpr int kTransferBatches = 32;
constexpr std::uint32_t kTransferBytes = 128 << 10;

class TransferCache {
 public:
  // Parks the list from head to tail, `count` objects of `object_size` bytes, and ends it at tail;
  // false (nothing changed) when the cache is full. The list joins the batch parked last while
  // that stays within `batch` objects (overflows move at most kOverflowMove objects, refills take a
  // batch whole), else it starts a batch.
  bool park(void* head, void* tail, std::uint32_t count, std::uint32_t object_size, std::uint32_t batch) {
    const std::uint32_t bytes = count * object_size;
    if (parked_bytes_ + bytes > kTransferBytes) return false;
    const bool join = nbatches_ != 0 && count_[nbatches_ - 1] + count <= batch;
    if (!join && nbatches_ == kTransferBatches) return false;
    parked_bytes_ += bytes;
    if (join) {
      *static_cast<void**>(tail) = batch_[nbatches_ - 1];
      batch_[nbatches_ - 1] = head;
      count_[nbatches_ - 1] += count;
    } else {
      *static_cast<void**>(tail) = nullptr;
      batch_[nbatches_] = head;
      count_[nbatches_++] = count;
    }
    return true;
  }
  // The batch parked last into *head; its length, 0 when none is parked.
  std::uint32_t take(void** head, std::uint32_t object_size) {
    if (nbatches_ == 0) return 0;
    --nbatches_;
    *head = batch_[nbatches_];
    parked_bytes_ -= count_[nbatches_] * object_size;
    taken_.fetch_add(1, std::memory_order_relaxed);
    return count_[nbatches_];
  }
  // Every parked batch out (a purge): fn(head, count) for each, at most kTransferBatches.
  template <class Fn>
  void drain(Fn fn) {
    while (nbatches_ > 0) {
      --nbatches_;
      fn(batch_[nbatches_], count_[nbatches_]);
    }
    parked_bytes_ = 0;
  }
  // Batches a refill took whole (numap_stats' transfer_batches); read without the lock.
  std::uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }

 private:
  void* batch_[kTransferBatches] = {};
  std::uint32_t count_[kTransferBatches] = {};
  int nbatches_ = 0;
  std::uint32_t parked_bytes_ = 0;
  std::atomic<std::uint64_t> taken_{0};
};

}  // namespace numap
