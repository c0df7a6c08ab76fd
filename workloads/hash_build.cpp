// hash_build: a query engine's hash-join / group-by build side, after Velox's HashTable and
// RowContainer (seed 003). Per build thread: rows bump-allocated from runs (64 KiB runs until
// 256 KiB are used, then contiguous regions of 32 MiB and up), variable-width payloads of 16 B to
// 3 KiB carved from runs of their own with free lists for reuse (larger ones straight from
// malloc), and an open-addressing table of 8-byte slots that doubles at 0.7 load: the old table
// is freed before the new one is allocated and filled from the row store, every page touched.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "workloads/rng.h"
#include "workloads/call_latency.h"
#include "workloads/refused.h"
#include "workloads/touch.h"
#include "workloads/workload.h"

namespace allocmark::workloads {
namespace {

constexpr std::size_t kSmallRun = 64 << 10;
constexpr std::size_t kSmallRunsUpTo = 256 << 10;
constexpr std::size_t kRegionMin = 32 << 20;
constexpr std::size_t kMaxArenaPayload = 3 << 10;  // larger payloads go to malloc
constexpr std::size_t kPayloadGranule = 16;

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Bump allocation from malloc'd runs, growing the way Velox's allocation pool does.
class RunArena {
 public:
  struct Run {
    char* base;
    std::size_t size, used;
  };
  void* carve(std::size_t bytes, LiveBytes::Local& live) {
    if (runs_.empty() || runs_.back().size - runs_.back().used < bytes) grow(bytes, live);
    Run& r = runs_.back();
    void* p = r.base + r.used;
    r.used += bytes;
    return p;
  }
  std::vector<Run>& runs() { return runs_; }
  void reserve(std::size_t n) { runs_.reserve(n); }
  void release(LiveBytes::Local& live, bool large_only = false) {
    std::vector<Run> kept;
    for (auto& r : runs_) {
      if (large_only && r.size < kRegionMin) {
        kept.push_back(r);
        continue;
      }
      workloads::release(r.base);
      live.add(-static_cast<int64_t>(r.size));
    }
    runs_.swap(kept);
    total_ = 0;
    for (auto& r : runs_) total_ += r.size;
  }

 private:
  void grow(std::size_t need, LiveBytes::Local& live) {
    std::size_t size = kSmallRun;
    if (total_ >= kSmallRunsUpTo) {
      // Regions double with the arena's size: 32 MiB, 32 MiB, 64 MiB, 128 MiB, ...
      size = kRegionMin;
      while (size < total_ && size < (std::size_t{1} << 30)) size *= 2;
    }
    while (size < need) size *= 2;
    void* p = workloads::allocate(size);
    if (!p) allocation_refused(size);
    touch_block(p, std::min<std::size_t>(size, 4096));  // the header page; the rest as rows land
    live.add(static_cast<int64_t>(size));
    runs_.push_back({static_cast<char*>(p), size, 0});
    total_ += size;
  }
  std::vector<Run> runs_;
  std::size_t total_ = 0;
};

struct Row {
  uint64_t key;
  uint64_t aggregate;
  void* payload;
  uint32_t payload_size;
  uint32_t flags;
};
static_assert(sizeof(Row) == 32);

class HashBuild final : public Workload {
 public:
  HashBuild(const Params& p, int threads)
      : threads_(threads),
        keys_(static_cast<uint64_t>(p.integer("keys") * p.real("scale"))),
        batch_(static_cast<std::size_t>(p.integer("batch"))),
        payload_fraction_(p.real("payload_fraction")),
        payload_update_(p.real("payload_update")),
        payload_max_(p.bytes("payload_max")),
        probes_(static_cast<uint64_t>(p.integer("probes") * p.real("scale"))),
        flush_bytes_(p.bytes("partial_flush")),
        seed_(p.integer("seed")),
        state_(threads) {
    for (int t = 0; t < threads; ++t) {
      auto& s = state_[t];
      s.rng = Rng(seed_ * 104729 + t);
      s.rows.reserve(keys_);
      s.row_arena.reserve(4096);
      s.payload_arena.reserve(4096);
      s.free_payloads.assign(kMaxArenaPayload / kPayloadGranule + 1, nullptr);
    }
  }

