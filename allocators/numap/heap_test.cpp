// The heap with injected topology and platform: NUMA placement on the seed-001 machine, the
// capacity (purge before ENOMEM, merged runs), failures of mmap/madvise, and the API's edges.
#include "allocators/numap/heap.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <new>
#include <thread>
#include <vector>

namespace numap {
namespace {

using Stats = struct numap_stats;

const int kSeed001[64] = {
    10, 16, 16, 16, 32, 32, 32, 32, 16, 10, 16, 16, 32, 32, 32, 32, 16, 16, 10, 16, 32, 32,
    32, 32, 16, 16, 16, 10, 32, 32, 32, 32, 32, 32, 32, 32, 10, 16, 16, 16, 32, 32, 32, 32,
    16, 10, 16, 16, 32, 32, 32, 32, 16, 16, 10, 16, 32, 32, 32, 32, 16, 16, 16, 10};

// A platform whose CPU, binding and failures the test controls; memory is real.
struct FakeOs {
  static inline int cpu = 0;
  static inline int binds = 0;
  static inline std::uint64_t bound_nodes = 0;
  static inline bool fail_reserve = false;
  static inline bool fail_advise = false;
  static inline int advises = 0;
  static void* reserve(std::size_t b) { return fail_reserve ? nullptr : real_os().reserve(b); }
  static int unmap(void* p, std::size_t b) { return real_os().unmap(p, b); }
  static int advise_free(void* p, std::size_t b) {
    ++advises;
    return fail_advise ? -1 : real_os().advise_free(p, b);
  }
  static int advise_huge(void* p, std::size_t b, bool h) { return real_os().advise_huge(p, b, h); }
  static int bind(void*, std::size_t, int node) {
    ++binds;
    bound_nodes |= 1ull << node;
    return 0;
  }
  static int current_cpu() { return cpu; }
  static std::uint64_t policy_nodes() { return 0; }
  static inline std::atomic<std::uint64_t> now{1000};  // the clock decay reads; tests move it
  static std::uint64_t now_ms() { return now.load(); }
  static void reset() {
    now = 1000;
    cpu = 0;
    binds = 0;
    bound_nodes = 0;
    fail_reserve = fail_advise = false;
    advises = 0;
  }
};
const OsOps kFakeOps{FakeOs::reserve, FakeOs::unmap, FakeOs::advise_free, FakeOs::advise_huge,
                     FakeOs::bind,    FakeOs::current_cpu, FakeOs::policy_nodes, FakeOs::now_ms};

class HeapTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeOs::reset(); }
  void TearDown() override {
    if (heap_ready) heap.destroy();
  }
  // Eight nodes of `node_cap` bytes each, 4 CPUs per node.
  void make_numa(std::uint64_t node_cap, int limit = 0, BeyondLimit beyond = BeyondLimit::kPurge) {
    Topology t;
    topology_from_table(&t, 8, kSeed001, node_cap, 4);
    Options o;
    o.class_span = 1ull << 30;
    o.distance_limit = limit;
    o.beyond_limit = beyond;
    o.tcache = false;
    ASSERT_TRUE(heap.init(o, t, &os));
    heap_ready = true;
  }
  void make_single(std::uint64_t capacity) {
    Topology t;
    topology_single(&t, 0);
    Options o;
    o.class_span = 1ull << 30;
    o.capacity = capacity;
    ASSERT_TRUE(heap.init(o, t, &os));
    heap_ready = true;
  }
  // One node, no capacity, no thread caches (every page-class call reaches the Slots).
  void make_decay(long long decay_ms, bool thread, long long exchange_ms) {
    Topology t;
    topology_single(&t, 0);
    Options o;
    o.class_span = 1ull << 30;
    o.decay_ms = decay_ms;
    o.decay_thread = thread;
    o.exchange_ms = exchange_ms;
    o.tcache = false;
    ASSERT_TRUE(heap.init(o, t, &os));
    heap_ready = true;
  }
  // n allocations of `bytes`, every page touched (resident).
  std::vector<void*> touched(int n, std::size_t bytes) {
    std::vector<void*> v;
    for (int i = 0; i < n; ++i) {
      v.push_back(heap.malloc(bytes));
      memset(v.back(), 1, bytes);
    }
    return v;
  }
  Stats stats() {
    Stats s{};
    s.struct_size = sizeof s;
    heap.stats(&s, nullptr, 0);
    return s;
  }

