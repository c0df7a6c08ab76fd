// The Heap's huge allocations: own mappings above the largest class (and page-class requests no
// node can hold), whole on one node or split across nodes in fallback order.
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "allocators/numap/heap.h"
#include "allocators/numap/heap_internal.h"

namespace numap {

void* Heap::huge_alloc(std::size_t n, std::size_t align) {
  if (n > (std::uint64_t{1} << 46)) {
    errno = ENOMEM;
    return nullptr;
  }
  const std::uint64_t bytes = round_up(n, kPage);
  refresh_capacity(false);
  const int node = budget_.current_node();
  HugePiece pieces[kMaxNodes];
  int count = 0;
  for (int pass = 0; pass < 2; ++pass) {
    Charge why;
    count = budget_.charge_pieces(node, bytes, pieces, &why);
    if (count != 0 || pass == 1) break;
    // The action of chunk_alloc: the global capacity purges everything; nodes full within the
    // distance limit purge the local node, then all (NUMAP_BEYOND_LIMIT=purge), or fail.
    if (why == Charge::kGlobalFull) {
      if (purge(bytes) == 0) break;
    } else {
      if (opt_.beyond_limit == BeyondLimit::kFail) break;
      if (purge(bytes, node) == 0 && purge(bytes) == 0) break;
    }
  }
  auto uncharge_all = [&] {
    for (int k = 0; k < count; ++k) budget_.uncharge(static_cast<int>(pieces[k].node), pieces[k].bytes);
  };
  if (count == 0) {
    counters_.enomem.fetch_add(1, std::memory_order_relaxed);
    errno = ENOMEM;
    return nullptr;
  }
  const std::uint64_t extra = align > kPage ? align : 0;
  char* raw = static_cast<char*>(os_->reserve(bytes + extra));
  if (raw == nullptr) {
    uncharge_all();
    counters_.enomem.fetch_add(1, std::memory_order_relaxed);
    errno = ENOMEM;
    return nullptr;
  }
  char* p = raw;
  if (extra != 0) {
    p = reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(raw), align));
    if (p != raw) os_->unmap(raw, static_cast<std::size_t>(p - raw));
    const std::uint64_t tail = extra - static_cast<std::uint64_t>(p - raw);
    if (tail != 0) os_->unmap(p + bytes, tail);
  }
  if (numa_) {
    std::uint64_t off = 0;
    for (int k = 0; k < count; ++k) {
      bind_part(p + off, pieces[k].bytes, static_cast<int>(pieces[k].node));
      off += pieces[k].bytes;
    }
  }
  if (!huge_.add(p, pieces, count)) {
    os_->unmap(p, bytes);
    uncharge_all();
    counters_.enomem.fetch_add(1, std::memory_order_relaxed);
    errno = ENOMEM;
    return nullptr;
  }
  for (int k = 0; k < count; ++k) {
    const int m = static_cast<int>(pieces[k].node);
    part_[m].huge_bytes.fetch_add(pieces[k].bytes, std::memory_order_relaxed);
    if (m != node) budget_.note_fallback(node, m);
  }
  if (count > 1) counters_.split_allocs.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void Heap::huge_free(void* p) {
  HugePiece pieces[kMaxNodes];
  const int count = huge_.remove(p, pieces, kMaxNodes);
  if (count == 0) fatal("free(): pointer not allocated by numap");
  std::uint64_t bytes = 0;
  for (int k = 0; k < count; ++k) bytes += pieces[k].bytes;
  os_->unmap(p, bytes);
  for (int k = 0; k < count; ++k) {
    const int m = static_cast<int>(pieces[k].node);
    part_[m].huge_bytes.fetch_sub(pieces[k].bytes, std::memory_order_relaxed);
    budget_.uncharge(m, pieces[k].bytes);
  }
}

void* Heap::page_or_split(int cls, std::size_t n, std::uint64_t* old_bytes, bool borrow, std::size_t align) {
  void* p = page_alloc(cls, n, old_bytes, borrow);
  if (p != nullptr || !numa_) return p;
  // Every node's headroom within the limit was too small for the whole chunk (or its class's span
  // is used up): a mapping of its own may still be split across nodes. That path counts its own
  // outcome.
  counters_.enomem.fetch_sub(1, std::memory_order_relaxed);
  *old_bytes = 0;
  return huge_alloc(n, align < kPage ? kPage : align);
}

}  // namespace numap