  const std::vector<std::string>& phases() const override {
    static const std::vector<std::string> names{"build", "probe", "release"};
    return names;
  }

  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override {
    auto& s = state_[ctx.index];
    uint64_t ops = 0;
    if (phase == 0) {
      for (uint64_t done = 0; done < keys_; done += batch_) ops += insert_batch(ctx, s, std::min<uint64_t>(batch_, keys_ - done), done);
    } else if (phase == 1) {
      for (uint64_t i = 0; i < probes_; ++i) {
        // Half the probes hit a built key, half miss.
        uint64_t k = s.rng.below(2 * std::max<uint64_t>(keys_, 1));
        uint64_t key = mix(key_id(ctx.index, k));
        s.found += find(s, key) != nullptr;
        ++ops;
      }
    } else {
      // Small runs, payloads and the table go back in the thread that built them; the large
      // regions of this thread's neighbour are freed here, as an operator on another driver
      // thread would.
      ops += free_payloads_over_limit(ctx, s);
      ops += s.payload_arena.runs().size() + s.row_arena.runs().size();
      s.payload_arena.release(ctx.live);
      drop_table(ctx, s);
      s.rows.clear();
      std::fill(s.free_payloads.begin(), s.free_payloads.end(), nullptr);
      ThreadState& peer = state_[(ctx.index + 1) % threads_];
      release_barrier(ctx);
      peer.row_arena.release(ctx.live, /*large_only=*/true);
      release_barrier(ctx);
      s.row_arena.release(ctx.live);
    }
    ctx.live.flush();
    return ops;
  }

  void teardown() override {
    for (auto& s : state_) {
      for (auto* r : s.rows)
        if (r->payload_size > kMaxArenaPayload) workloads::release(r->payload);
      s.rows.clear();
      workloads::release(s.table);
      s.table = nullptr;
      LiveBytes scratch(1);
      s.row_arena.release(scratch.local(0));
      s.payload_arena.release(scratch.local(0));
    }
  }

  nlohmann::json phase_metrics(std::size_t phase) override {
    uint64_t slots = 0, rows = 0, inserted = 0, rehashes = 0, flushes = 0, found = 0;
    for (auto& s : state_) {
      slots += s.capacity;
      rows += s.rows.size();
      inserted += s.inserted;
      rehashes += s.rehashes;
      flushes += s.flushes;
      found += s.found;
    }
    nlohmann::json m{{"table_slots", slots}, {"rows", rows}, {"rows_inserted", inserted}, {"rehashes", rehashes}, {"partial_flushes", flushes}};
    if (phase == 1) m["probe_hits"] = found;
    return m;
  }

 private:
  struct alignas(64) ThreadState {
    Rng rng;
    RunArena row_arena, payload_arena;
    std::vector<Row*> rows;  // every live row, for re-hashing and random payload updates
    std::vector<void*> free_payloads;  // intrusive free list heads per 16-byte class
    Row** table = nullptr;
    std::size_t capacity = 0;
    uint64_t inserted = 0, rehashes = 0, flushes = 0, found = 0;
  };

  uint64_t key_id(int thread, uint64_t i) const { return (static_cast<uint64_t>(seed_) << 48) ^ (static_cast<uint64_t>(thread) << 40) ^ i; }

  // Both barriers are implemented by counting, since threads of the release phase free each other's
  // regions: nobody frees a neighbour's large regions while the neighbour still reads its runs.
  void release_barrier(ThreadContext& ctx) {
    int round = release_round_.load();
    if (arrived_.fetch_add(1) + 1 == threads_) {
      arrived_.store(0);
      release_round_.fetch_add(1);
    } else {
      while (release_round_.load() == round) std::this_thread::yield();
    }
    (void)ctx;
  }

