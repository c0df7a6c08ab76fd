// Addresses of sampled allocations, for the placement figures (per phase `nodes[].local_fraction`):
// the allocation sampler (call_latency.h's one call in N) hands each sampled block's address here,
// with the CPU the allocating thread was on. Each crew thread writes a fixed ring of its own,
// made before the phases, so recording is two stores and a vDSO sched_getcpu; nothing allocates
// inside a phase. After the phase the worker takes the rings and asks the kernel which node each
// block's page is on (move_pages in query mode).
//
// Sampled are the timed calls and every block of call_latency.h's kAlwaysNotedBytes or more.
// The ring keeps a thread's last kRingSize sampled blocks: the ones most likely still live at the
// phase end. Blocks freed since are not known as such; a freed block whose page the allocator
// unmapped is not resident and drops out of the figure, one whose page it kept still counts (that
// memory is still the allocator's, on that node). Threads a workload starts itself (a pool) have
// rings when the workload reserved pool slots (call_latency::reserve_pool_slots); other threads
// are not bound to a ring and not sampled.
#pragma once

#include <sched.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace allocmark::workloads::address_sample {

struct Sample {
  const void* address;
  int cpu;  // sched_getcpu() at the allocation
};

inline constexpr std::size_t kRingSize = 256;

struct alignas(64) Ring {
  std::array<Sample, kRingSize> entries{};
  uint64_t recorded = 0;  // since the last take()
};

// The calling thread's ring; null for threads never bound (nothing is recorded).
extern constinit thread_local Ring* t_ring;

// Makes one ring per crew thread (before the threads exist) and empties them.
void configure(int threads);
// The calling thread records into ring `index` from now on.
void bind_thread(int index);

inline void note(const void* address) {
  Ring* r = t_ring;
  if (!r) return;
  r->entries[r->recorded++ % kRingSize] = Sample{address, sched_getcpu()};
}

// Copies ring `index`'s kept samples (at most kRingSize) into `out` and empties it; returns how
// many. Between phases only.
std::size_t take(int index, Sample* out);
int rings();

}  // namespace allocmark::workloads::address_sample
