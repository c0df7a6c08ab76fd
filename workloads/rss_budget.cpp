// rss_budget: moving physical memory from one use to another under an RSS limit (seed 003, "War
// of the Allocators": a query engine that must stay inside its memory target frees a cache and
// immediately builds hash tables; whether the freed pages are really returned decides whether the
// process overshoots). Optional pushback models the application asking the allocator to purge when
// RSS crosses a threshold.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "harness/os/clock.h"
#include "workloads/rng.h"
#include "workloads/call_latency.h"
#include "workloads/refused.h"
#include "workloads/size_mix.h"
#include "workloads/touch.h"
#include "workloads/workload.h"

namespace allocmark::workloads {
namespace {

class RssBudget final : public Workload {
 public:
  RssBudget(const Params& p, int threads, const WorkloadEnv& env)
      : env_(env),
        threads_(threads),
        budget_(static_cast<uint64_t>(p.real("budget_mib") * p.real("scale") * 1048576.0)),
        fill_bytes_(static_cast<uint64_t>(budget_ * p.real("fill_fraction"))),
        cache_sizes_(SizeDistribution::parse(p.text("cache_sizes"))),
        table_min_(p.bytes("table_min")),
        table_max_(p.bytes("table_max")),
        pushback_(p.integer("pushback") != 0),
        threshold_(static_cast<uint64_t>(budget_ * p.real("pushback_at"))),
        check_every_(p.bytes("check_every")),
        seed_(p.integer("seed")),
        state_(threads) {
    uint64_t per_thread = fill_bytes_ / threads;
    for (int t = 0; t < threads; ++t) {
      auto& s = state_[t];
      s.rng = Rng(seed_ * 7919 + t);
      s.quota = per_thread;
      // Room for every cache object and every table this thread can hold at once.
      s.cache.reserve(static_cast<std::size_t>(per_thread / std::max(1.0, cache_sizes_.mean()) * 2) + 16);
      s.tables.reserve(static_cast<std::size_t>(per_thread / table_min_) + 16);
    }
  }

  const std::vector<std::string>& phases() const override {
    static const std::vector<std::string> names{"cache_fill", "rebuild", "release"};
    return names;
  }

  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override {
    auto& s = state_[ctx.index];
    uint64_t ops = 0;
    if (phase == 0) {  // cache-like objects up to fill_fraction of the budget
      while (s.held < s.quota) {
        std::size_t size = cache_sizes_.draw(s.rng);
        ops += take(ctx, s, s.cache, size);
      }
    } else if (phase == 1) {  // free the cache, then at once build hash tables of the same volume
      for (auto& b : s.cache) ops += give_back(ctx, s, b);
      s.cache.clear();
      while (s.held < s.quota) ops += grow_table(ctx, s);
    } else {  // release the tables
      for (auto& b : s.tables) ops += give_back(ctx, s, b);
      s.tables.clear();
    }
    ctx.live.flush();
    return ops;
  }

  void teardown() override {
    for (auto& s : state_) {
      for (auto& b : s.cache) workloads::release(b.ptr);
      for (auto& b : s.tables) workloads::release(b.ptr);
      s.cache.clear();
      s.tables.clear();
    }
  }

  nlohmann::json phase_metrics(std::size_t phase) override {
    nlohmann::json m{{"budget_bytes", budget_},
                     {"fill_bytes", fill_bytes_},
                     {"rss_checks", checks_.exchange(0)},
                     {"ms_above_budget", above_ns_.exchange(0) / 1e6},
                     {"max_checked_rss_bytes", max_seen_.exchange(0)}};
    if (pushback_) m["purges"] = purges_.exchange(0);
    return m;
  }

 private:
  struct Block {
    void* ptr = nullptr;
    std::size_t size = 0;
  };
  struct alignas(64) ThreadState {
    Rng rng;
    std::vector<Block> cache, tables;
    uint64_t quota = 0, held = 0, since_check = 0;
    int64_t last_check_ns = 0;
    bool last_above = false;
    std::size_t next_table = 0;
  };


  uint64_t take(ThreadContext& ctx, ThreadState& s, std::vector<Block>& into, std::size_t size) {
    void* p = workloads::allocate(size);
    if (!p) allocation_refused(size);
    touch_block(p, size);
    ctx.live.add(static_cast<int64_t>(size));
    into.push_back({p, size});
    s.held += size;
    s.since_check += size;
    if (s.since_check >= check_every_) check_rss(s);
    return 1;
  }

  uint64_t give_back(ThreadContext& ctx, ThreadState& s, Block& b) {
    workloads::release(b.ptr);
    ctx.live.add(-static_cast<int64_t>(b.size));
    s.held -= b.size;
    b = Block{};
    return 1;
  }

