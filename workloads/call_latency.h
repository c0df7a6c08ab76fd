// Allocation-call latency, sampled: workloads allocate through allocate()/release() below instead
// of std::malloc/std::free, and one call in N of each thread (N = the cell's `latency_every`) is
// timed with two CLOCK_MONOTONIC reads (vDSO) and counted into a histogram of that thread. The
// other N-1 calls cost one thread-local decrement and two predictable branches (the count and
// the size: blocks of kAlwaysNotedBytes and more take the slow path to be noted, untimed);
// N = 0 turns timing off. Glibc, tcmalloc and mimalloc count no lock waits, so the tail of these
// latencies is what their locks look like from outside.
//
// Everything the measured phases touch exists before them: a slot (two fixed-size histograms and
// the CPU of its last timed call) per crew thread, made by configure(); slots for threads a
// workload starts itself (arena_churn's pool), made by reserve_pool_slots() in the workload's
// constructor; and a few shared slots, picked by the thread's address, for any other thread.
// Nothing here allocates during a phase. The worker takes the histograms after each phase
// (take()), adds them up per node by each slot's CPU, and computes percentiles then.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

namespace allocmark::workloads {

// Durations in nanoseconds, log-linear: exact below 16 ns, then 16 buckets per power of two, so a
// bucket is at most 1/16 (6.25 %) of its lower bound wide. Up to 2^40 ns (18 minutes); longer
// durations count in the last bucket (the exact maximum is kept apart).
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 4;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kMaxExponent = 40;
  static constexpr int kBuckets = (kMaxExponent - kSubBits + 2) * kSub;

  static int bucket_of(uint64_t ns);
  static uint64_t bucket_low(int bucket);   // smallest duration counted in `bucket`
  static uint64_t bucket_high(int bucket);  // largest duration counted in `bucket`

  void record(uint64_t ns);
  void add_bucket(int bucket, uint64_t count) { counts_[bucket] += count, count_ += count; }
  void note_max(uint64_t ns) { max_ = ns > max_ ? ns : max_; }
  void merge(const LatencyHistogram& other);
  void clear();

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  uint64_t in_bucket(int bucket) const { return counts_[bucket]; }
  // The q-quantile (0 < q <= 1): the upper bound of the bucket holding the ceil(q * count)-th
  // smallest duration, but never above the exact maximum; 0 without samples. So
  // percentile(a) <= percentile(b) <= max() for a <= b.
  uint64_t percentile(double q) const;

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0, max_ = 0;
};

namespace call_latency {

// Sets N (0: off) and makes `bound_slots` slots for crew threads; clears every histogram. Call
// before the threads that allocate exist (a thread reads N on its first call).
void configure(uint32_t every, int bound_slots);
uint32_t every();
// The calling thread counts into bound slot `index` from now on (a crew thread, once, before the
// phases). Threads never bound count into the shared slots.
void bind_thread(int index);
// Slots for threads a workload starts itself (arena_churn's pool): `count` more slots after the
// crew's, each with an address ring (address_sample.h), so those threads' latencies and blocks
// are attributed to their node like a crew thread's. Call from the workload's constructor
// (before the phases: it allocates). bind_pool_thread(j) binds the calling thread to pool slot j;
// threads that follow one another in a pool position may share it, two running at once may not
// (the ring is one writer's).
void reserve_pool_slots(int count);
void bind_pool_thread(int index);
// The calling thread's countdowns start afresh (its next call counts as its first): for a thread
// that outlives a configure(), such as a benchmark's.
void restart_thread();
// Adds what every slot counted since the last take() (or configure()) to `allocs` and `frees`,
// and empties the slots. Call between phases, from one thread.
void take(LatencyHistogram& allocs, LatencyHistogram& frees);

// The same, slot by slot: crew slots first, then pool slots, each with the CPU of its last timed
// call (-1: none), so the worker can add them up per NUMA node; the shared slots' counts (threads
// with no slot of their own) only in `shared_*`. size() is slot_count() after a take().
struct PerSlot {
  std::vector<LatencyHistogram> allocs, frees;
  std::vector<int> cpus;
  LatencyHistogram shared_allocs, shared_frees;
  // Everything, as take(allocs, frees) would give it.
  void merge_into(LatencyHistogram& allocs, LatencyHistogram& frees) const;
  void clear();
};
int slot_count();
// Sizes `out` for slot_count() (allocates: not inside a phase) and empties it.
void prepare(PerSlot& out);
// Adds every slot's counts to `out` (prepared for the current slot_count()) and empties the
// slots; allocation-free.
void take(PerSlot& out);

// Per-thread countdowns: each reaches 0 on the sampled call. `started` is false until the
// thread's first call, which sets both to N (constant-initialised, so reading them is one
// thread-local load with no initialisation check).
struct Countdown {
  uint32_t alloc_left = 1, free_left = 1;
  bool started = false;
  void* slot = nullptr;
};
extern constinit thread_local Countdown t_countdown;

void* sampled_allocate(std::size_t size);
void sampled_release(void* p);
// The same for another allocation or release function (allocate_by, release_by): `call(context)`
// is the call, timed and noted like malloc's and free's.
void* sampled_allocate_by(void* (*call)(void*), void* context);
void sampled_release_by(void (*call)(void*), void* context);

}  // namespace call_latency

// Blocks this large are always noted for the placement figures (address_sample.h), timed or not:
// they hold most of the memory, they are few (hash_build allocates little else, so one call in N
// left its local fraction without a sample), and malloc costs far more for them than the note.
inline constexpr std::size_t kAlwaysNotedBytes = 64 << 10;

// The workloads' malloc and free.
inline void* allocate(std::size_t size) {
  if (--call_latency::t_countdown.alloc_left != 0 && size < kAlwaysNotedBytes) [[likely]]
    return std::malloc(size);
  return call_latency::sampled_allocate(size);
}

inline void release(void* p) {
  if (--call_latency::t_countdown.free_left != 0) [[likely]] {
    std::free(p);
    return;
  }
  call_latency::sampled_release(p);
}

// Any other allocation function (calloc, posix_memalign, operator new, ...: the replay workload
// calls what its trace recorded), counted into the same countdown and histograms as allocate():
// `call()` returns the block of `size` requested bytes. The sampled call's time includes one
// indirect call more than allocate()'s.
template <class Call>
inline void* allocate_by(std::size_t size, Call&& call) {
  if (--call_latency::t_countdown.alloc_left != 0 && size < kAlwaysNotedBytes) [[likely]]
    return call();
  return call_latency::sampled_allocate_by(
      [](void* c) -> void* { return (*static_cast<std::remove_reference_t<Call>*>(c))(); }, &call);
}

// Any other release function (operator delete in its forms), counted like release().
template <class Call>
inline void release_by(Call&& call) {
  if (--call_latency::t_countdown.free_left != 0) [[likely]] {
    call();
    return;
  }
  call_latency::sampled_release_by([](void* c) { (*static_cast<std::remove_reference_t<Call>*>(c))(); }, &call);
}

}  // namespace allocmark::workloads
