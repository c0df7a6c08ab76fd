// The latency histogram's buckets and percentiles against hand-computed values, and the countdown:
// exactly the N-th, 2N-th, ... call of each thread is timed, none with N = 0.
#include "workloads/call_latency.h"

#include "workloads/address_sample.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

using namespace allocmark::workloads;

TEST(LatencyHistogram, BucketsAreExactBelowSixteenThenSixteenPerPowerOfTwo) {
  for (uint64_t v = 0; v < 32; ++v) {
    EXPECT_EQ(LatencyHistogram::bucket_of(v), static_cast<int>(v));
    EXPECT_EQ(LatencyHistogram::bucket_low(static_cast<int>(v)), v);
    EXPECT_EQ(LatencyHistogram::bucket_high(static_cast<int>(v)), v);
  }
  // 32..63 in steps of 2: 32 and 33 share bucket 32, 34 opens bucket 33.
  EXPECT_EQ(LatencyHistogram::bucket_of(33), 32);
  EXPECT_EQ(LatencyHistogram::bucket_of(34), 33);
  // 1000 = 0b1111101000: exponent 9, top four bits after the leading one 1111 -> bucket 6*16+15.
  EXPECT_EQ(LatencyHistogram::bucket_of(1000), 111);
  EXPECT_EQ(LatencyHistogram::bucket_low(111), 992u);
  EXPECT_EQ(LatencyHistogram::bucket_high(111), 1023u);
  EXPECT_EQ(LatencyHistogram::bucket_of(1024), 112);
  // Every bucket starts where the previous one ended, and is at most 1/16 of its start wide.
  for (int b = 1; b < LatencyHistogram::kBuckets - 1; ++b) {
    EXPECT_EQ(LatencyHistogram::bucket_low(b), LatencyHistogram::bucket_high(b - 1) + 1) << b;
    EXPECT_EQ(LatencyHistogram::bucket_of(LatencyHistogram::bucket_low(b)), b);
    EXPECT_EQ(LatencyHistogram::bucket_of(LatencyHistogram::bucket_high(b)), b);
    EXPECT_LE((LatencyHistogram::bucket_high(b) - LatencyHistogram::bucket_low(b)) * 16, LatencyHistogram::bucket_low(b));
  }
  EXPECT_EQ(LatencyHistogram::bucket_of(uint64_t{1} << 50), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogram, PercentilesAreTheUpperBoundOfTheRankedBucketCappedAtTheMaximum) {
  LatencyHistogram h;
  EXPECT_EQ(h.percentile(0.5), 0u) << "no samples: 0, and the record says samples = 0";
  for (uint64_t v = 1; v <= 100; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.max(), 100u);
  // 50th value: 50, in bucket [50, 51] -> 51.
  EXPECT_EQ(h.percentile(0.50), 51u);
  // 99th value: 99, in bucket [96, 99] -> 99.
  EXPECT_EQ(h.percentile(0.99), 99u);
  // ceil(99.9) = 100th value: 100, in bucket [100, 103], capped at the maximum 100.
  EXPECT_EQ(h.percentile(0.999), 100u);
  EXPECT_EQ(h.percentile(1.0), 100u);

  LatencyHistogram one;
  one.record(5000);  // bucket [4864, 5119]
  EXPECT_EQ(one.percentile(0.5), 5000u);
  EXPECT_EQ(one.percentile(0.999), 5000u);

  // 999 fast calls and one slow: p99 stays fast, p99.9 is the 999th value (fast), max is the slow one.
  LatencyHistogram tail;
  for (int i = 0; i < 999; ++i) tail.record(40);
  tail.record(1000000);
  EXPECT_EQ(tail.percentile(0.99), 41u);   // bucket [40, 41]
  EXPECT_EQ(tail.percentile(0.999), 41u);
  EXPECT_EQ(tail.max(), 1000000u);

  tail.merge(h);
  EXPECT_EQ(tail.count(), 1100u);
  EXPECT_EQ(tail.max(), 1000000u);
  tail.clear();
  EXPECT_EQ(tail.count(), 0u);
  EXPECT_EQ(tail.max(), 0u);
}

namespace {

// Runs `allocs` allocate() calls and as many release() calls on a fresh thread (fresh countdowns),
// bound to slot `bind` unless it is negative, and returns what was timed.
std::pair<uint64_t, uint64_t> sampled_counts(uint32_t every, int allocs, int bind = -1) {
  call_latency::configure(every, 2);
  std::thread t([&] {
    if (bind >= 0) call_latency::bind_thread(bind);
    std::vector<void*> blocks;
    blocks.reserve(static_cast<std::size_t>(allocs));  // before the counted calls; goes through malloc
    for (int i = 0; i < allocs; ++i) blocks.push_back(allocate(16 + static_cast<std::size_t>(i)));
    for (void* p : blocks) release(p);
  });
  t.join();
  LatencyHistogram a, f;
  call_latency::take(a, f);
  return {a.count(), f.count()};
}

}  // namespace

TEST(CallLatency, TimesExactlyOneCallInN) {
  EXPECT_EQ(sampled_counts(7, 100), std::make_pair(uint64_t{14}, uint64_t{14}));  // calls 7, 14, ..., 98
  EXPECT_EQ(sampled_counts(7, 13), std::make_pair(uint64_t{1}, uint64_t{1}));
  EXPECT_EQ(sampled_counts(100, 99), std::make_pair(uint64_t{0}, uint64_t{0}));
  EXPECT_EQ(sampled_counts(100, 100), std::make_pair(uint64_t{1}, uint64_t{1}));
  EXPECT_EQ(sampled_counts(1, 10), std::make_pair(uint64_t{10}, uint64_t{10}));
  EXPECT_EQ(sampled_counts(5, 50, 1), std::make_pair(uint64_t{10}, uint64_t{10})) << "a bound crew thread";
}

TEST(CallLatency, NZeroTimesNothing) {
  EXPECT_EQ(sampled_counts(0, 1000), std::make_pair(uint64_t{0}, uint64_t{0}));
  EXPECT_EQ(call_latency::every(), 0u);
}

TEST(CallLatency, TakeEmptiesTheSlots) {
  sampled_counts(2, 10);
  LatencyHistogram a, f;
  call_latency::take(a, f);
  EXPECT_EQ(a.count() + f.count(), 0u);
}

TEST(CallLatency, ThreadsCountSeparatelyAndAddUp) {
  call_latency::configure(4, 3);
  std::vector<std::thread> crew;
  for (int i = 0; i < 3; ++i)
    crew.emplace_back([i] {
      if (i < 2) call_latency::bind_thread(i);  // the third counts into a shared slot
      for (int k = 0; k < 41; ++k) release(allocate(64));
    });
  for (auto& t : crew) t.join();
  LatencyHistogram a, f;
  call_latency::take(a, f);
  EXPECT_EQ(a.count(), 30u);  // 3 threads x floor(41 / 4)
  EXPECT_EQ(f.count(), 30u);
  EXPECT_LE(a.percentile(0.5), a.percentile(0.99));
  EXPECT_LE(a.percentile(0.999), a.max());
}

TEST(CallLatency, SlotBySlotWithEachSlotsCpu) {
  call_latency::configure(2, 2);
  call_latency::reserve_pool_slots(3);
  EXPECT_EQ(call_latency::slot_count(), 5);
  call_latency::PerSlot slots;
  call_latency::prepare(slots);
  auto on_thread = [](auto bind, int calls) {
    std::thread t([&] {
      bind();
      for (int k = 0; k < calls; ++k) release(allocate(64));
    });
    t.join();
  };
  on_thread([] { call_latency::bind_thread(1); }, 10);       // crew slot 1: 5 timed pairs
  on_thread([] { call_latency::bind_pool_thread(2); }, 20);  // pool slot 2 = slot 4: 10
  on_thread([] { call_latency::bind_pool_thread(2); }, 4);   // the next thread in that pool position: 2 more
  on_thread([] { call_latency::bind_pool_thread(3); }, 6);   // beyond the reserved: shared, 3
  call_latency::take(slots);
  ASSERT_EQ(slots.allocs.size(), 5u);
  EXPECT_EQ(slots.allocs[1].count(), 5u);
  EXPECT_EQ(slots.frees[4].count(), 12u);
  EXPECT_EQ(slots.allocs[0].count() + slots.allocs[2].count() + slots.allocs[3].count(), 0u);
  EXPECT_EQ(slots.shared_allocs.count(), 3u);
  EXPECT_GE(slots.cpus[1], 0) << "the CPU of the slot's last timed call";
  EXPECT_GE(slots.cpus[4], 0);
  EXPECT_EQ(slots.cpus[0], -1) << "no timed call";
  LatencyHistogram a, f;
  slots.merge_into(a, f);
  EXPECT_EQ(a.count(), 5u + 12u + 3u);
  call_latency::take(slots);
  EXPECT_EQ(slots.allocs[1].count(), 5u) << "take() adds; the slots were emptied by the first";
}

TEST(CallLatency, PoolThreadsAndLargeBlocksAreNotedForPlacement) {
  call_latency::configure(1000, 1);
  address_sample::configure(1);
  call_latency::reserve_pool_slots(1);  // ring 1 for the pool's position 0
  ASSERT_EQ(address_sample::rings(), 2);
  void* large = nullptr;
  std::thread t([&] {
    call_latency::bind_pool_thread(0);
    void* first = allocate(64);   // a thread's first call goes the slow way (noted, not timed)
    void* second = allocate(64);  // an ordinary call: neither
    large = allocate(kAlwaysNotedBytes);  // not the 1000th call, but large: noted
    release(first);
    release(second);
    release(large);
  });
  t.join();
  address_sample::Sample out[address_sample::kRingSize];
  EXPECT_EQ(address_sample::take(0, out), 0u) << "the crew's ring";
  ASSERT_EQ(address_sample::take(1, out), 2u);
  EXPECT_EQ(out[1].address, large);
  EXPECT_GE(out[1].cpu, 0);
  LatencyHistogram a, f;
  call_latency::take(a, f);
  EXPECT_EQ(a.count(), 0u) << "noted, not timed";
  address_sample::bind_thread(-1);
}