  // A hash table grows by doubling: the new array is allocated and filled while the old one is
  // alive, then the old one is freed. A full-grown table stays and a new one starts.
  uint64_t grow_table(ThreadContext& ctx, ThreadState& s) {
    uint64_t ops = 0;
    std::size_t size = table_min_;
    Block current{};
    while (true) {
      if (s.held + size > s.quota) break;
      std::vector<Block>& into = s.tables;
      ops += take(ctx, s, into, size);
      Block grown = into.back();
      into.pop_back();
      if (current.ptr) {
        std::memcpy(grown.ptr, current.ptr, written_bytes(std::min(current.size, grown.size) / 2));
        ops += give_back(ctx, s, current);
      }
      current = grown;
      if (size >= table_max_) break;
      size *= 2;
    }
    if (current.ptr) {
      s.tables.push_back(current);
    } else {
      // Not even a minimal table fits: top up with the smallest table size so the phase ends.
      std::size_t rest = static_cast<std::size_t>(s.quota - s.held);
      ops += take(ctx, s, s.tables, std::max<std::size_t>(rest, 64));
    }
    return ops;
  }

  void check_rss(ThreadState& s) {
    s.since_check = 0;
    if (!env_.rss_bytes) return;
    uint64_t rss = env_.rss_bytes();
    int64_t now = os::monotonic_ns();
    checks_.fetch_add(1, std::memory_order_relaxed);
    uint64_t seen = max_seen_.load(std::memory_order_relaxed);
    while (rss > seen && !max_seen_.compare_exchange_weak(seen, rss, std::memory_order_relaxed)) {
    }
    // Time above budget as this thread saw it between two of its own checks; thread 0's view is
    // the one counted so that threads do not add up the same interval.
    if (&s == &state_[0]) {
      if (s.last_above && s.last_check_ns) above_ns_.fetch_add(now - s.last_check_ns, std::memory_order_relaxed);
      s.last_above = rss > budget_;
      s.last_check_ns = now;
    }
    if (pushback_ && rss > threshold_ && env_.purge) {
      bool expected = false;
      if (purging_.compare_exchange_strong(expected, true)) {
        env_.purge();
        purges_.fetch_add(1, std::memory_order_relaxed);
        purging_.store(false);
      }
    }
  }

  WorkloadEnv env_;
  int threads_;
  uint64_t budget_, fill_bytes_;
  SizeDistribution cache_sizes_;
  uint64_t table_min_, table_max_;
  bool pushback_;
  uint64_t threshold_, check_every_;
  int64_t seed_;
  std::vector<ThreadState> state_;
  std::atomic<bool> purging_{false};
  std::atomic<uint64_t> checks_{0}, above_ns_{0}, max_seen_{0}, purges_{0};
};

const bool registered = register_workload({
    "rss_budget",
    "fill a cache to 90% of an RSS budget, free it and at once build hash tables of the same volume; "
    "optional pushback purges when RSS crosses a threshold (seed 003)",
    {"cache_fill", "rebuild", "release"},
    {
        {"budget_mib", ParamType::Float, "512", "8192", "the RSS budget, MiB (times scale)"},
        {"scale", ParamType::Float, "1", "1", "multiplies budget_mib"},
        {"fill_fraction", ParamType::Float, "0.9", "0.9", "live bytes in each phase as a fraction of the budget"},
        {"cache_sizes", ParamType::String, "64-1K:50,1K-16K:40,16K-256K:10", "64-1K:50,1K-16K:40,16K-256K:10",
         "cache object size classes LO-HI:WEIGHT"},
        {"table_min", ParamType::Bytes, "64K", "1M", "first hash-table array size"},
        {"table_max", ParamType::Bytes, "32M", "512M", "a table stops doubling at this size"},
        {"pushback", ParamType::Int, "0", "0", "1: purge the allocator when RSS crosses pushback_at x budget"},
        {"pushback_at", ParamType::Float, "0.95", "0.95", "pushback threshold as a fraction of the budget"},
        {"check_every", ParamType::Bytes, "8M", "64M", "read RSS after this many bytes allocated per thread"},
    },
    [](const Params& p, int threads, const WorkloadEnv& env) { return std::make_unique<RssBudget>(p, threads, env); },
    [](const Params& p) -> std::string {
      try {
        SizeDistribution::parse(p.text("cache_sizes"));
      } catch (const std::exception& e) {
        return std::string("cache_sizes: ") + e.what();
      }
      if (p.real("budget_mib") * p.real("scale") < 1) return "budget_mib x scale must be at least 1";
      if (p.real("fill_fraction") <= 0 || p.real("fill_fraction") > 1) return "fill_fraction must be within (0, 1]";
      if (p.bytes("table_min") < 4096 || p.bytes("table_max") < p.bytes("table_min"))
        return "need 4K <= table_min <= table_max";
      if (p.bytes("check_every") == 0) return "check_every must be > 0";
      return "";
    },
});

}  // namespace
}  // namespace allocmark::workloads
