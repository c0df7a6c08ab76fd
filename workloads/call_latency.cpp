#include "workloads/call_latency.h"

#include "workloads/address_sample.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include "harness/os/clock.h"

namespace allocmark::workloads {

int LatencyHistogram::bucket_of(uint64_t ns) {
  if (ns < static_cast<uint64_t>(kSub)) return static_cast<int>(ns);
  const int exponent = 63 - std::countl_zero(ns);
  if (exponent > kMaxExponent) return kBuckets - 1;
  const int sub = static_cast<int>(ns >> (exponent - kSubBits)) - kSub;
  return (exponent - kSubBits + 1) * kSub + sub;
}

uint64_t LatencyHistogram::bucket_low(int bucket) {
  if (bucket < kSub) return static_cast<uint64_t>(bucket);
  const int exponent = bucket / kSub + kSubBits - 1;
  return static_cast<uint64_t>(kSub + bucket % kSub) << (exponent - kSubBits);
}

uint64_t LatencyHistogram::bucket_high(int bucket) {
  if (bucket < kSub) return static_cast<uint64_t>(bucket);
  const int exponent = bucket / kSub + kSubBits - 1;
  if (bucket == kBuckets - 1) return std::numeric_limits<uint64_t>::max();  // and everything longer
  return bucket_low(bucket) + (uint64_t{1} << (exponent - kSubBits)) - 1;
}

void LatencyHistogram::record(uint64_t ns) {
  add_bucket(bucket_of(ns), 1);
  note_max(ns);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (int b = 0; b < kBuckets; ++b) counts_[b] += other.counts_[b];
  count_ += other.count_;
  note_max(other.max_);
}

void LatencyHistogram::clear() {
  counts_.fill(0);
  count_ = max_ = 0;
}

uint64_t LatencyHistogram::percentile(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) return std::min(bucket_high(b), max_);
  }
  return max_;
}

namespace call_latency {
namespace {

// One thread's (or, shared, a few threads') counts. Atomic so the worker can empty a slot while
// a thread the workload started is still running; relaxed, since only the totals matter.
struct AtomicHistogram {
  std::array<std::atomic<uint64_t>, LatencyHistogram::kBuckets> counts{};
  std::atomic<uint64_t> max{0};