  void* new_payload(ThreadContext& ctx, ThreadState& s, std::size_t size) {
    if (size > kMaxArenaPayload) {
      void* p = workloads::allocate(size);
      if (!p) allocation_refused(size);
      touch_block(p, size);
      ctx.live.add(static_cast<int64_t>(size));
      return p;
    }
    std::size_t cls = (size + kPayloadGranule - 1) / kPayloadGranule;
    if (void* head = s.free_payloads[cls]) {
      s.free_payloads[cls] = *static_cast<void**>(head);
      return head;
    }
    void* p = s.payload_arena.carve(cls * kPayloadGranule, ctx.live);
    fill_block(p, 0, cls * kPayloadGranule);
    return p;
  }

  void drop_payload(ThreadContext& ctx, ThreadState& s, Row* r) {
    if (!r->payload) return;
    if (r->payload_size > kMaxArenaPayload) {
      workloads::release(r->payload);
      ctx.live.add(-static_cast<int64_t>(r->payload_size));
    } else {
      std::size_t cls = (r->payload_size + kPayloadGranule - 1) / kPayloadGranule;
      *static_cast<void**>(r->payload) = s.free_payloads[cls];
      s.free_payloads[cls] = r->payload;
    }
    r->payload = nullptr;
    r->payload_size = 0;
  }

  uint64_t free_payloads_over_limit(ThreadContext& ctx, ThreadState& s) {
    uint64_t ops = 0;
    for (auto* r : s.rows)
      if (r->payload_size > kMaxArenaPayload) drop_payload(ctx, s, r), ++ops;
    return ops;
  }

  std::size_t payload_size(ThreadState& s) {
    // Mostly short strings, with a long tail up to payload_max.
    double u = s.rng.uniform();
    double size = 16 * std::pow(static_cast<double>(payload_max_) / 16, u * u * u);
    return std::max<std::size_t>(16, static_cast<std::size_t>(size));
  }

  void drop_table(ThreadContext& ctx, ThreadState& s) {
    if (!s.table) return;
    workloads::release(s.table);
    ctx.live.add(-static_cast<int64_t>(s.capacity * sizeof(Row*)));
    s.table = nullptr;
    s.capacity = 0;
  }

  void place(ThreadState& s, Row* r) {
    std::size_t mask = s.capacity - 1;
    for (std::size_t i = mix(r->key) & mask;; i = (i + 1) & mask)
      if (!s.table[i]) {
        s.table[i] = r;
        return;
      }
  }

  // The old table goes first, then the new one is allocated, touched and filled from the rows.
  void resize(ThreadContext& ctx, ThreadState& s, std::size_t capacity) {
    drop_table(ctx, s);
    s.table = static_cast<Row**>(workloads::allocate(capacity * sizeof(Row*)));
    if (!s.table) allocation_refused(capacity * sizeof(Row*));
    std::memset(s.table, 0, capacity * sizeof(Row*));
    ctx.live.add(static_cast<int64_t>(capacity * sizeof(Row*)));
    s.capacity = capacity;
    for (Row* r : s.rows) place(s, r);
    ++s.rehashes;
  }

  const Row* find(const ThreadState& s, uint64_t key) const {
    if (!s.table) return nullptr;
    std::size_t mask = s.capacity - 1;
    for (std::size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      const Row* r = s.table[i];
      if (!r) return nullptr;
      if (r->key == key) return r;
    }
  }

  // Partial aggregation flushes its state when it grows past a limit: the sawtooth of Velox's
  // partial aggregation.
  void partial_flush(ThreadContext& ctx, ThreadState& s) {
    free_payloads_over_limit(ctx, s);
    s.payload_arena.release(ctx.live);
    s.row_arena.release(ctx.live);
    drop_table(ctx, s);
    s.rows.clear();
    std::fill(s.free_payloads.begin(), s.free_payloads.end(), nullptr);
    ++s.flushes;
  }