  Os os{kFakeOps};
  Heap heap;
  bool heap_ready = false;
};

constexpr std::size_t kChunk = 256 << 10;  // a power-of-two page class

TEST_F(HeapTest, EveryNodeIsBoundBeforeFirstTouch) {
  make_numa(1 << 20);
  EXPECT_TRUE(heap.numa());
  EXPECT_EQ(heap.parts(), 8);
  EXPECT_EQ(FakeOs::binds, 8);
  EXPECT_EQ(FakeOs::bound_nodes, 0xffu);
}

TEST_F(HeapTest, AllocationsStartOnTheCallingCpusNode) {
  make_numa(1 << 20);
  for (int cpu : {0, 5, 13, 30}) {
    FakeOs::cpu = cpu;
    void* p = heap.malloc(kChunk);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(heap.node_of(p), cpu / 4);
    void* q = heap.malloc(100);  // small objects too (no thread cache in this heap)
    EXPECT_EQ(heap.node_of(q), cpu / 4);
    heap.free(p);
    heap.free(q);
  }
}

TEST_F(HeapTest, FullNodeFallsBackByDistanceThenMostFree) {
  make_numa(1 << 20);  // four 256 KiB chunks per node
  auto fill = [&](int node, int chunks, std::vector<void*>& keep) {
    FakeOs::cpu = node * 4;
    for (int i = 0; i < chunks; ++i) {
      keep.push_back(heap.malloc(kChunk));
      ASSERT_EQ(heap.node_of(keep.back()), node);
    }
  };
  std::vector<void*> keep;
  fill(0, 4, keep);
  fill(1, 3, keep);  // free: node1 256K, node2 1M, node3 768K (after the next line)
  fill(3, 1, keep);
  FakeOs::cpu = 0;
  void* p = heap.malloc(kChunk);
  EXPECT_EQ(heap.node_of(p), 2);  // distance 16, most free
  keep.push_back(p);
  // Fill every distance-16 node: node 0's next fallback is at distance 32 (node 4, all equal).
  fill(2, 3, keep);
  fill(3, 3, keep);
  fill(1, 1, keep);
  FakeOs::cpu = 0;
  p = heap.malloc(kChunk);
  EXPECT_EQ(heap.node_of(p), 4);
  keep.push_back(p);
  Stats s = stats();
  ASSERT_EQ(s.fallback_distance[0], 16u);
  EXPECT_EQ(s.fallback_count[0], 1u);
  ASSERT_EQ(s.fallback_distance[1], 32u);
  EXPECT_EQ(s.fallback_count[1], 1u);
  EXPECT_EQ(s.node[2].fallback_in, 1u);
  for (void* q : keep) heap.free(q);
}