  void record(uint64_t ns) {
    counts[LatencyHistogram::bucket_of(ns)].fetch_add(1, std::memory_order_relaxed);
    uint64_t seen = max.load(std::memory_order_relaxed);
    while (ns > seen && !max.compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
    }
  }
  void drain_into(LatencyHistogram& out) {
    for (int b = 0; b < LatencyHistogram::kBuckets; ++b)
      if (uint64_t n = counts[b].exchange(0, std::memory_order_relaxed)) out.add_bucket(b, n);
    out.note_max(max.exchange(0, std::memory_order_relaxed));
  }
};

struct alignas(64) Slot {
  AtomicHistogram allocs, frees;
  std::atomic<int> cpu{-1};  // of the slot's last timed call
};

// Threads a workload starts itself share these, spread by address so that a pool's threads
// rarely meet on one slot.
constexpr std::size_t kSharedSlots = 16;
Slot g_shared[kSharedSlots];
// Crew slots, then pool slots (reserve_pool_slots).
std::unique_ptr<Slot[]> g_bound;
int g_bound_count = 0, g_crew_count = 0;
std::atomic<uint32_t> g_every{0};

uint64_t now_ns() { return static_cast<uint64_t>(allocmark::os::monotonic_ns()); }

// The countdown's restart value: N, or as far away as it goes when timing is off.
uint32_t restart_value() {
  uint32_t n = g_every.load(std::memory_order_relaxed);
  return n == 0 ? std::numeric_limits<uint32_t>::max() : n;
}

Slot& slot_of(Countdown& c) {
  if (!c.slot) c.slot = &g_shared[(reinterpret_cast<uintptr_t>(&c) >> 12) % kSharedSlots];
  return *static_cast<Slot*>(c.slot);
}

// A thread's first call: both countdowns start at N, and this call is the first of them.
// Returns true when this very call is the one to time (N = 1).
bool start(Countdown& c, uint32_t& left) {
  c.started = true;
  c.alloc_left = c.free_left = restart_value();
  return --left == 0;
}

}  // namespace

constinit thread_local Countdown t_countdown;

namespace {

// The slow path of allocate() and release(): `call` timed when it is the thread's N-th since the
// last timed one, else run as it is (the thread's first call, or timing off).
template <class Call>
void* counted(uint32_t Countdown::*left, AtomicHistogram Slot::*histogram, Call call) {
  Countdown& c = t_countdown;
  if (!c.started && !start(c, c.*left)) return call();
  c.*left = restart_value();
  if (g_every.load(std::memory_order_relaxed) == 0) return call();
  const uint64_t t0 = now_ns();
  void* result = call();
  const uint64_t t1 = now_ns();
  Slot& slot = slot_of(c);
  (slot.*histogram).record(t1 - t0);
  slot.cpu.store(sched_getcpu(), std::memory_order_relaxed);
  return result;
}

}  // namespace

void configure(uint32_t every, int bound_slots) {
  g_every.store(every, std::memory_order_relaxed);
  g_bound = std::make_unique<Slot[]>(static_cast<std::size_t>(bound_slots));
  g_bound_count = g_crew_count = bound_slots;
  LatencyHistogram discard;
  for (auto& s : g_shared) s.allocs.drain_into(discard), s.frees.drain_into(discard);
}

uint32_t every() { return g_every.load(std::memory_order_relaxed); }

void bind_thread(int index) { t_countdown.slot = &g_bound[static_cast<std::size_t>(index)]; }

void reserve_pool_slots(int count) {
  g_bound_count = g_crew_count + count;
  g_bound = std::make_unique<Slot[]>(static_cast<std::size_t>(g_bound_count));
  address_sample::configure(g_bound_count);
}

void bind_pool_thread(int index) {
  if (index < 0 || g_crew_count + index >= g_bound_count) return;  // stays on the shared slots, no ring
  t_countdown.slot = &g_bound[static_cast<std::size_t>(g_crew_count + index)];
  address_sample::bind_thread(g_crew_count + index);
}

void restart_thread() {
  t_countdown.alloc_left = t_countdown.free_left = 1;
  t_countdown.started = false;
}

void take(LatencyHistogram& allocs, LatencyHistogram& frees) {
  for (int i = 0; i < g_bound_count; ++i) g_bound[i].allocs.drain_into(allocs), g_bound[i].frees.drain_into(frees);
  for (auto& s : g_shared) s.allocs.drain_into(allocs), s.frees.drain_into(frees);
}

void PerSlot::merge_into(LatencyHistogram& all_allocs, LatencyHistogram& all_frees) const {
  for (const auto& h : allocs) all_allocs.merge(h);
  for (const auto& h : frees) all_frees.merge(h);
  all_allocs.merge(shared_allocs);
  all_frees.merge(shared_frees);
}

void PerSlot::clear() {
  for (auto& h : allocs) h.clear();
  for (auto& h : frees) h.clear();
  std::fill(cpus.begin(), cpus.end(), -1);
  shared_allocs.clear();
  shared_frees.clear();
}

int slot_count() { return g_bound_count; }

void prepare(PerSlot& out) {
  const auto n = static_cast<std::size_t>(g_bound_count);
  out.allocs.resize(n);
  out.frees.resize(n);
  out.cpus.resize(n);
  out.clear();
}

void take(PerSlot& out) {
  const int n = std::min(g_bound_count, static_cast<int>(out.allocs.size()));
  for (int i = 0; i < n; ++i) {
    g_bound[i].allocs.drain_into(out.allocs[i]);
    g_bound[i].frees.drain_into(out.frees[i]);
    if (int cpu = g_bound[i].cpu.exchange(-1, std::memory_order_relaxed); cpu >= 0) out.cpus[i] = cpu;
  }
  for (auto& s : g_shared) s.allocs.drain_into(out.shared_allocs), s.frees.drain_into(out.shared_frees);
}

void* sampled_allocate(std::size_t size) {
  if (t_countdown.alloc_left != 0) {  // not the N-th call, a large block: noted, not timed
    void* p = std::malloc(size);
    address_sample::note(p);
    return p;
  }
  void* p = counted(&Countdown::alloc_left, &Slot::allocs, [size] { return std::malloc(size); });
  // The same one call in N gives the placement figures their blocks (address_sample.h).
  address_sample::note(p);
  return p;
}

void sampled_release(void* p) {
  counted(&Countdown::free_left, &Slot::frees, [p] {
    std::free(p);
    return static_cast<void*>(nullptr);
  });
}

void* sampled_allocate_by(void* (*call)(void*), void* context) {
  if (t_countdown.alloc_left != 0) {
    void* p = call(context);
    address_sample::note(p);
    return p;
  }
  void* p = counted(&Countdown::alloc_left, &Slot::allocs, [call, context] { return call(context); });
  address_sample::note(p);
  return p;
}

void sampled_release_by(void (*call)(void*), void* context) {
  counted(&Countdown::free_left, &Slot::frees, [call, context] {
    call(context);
    return static_cast<void*>(nullptr);
  });
}

}  // namespace call_latency
}  // namespace allocmark::workloads