  uint64_t insert_batch(ThreadContext& ctx, ThreadState& s, uint64_t n, uint64_t first) {
    if (!s.table) resize(ctx, s, std::max<std::size_t>(2048, std::bit_ceil(2 * n)));
    for (uint64_t i = 0; i < n; ++i) {
      if ((s.rows.size() + 1) * 10 > s.capacity * 7) resize(ctx, s, s.capacity * 2);
      Row* r = static_cast<Row*>(s.row_arena.carve(sizeof(Row), ctx.live));
      r->key = mix(key_id(ctx.index, first + i));
      r->aggregate = 1;
      r->payload = nullptr;
      r->payload_size = 0;
      r->flags = 0;
      if (s.rng.uniform() < payload_fraction_) {
        r->payload_size = static_cast<uint32_t>(payload_size(s));
        r->payload = new_payload(ctx, s, r->payload_size);
      }
      s.rows.push_back(r);
      ++s.inserted;
      place(s, r);
      // Some aggregates grow their variable-width state: the old block is freed for reuse.
      if (!s.rows.empty() && s.rng.uniform() < payload_update_) {
        Row* victim = s.rows[s.rng.below(s.rows.size())];
        if (victim->payload) {
          std::size_t grown = std::min<std::size_t>(victim->payload_size * 2, payload_max_);
          drop_payload(ctx, s, victim);
          victim->payload_size = static_cast<uint32_t>(grown);
          victim->payload = new_payload(ctx, s, grown);
        }
      }
    }
    if (flush_bytes_ && arena_bytes(s) >= flush_bytes_) partial_flush(ctx, s);
    return n;
  }

  static uint64_t arena_bytes(ThreadState& s) {
    uint64_t b = s.capacity * sizeof(Row*);
    for (auto& r : s.row_arena.runs()) b += r.size;
    for (auto& r : s.payload_arena.runs()) b += r.size;
    return b;
  }

  int threads_;
  uint64_t keys_;
  std::size_t batch_;
  double payload_fraction_, payload_update_;
  std::size_t payload_max_;
  uint64_t probes_;
  uint64_t flush_bytes_;
  int64_t seed_;
  std::vector<ThreadState> state_;
  std::atomic<int> arrived_{0}, release_round_{0};
};

const bool registered = register_workload({
    "hash_build",
    "query-engine hash build (Velox HashTable/RowContainer): rows in runs and regions, variable-width "
    "payloads, an open-addressing table doubling at 0.7 load (seed 003)",
    {"build", "probe", "release"},
    {
        {"keys", ParamType::Int, "1500000", "50000000", "distinct keys inserted per build thread (times scale)"},
        {"scale", ParamType::Float, "1", "1", "multiplies keys and probes"},
        {"batch", ParamType::Int, "1024", "1024", "rows per input batch; the first batch sizes the first table"},
        {"payload_fraction", ParamType::Float, "0.3", "0.3", "fraction of rows with a variable-width payload"},
        {"payload_update", ParamType::Float, "0.05", "0.05", "per insert: chance that a random row's payload grows (old block reused)"},
        {"payload_max", ParamType::Bytes, "16K", "64K", "largest payload; above 3 KiB payloads come from malloc"},
        {"probes", ParamType::Int, "3000000", "100000000", "lookups per thread in the probe phase (times scale)"},
        {"partial_flush", ParamType::Bytes, "0", "0", "flush (free) the partial aggregation when it holds this much; 0: never (16M: Velox's sawtooth)"},
    },
    [](const Params& p, int threads, const WorkloadEnv&) { return std::make_unique<HashBuild>(p, threads); },
    [](const Params& p) -> std::string {
      if (p.integer("keys") < 1) return "keys must be >= 1";
      if (p.integer("batch") < 1) return "batch must be >= 1";
      if (p.real("scale") <= 0) return "scale must be > 0";
      if (p.real("payload_fraction") < 0 || p.real("payload_fraction") > 1) return "payload_fraction must be within 0..1";
      if (p.real("payload_update") < 0 || p.real("payload_update") > 1) return "payload_update must be within 0..1";
      if (p.bytes("payload_max") < 16) return "payload_max must be at least 16";
      if (p.integer("probes") < 0) return "probes must be >= 0";
      return "";
    },
});

}  // namespace
}  // namespace allocmark::workloads