TEST_F(HeapTest, DistanceLimitFailsBeyondIt) {
  make_numa(1 << 20, 16, BeyondLimit::kFail);
  std::vector<void*> keep;
  FakeOs::cpu = 0;
  for (int i = 0; i < 16; ++i) {  // nodes 0-3 hold 16 chunks
    keep.push_back(heap.malloc(kChunk));
    ASSERT_NE(keep.back(), nullptr);
    ASSERT_LT(heap.node_of(keep.back()), 4);
  }
  errno = 0;
  EXPECT_EQ(heap.malloc(kChunk), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  FakeOs::cpu = 16;  // node 4 still has room for its own CPUs
  void* p = heap.malloc(kChunk);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(heap.node_of(p), 4);
  heap.free(p);
  for (void* q : keep) heap.free(q);
}

TEST_F(HeapTest, DistanceLimitPurgesBeyondItWhenConfigured) {
  make_numa(1 << 20, 16, BeyondLimit::kPurge);
  std::vector<void*> keep;
  FakeOs::cpu = 0;
  for (int i = 0; i < 16; ++i) keep.push_back(heap.malloc(kChunk));
  heap.free(keep.back());  // a free but mapped 256 KiB chunk on some node 0-3
  keep.pop_back();
  // A class more than a doubling below (192 KiB would borrow the free chunk's resident pages):
  // needs the free chunk's pages purged.
  void* p = heap.malloc(64 << 10);
  ASSERT_NE(p, nullptr);
  EXPECT_LT(heap.node_of(p), 4);
  EXPECT_GE(FakeOs::advises, 1);
  keep.push_back(p);
  for (void* q : keep) heap.free(q);
}

TEST_F(HeapTest, CapacityPurgesFreePagesThenFailsWithEnomem) {
  make_single(8 << 20);
  std::vector<void*> keep;
  for (;;) {
    void* p = heap.malloc(1 << 20);
    if (p == nullptr) break;
    memset(p, 1, 1 << 20);
    keep.push_back(p);
    ASSERT_LE(heap.mapped_bytes(), 8u << 20);
  }
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(keep.size(), 8u);
  EXPECT_EQ(stats().enomem, 1u);
  // Four neighbouring chunks freed: one merged run, one madvise, when another class needs room.
  for (int i = 2; i < 6; ++i) heap.free(keep[i]);
  const int before = FakeOs::advises;
  void* big = heap.malloc(3 << 20);
  ASSERT_NE(big, nullptr);
  memset(big, 2, 3 << 20);
  // One merged run of exactly the 3 MiB needed; the last free chunk is young, so no exchange.
  EXPECT_EQ(FakeOs::advises - before, 1);
  EXPECT_LE(heap.mapped_bytes(), 8u << 20);
  EXPECT_EQ(stats().advised_bytes, 3u << 20);
  EXPECT_EQ(stats().exchanged_bytes, 0u);
  heap.free(big);
  heap.free(keep[0]);
  heap.free(keep[1]);
  heap.free(keep[6]);
  heap.free(keep[7]);
  EXPECT_GT(heap.purge(), 0u);
  EXPECT_EQ(heap.mapped_bytes(), 0u);
}

TEST_F(HeapTest, FreshOrPurgedMemoryIsZeroForCalloc) {
  make_single(0);
  char* p = static_cast<char*>(heap.malloc(100 << 10));
  memset(p, 0x5a, 100 << 10);
  heap.free(p);
  char* q = static_cast<char*>(heap.calloc(1, 100 << 10));  // the same dirty chunk
  for (int i = 0; i < (100 << 10); ++i) ASSERT_EQ(q[i], 0) << i;
  heap.free(q);
  heap.purge();
  q = static_cast<char*>(heap.calloc(10, 10 << 10));
  for (int i = 0; i < (100 << 10); ++i) ASSERT_EQ(q[i], 0) << i;
  heap.free(q);
}

TEST_F(HeapTest, FailingMadviseKeepsPagesCharged) {
  make_single(0);
  void* p = heap.malloc(1 << 20);
  heap.free(p);
  FakeOs::fail_advise = true;
  EXPECT_EQ(heap.purge(), 0u);
  EXPECT_GE(heap.mapped_bytes(), 1u << 20);
  FakeOs::fail_advise = false;
  EXPECT_GE(heap.purge(), 1u << 20);
}

TEST_F(HeapTest, FailingMmapIsEnomem) {
  FakeOs::fail_reserve = true;
  Topology t;
  topology_single(&t, 0);
  Options o;
  EXPECT_FALSE(heap.init(o, t, &os));
  FakeOs::fail_reserve = false;
  make_single(0);
  FakeOs::fail_reserve = true;  // huge allocations map their own range
  errno = 0;
  EXPECT_EQ(heap.malloc(heap.max_class() + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  FakeOs::fail_reserve = false;
  void* p = heap.malloc(heap.max_class() + 1);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(heap.usable_size(p), heap.max_class() + 1);
  heap.free(p);
}

TEST_F(HeapTest, AlignmentUsableSizeAndRealloc) {
  make_single(0);
  for (std::size_t align = 16; align <= (1 << 20); align *= 2)
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, align - 1, align, 3 * align + 5}) {
      void* p = heap.memalign(align, n);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << align << " " << n;
      EXPECT_GE(heap.usable_size(p), n);
      heap.free(p);
    }
  char* p = static_cast<char*>(heap.malloc(10));
  memcpy(p, "numap-abc", 10);
  p = static_cast<char*>(heap.realloc(p, 50000));
  EXPECT_STREQ(p, "numap-abc");
  void* same = heap.realloc(p, 55000);  // same page class: in place
  EXPECT_EQ(same, p);
  p = static_cast<char*>(heap.realloc(p, 5));
  EXPECT_EQ(memcmp(p, "numap", 5), 0);
  heap.free(p);
}

TEST_F(HeapTest, ThreadExitReturnsCachedObjects) {
  make_single(0);
  std::thread([&] {
    std::vector<void*> v;
    for (int i = 0; i < 1000; ++i) v.push_back(heap.malloc(48));
    for (void* p : v) heap.free(p);
  }).join();
  numap_class_stats c[200];
  std::size_t n = heap.stats(nullptr, c, 200);
  ASSERT_GT(n, 3u);
  EXPECT_EQ(c[2].size, 48u);
  EXPECT_EQ(c[2].in_use_bytes, 0u);  // nothing left in the dead thread's cache
  EXPECT_EQ(c[2].allocs, c[2].frees);
  Stats s = stats();
  EXPECT_GT(s.tcache_hits, 0u);
  EXPECT_GT(s.tcache_misses, 0u);
}

TEST_F(HeapTest, PageClassCacheHitsAndPurgeReclaimsOtherThreadsCache) {
  make_single(1 << 20);
  std::atomic<int> phase{0};
  std::thread other([&] {
    std::vector<void*> v;
    for (int i = 0; i < 8; ++i) v.push_back(heap.malloc(64 << 10));  // 512 KiB charged
    for (void* p : v) heap.free(p);                                    // into this thread's cache
    for (int i = 0; i < 100; ++i) heap.free(heap.malloc(64 << 10));   // cache hits, no lock
    phase = 1;
    while (phase != 2) std::this_thread::yield();
  });
  while (phase != 1) std::this_thread::yield();
  EXPECT_EQ(heap.mapped_bytes(), 512u << 10);
  // 768 KiB more would cross the capacity: purge must take the other (live) thread's cached chunks.
  void* p = heap.malloc(768 << 10);
  EXPECT_NE(p, nullptr);
  EXPECT_LE(heap.mapped_bytes(), 1u << 20);
  EXPECT_GE(FakeOs::advises, 1);
  heap.free(p);
  phase = 2;
  other.join();
  Stats s = stats();
  EXPECT_GE(s.tcache_hits, 100u);
}

TEST_F(HeapTest, DecayAdvisesAwayOnlyChunksIdleLongerThanTheDecayTime) {
  make_decay(100, false, 0);
  std::vector<void*> v = touched(8, 1 << 20);
  for (void* p : v) heap.free(p);
  // Hot churn over 3.5 decay times, every chunk reused within 10 ms of its free: nothing is old.
  for (int step = 0; step < 35; ++step) {
    FakeOs::now += 10;
    for (auto& p : v) p = heap.malloc(1 << 20);
    for (void* p : v) heap.free(p);
  }
  EXPECT_GT(stats().decay_passes, 0u);
  EXPECT_EQ(stats().advised_bytes, 0u);
  EXPECT_EQ(stats().decay_bytes, 0u);
  EXPECT_EQ(heap.mapped_bytes(), 8u << 20);
  // Idle past the decay time: the next slow path advises the 8 idle chunks away (one merged run).
  FakeOs::now += 150;
  const int before = FakeOs::advises;
  void* p = heap.malloc(1 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(stats().decay_bytes, 8u << 20);
  EXPECT_EQ(stats().advised_bytes, 8u << 20);
  EXPECT_EQ(FakeOs::advises - before, 1);
  EXPECT_EQ(heap.mapped_bytes(), 1u << 20);  // only the chunk just handed out
  heap.free(p);
}

TEST_F(HeapTest, DecayZeroNeverAdvises) {
  make_decay(0, true, 0);
  void* p = heap.malloc(1 << 20);
  memset(p, 1, 1 << 20);
  heap.free(p);
  FakeOs::now += 1000000;
  heap.free(heap.malloc(2 << 20));
  EXPECT_EQ(stats().decay_passes, 0u);
  EXPECT_EQ(stats().advised_bytes, 0u);
}

TEST_F(HeapTest, BackgroundThreadDecaysWithoutAllocations) {
  make_decay(40, true, 0);
  for (void* p : touched(4, 1 << 20)) heap.free(p);  // the first slow path starts the thread
  FakeOs::now += 100;  // past the decay time; the program makes no call from here on
  for (int i = 0; i < 2000 && stats().decay_bytes == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(stats().decay_bytes, 4u << 20);
  EXPECT_EQ(heap.mapped_bytes(), 0u);
}

TEST_F(HeapTest, ExchangeReleasesOtherClassesIdlePagesBeforeFreshPages) {
  for (bool exchange : {true, false}) {
    make_decay(0, false, exchange ? 50 : 0);
    for (void* p : touched(8, 1 << 20)) heap.free(p);
    // Freed just now: hot, kept even though another class needs fresh pages.
    FakeOs::now += 10;
    heap.free(heap.malloc(2 << 20));
    EXPECT_EQ(stats().exchanged_bytes, 0u);
    EXPECT_EQ(heap.mapped_bytes(), 10u << 20);
    FakeOs::now += 100;  // idle past EXCHANGE_MS
    void* big = heap.malloc(4 << 20);  // another class, fresh pages
    ASSERT_NE(big, nullptr);
    memset(big, 2, 4 << 20);
    if (exchange) {
      EXPECT_EQ(stats().exchanged_bytes, 4u << 20);  // as many idle resident bytes as fresh ones
      EXPECT_EQ(heap.mapped_bytes(), 10u << 20);
    } else {
      EXPECT_EQ(stats().exchanged_bytes, 0u);
      EXPECT_EQ(heap.mapped_bytes(), 14u << 20);
    }
    heap.free(big);
    heap.destroy();
    heap_ready = false;
    heap.~Heap();
    new (&heap) Heap();
  }
}

TEST_F(HeapTest, BorrowedChunksAreCounted) {
  make_decay(0, false, 0);
  void* p = heap.malloc(1 << 20);
  memset(p, 1, 1 << 20);
  heap.free(p);
  void* q = heap.malloc(800 << 10);  // the 896 KiB class, empty: borrows the resident 1 MiB chunk
  EXPECT_EQ(q, p);
  EXPECT_EQ(stats().borrowed_bytes, 1u << 20);
  heap.free(q);
}

TEST_F(HeapTest, ForkedChildOfAMultithreadedParentAllocates) {
  make_single(0);
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) heap.free(heap.malloc(200));
  });
  for (int i = 0; i < 20; ++i) {
    heap.fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
      heap.fork_child();
      for (int k = 0; k < 1000; ++k) heap.free(heap.malloc(k * 37));
      _exit(0);
    }
    heap.fork_parent();
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  stop = true;
  busy.join();
}

}  // namespace
}  // namespace numap
