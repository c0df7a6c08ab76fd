// percall: the cost of single allocator calls, timed by Google Benchmark (Debian's libbenchmark)
// inside the worker, so each cell has the allocator preloaded, the preload proof and the records
// of every other workload. Each phase is one family of benchmarks; each benchmark's nanoseconds
// per operation are the phase's workload_metrics (`ns_per_op.<benchmark>`).
//
// The release family times frees one by one instead: each iteration allocates and writes a live
// set of mixed sizes (untimed), then frees all of it in a shuffled order, every free between two
// monotonic clock reads into a histogram made before the phase (call_latency.h's). Its p50, p99,
// p99.9 and maximum are the `free_latency.<benchmark>` figures and the mean its ns per operation:
// a release is where allocators give memory back, inside free() or not, so it is where free()'s
// tail is.
//
// Threads: Google Benchmark's own Threads(n) would start its threads from the calling thread,
// which inherits that thread's CPU pin, and would create threads inside the measured phase. So the
// worker's crew runs every benchmark instead: crew thread 0 runs Google Benchmark (iteration
// counts, repetitions, statistics, reporting), and each run of a benchmark releases the other crew
// threads for the same number of iterations before its timer starts; they spin until the first
// timed iteration lets them go, and the last timed iteration of thread 0 spins until all of them
// are done, so the time is from the first thread's start to the last one's end and no futex wake-up
// (milliseconds on a loaded machine) lands inside it. ns per operation is then per thread, with
// every thread doing the same operation at once.
#include <benchmark/benchmark.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "harness/os/clock.h"
#include "workloads/call_latency.h"
#include "workloads/refused.h"
#include "workloads/rng.h"
#include "workloads/size_mix.h"
#include "workloads/spsc_ring.h"
#include "workloads/touch.h"
#include "workloads/workload.h"

namespace allocmark::workloads {
namespace {

enum class Family { malloc_free, batch, realloc_double, realloc_step, aligned, cross_thread, release };

// A release's free() latencies, over every free of a run (all threads): Google Benchmark counters
// of these names (so repetitions give their median, as for ns per operation), then the phase's
// workload_metrics free_latency.<benchmark>.<name>. The spelling is the records' (phase_record.h).
constexpr const char* kTailNames[] = {"p50_ns", "p99_ns", "p999_ns", "max_ns", "samples"};
constexpr std::size_t kTailFigures = std::size(kTailNames);
constexpr char kMeanCounter[] = "mean_ns";
using Tail = std::array<double, kTailFigures>;

Tail tail_of(const LatencyHistogram& h) {
  return {static_cast<double>(h.percentile(0.5)), static_cast<double>(h.percentile(0.99)),
          static_cast<double>(h.percentile(0.999)), static_cast<double>(h.max()), static_cast<double>(h.count())};
}

// What a query engine holds when it lets go of a hash table and its column buffers (hash_build's
// rows and payloads, orc_scan's 4 KiB..8 MiB buffers): by count mostly small blocks, by bytes
// mostly blocks of 64 KiB and more, the sizes whose frees give pages back.
constexpr char kReleaseSizes[] = "16-256:90,256-4K:9,4K-64K:0.9,64K-1M:0.09,1M-8M:0.01";

struct Bench {
  std::size_t phase;
  std::string key;   // in workload_metrics: ns_per_op.<key>; sizes in bytes, so names sort naturally
  Family family;
  std::size_t size;  // bytes; for realloc the final size; for aligned the alignment (and size)
  double ops_per_iteration;
  double ns_per_op = NAN;  // written by the reporter
  Tail tail{NAN, NAN, NAN, NAN, NAN};  // the release family's, written by the reporter
};

const std::vector<std::string>& phase_names() {
  static const std::vector<std::string> names{"malloc_free", "batch", "realloc", "aligned", "cross_thread", "release"};
  return names;
}


constexpr std::size_t kReallocStart = 16, kReallocStep = 16;
constexpr std::size_t kRingCapacity = 1024;

// Every op writes a byte of each block: the calls cannot be elided, and a block whose page is not
// resident costs its fault, as it would an application.
// A wait of a few microseconds inside a timed run: a futex wake-up would cost more than the wait.
// The yield lets an oversubscribed thread on the same CPU get on.
inline void spin(unsigned& rounds) {
  if (++rounds % 64 == 0) sched_yield();
  else __builtin_ia32_pause();
}

inline void use(void* p) {
  if (!p) allocation_refused(0);  // the size is the benchmark's, not known here
  *static_cast<volatile char*>(p) = 1;
}

class Percall final : public Workload {
 public:
  Percall(const Params& p, int threads)
      : threads_(threads),
        min_time_(p.real("min_time")),
        repetitions_(static_cast<int>(p.integer("repetitions"))),
        batch_(static_cast<std::size_t>(p.integer("batch"))),
        state_(threads) {
    for (std::size_t s = 8; s <= (4u << 20); s *= 2) add(0, "malloc_free_" + std::to_string(s), Family::malloc_free, s, 1);
    for (std::size_t s : {16, 64, 256, 1024, 4096, 16384})
      add(1, "batch_" + std::to_string(s), Family::batch, s, static_cast<double>(batch_));
    add(2, "realloc_double_65536", Family::realloc_double, 64 * 1024, std::log2(64 * 1024 / kReallocStart));
    add(2, "realloc_step_4096", Family::realloc_step, 4096, (4096 - kReallocStart) / kReallocStep);
    for (std::size_t a : {64, 4096, 65536}) add(3, "aligned_" + std::to_string(a), Family::aligned, a, 1);
    for (std::size_t s : {16, 64, 256, 1024, 4096, 65536})
      add(4, "cross_thread_" + std::to_string(s), Family::cross_thread, s, 1);
    const std::size_t live = p.bytes("release_live");
    const auto sizes = SizeDistribution::parse(p.text("release_sizes"));
    for (int t = 0; t < threads; ++t) {
      state_[t].blocks.assign(batch_, nullptr);
      state_[t].inbox.reserve(kRingCapacity);
      plan_release(state_[t].release, sizes, live, Rng(static_cast<uint64_t>(p.integer("seed")) * 1000003 + t));
    }
    // ns per operation is per free; thread 0's count stands for every thread's (the same mix).
    add(5, "release_" + std::to_string(live), Family::release, live,
        static_cast<double>(state_[0].release.sizes.size()));
    // The registry is the library's global: one workload's benchmarks at a time.
    benchmark::ClearRegisteredBenchmarks();
    for (std::size_t i = 0; i < benches_.size(); ++i) {
      auto* b = benchmark::RegisterBenchmark((phase_names()[benches_[i].phase] + "/" + benches_[i].key).c_str(),
                                             [this, i](benchmark::State& st) { drive(st, benches_[i]); });
      b->MinTime(min_time_)->Repetitions(repetitions_)->ReportAggregatesOnly(repetitions_ > 1)->UseRealTime()->Unit(
          benchmark::kNanosecond);
    }
  }
  ~Percall() override { benchmark::ClearRegisteredBenchmarks(); }

  const std::vector<std::string>& phases() const override { return phase_names(); }

  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override {
    if (ctx.index != 0) return serve(ctx.index);
    ops_ = 0;
    Collector collector(*this);
    benchmark::RunSpecifiedBenchmarks(&collector, "^" + phase_names()[phase] + "/");
    release(nullptr, 0);  // ends the other threads' serve()
    for (const auto& b : benches_)
      if (b.phase == phase && !reported(b)) {
        std::fprintf(stderr, "percall: benchmark %s reported no time%s%s\n", b.key.c_str(),
                     collector.error.empty() ? "" : ": ", collector.error.c_str());
        std::abort();
      }
    return ops_;
  }

  nlohmann::json phase_metrics(std::size_t phase) override {
    nlohmann::json ns = nlohmann::json::object(), tails = nlohmann::json::object();
    for (const auto& b : benches_) {
      if (b.phase != phase) continue;
      ns[b.key] = b.ns_per_op;
      if (b.family != Family::release) continue;
      for (std::size_t k = 0; k < kTailFigures; ++k) tails[b.key][kTailNames[k]] = b.tail[k];
    }
    nlohmann::json out{{"ns_per_op", ns}};
    if (!tails.empty()) out["free_latency"] = tails;
    return out;
  }

 private:
  // Takes each benchmark's time per iteration (the median over repetitions where there are
  // several) into its preallocated slot, as ns per operation.
  class Collector : public benchmark::BenchmarkReporter {
   public:
    explicit Collector(Percall& owner) : owner_(owner) {}
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>& runs) override {
      for (const auto& run : runs) {
        if (run.error_occurred) {
          error = run.run_name.function_name + ": " + run.error_message;
          continue;
        }
        const bool wanted = owner_.repetitions_ > 1 ? run.run_type == Run::RT_Aggregate && run.aggregate_name == "median"
                                                    : run.run_type == Run::RT_Iteration;
        if (!wanted) continue;
        for (auto& b : owner_.benches_)
          if (phase_names()[b.phase] + "/" + b.key == run.run_name.function_name) take(run, b);
      }
    }
    std::string error;

   private:
    // A release's figures are its counters (the run's time includes allocating the live set).
    static void take(const Run& run, Bench& b) {
      if (b.family != Family::release) {
        b.ns_per_op = run.GetAdjustedRealTime() / b.ops_per_iteration;
        return;
      }
      auto counter = [&](const char* name) {
        auto it = run.counters.find(name);
        return it == run.counters.end() ? NAN : static_cast<double>(it->second);
      };
      b.ns_per_op = counter(kMeanCounter);
      for (std::size_t k = 0; k < kTailFigures; ++k) b.tail[k] = counter(kTailNames[k]);
    }

    Percall& owner_;
  };

  // One thread's live set for the release family, drawn before the phases so a run only
  // allocates, writes and frees it.
  struct ReleaseSet {
    std::vector<std::size_t> sizes;  // in allocation order
    std::vector<uint32_t> order;     // the order of the frees: shuffled, as a hash table's entries go
    std::vector<void*> blocks;
    LatencyHistogram frees;  // every timed free of the current run
    uint64_t free_ns = 0;    // their sum, for the mean
  };

  static void plan_release(ReleaseSet& r, const SizeDistribution& sizes, std::size_t live, Rng rng) {
    for (std::size_t total = 0; total < live;) total += r.sizes.emplace_back(sizes.draw(rng));
    r.order.resize(r.sizes.size());
    for (uint32_t i = 0; i < r.order.size(); ++i) r.order[i] = i;
    for (std::size_t i = r.order.size(); i > 1; --i) std::swap(r.order[i - 1], r.order[rng.below(i)]);
    r.blocks.assign(r.sizes.size(), nullptr);
  }

  struct alignas(64) ThreadState {
    ReleaseSet release;
    std::vector<void*> blocks;  // batch
    SpscRing<void*> inbox;      // cross_thread: blocks the previous thread allocated, for this one to free
    uint64_t received = 0;
    uint32_t generation_seen = 0;
  };

  static bool reported(const Bench& b) {
    if (!(b.ns_per_op > 0)) return false;
    return b.family != Family::release || std::none_of(b.tail.begin(), b.tail.end(), [](double v) { return std::isnan(v); });
  }

  void add(std::size_t phase, std::string key, Family family, std::size_t size, double ops_per_iteration) {
    benches_.push_back({phase, std::move(key), family, size, ops_per_iteration});
  }

  // One operation of `b` by thread `t`.
  void op(const Bench& b, int t) {
    ThreadState& me = state_[t];
    switch (b.family) {
      case Family::malloc_free: {
        void* p = std::malloc(b.size);
        use(p);
        benchmark::DoNotOptimize(p);
        std::free(p);
        break;
      }
      case Family::batch:
        for (auto& slot : me.blocks) use(slot = std::malloc(b.size));
        for (void* p : me.blocks) std::free(p);
        break;
      case Family::realloc_double:
      case Family::realloc_step: {
        void* p = std::malloc(kReallocStart);
        use(p);
        for (std::size_t size = kReallocStart; size < b.size;) {
          size = b.family == Family::realloc_double ? size * 2 : size + kReallocStep;
          p = std::realloc(p, size);
          use(static_cast<char*>(p) + size - 1);
        }
        std::free(p);
        break;
      }
      case Family::aligned: {
        void* p = std::aligned_alloc(b.size, b.size);
        use(p);
        benchmark::DoNotOptimize(p);
        std::free(p);
        break;
      }
      case Family::cross_thread: {
        void* p = std::malloc(b.size);
        use(p);
        SpscRing<void*>& next = state_[(t + 1) % threads_].inbox;
        while (!next.push(p))
          if (!free_one_received(me)) sched_yield();  // the next thread is behind: let it run
        free_one_received(me);
        break;
      }
      case Family::release:
        release_all(me.release);
        break;
    }
  }

  // The live set allocated and written as the application filled it, untimed; then every free
  // timed alone. The clock is read through the vDSO: no system call of ours lands in a sample.
  static void release_all(ReleaseSet& r) {
    for (std::size_t i = 0; i < r.sizes.size(); ++i) {
      void* p = std::malloc(r.sizes[i]);
      if (!p) allocation_refused(r.sizes[i]);
      touch_block(p, r.sizes[i]);
      r.blocks[i] = p;
    }
    for (uint32_t i : r.order) {
      const int64_t start = os::monotonic_ns();
      std::free(r.blocks[i]);
      const auto ns = static_cast<uint64_t>(os::monotonic_ns() - start);
      r.frees.record(ns);
      r.free_ns += ns;
    }
  }

  // Thread 0, after a release run (the crew is done): every thread's frees as the run's counters.
  void report_release(benchmark::State& st) {
    merged_.clear();
    uint64_t ns = 0;
    for (auto& s : state_) {
      merged_.merge(s.release.frees);
      ns += s.release.free_ns;
      s.release.frees.clear();
      s.release.free_ns = 0;
    }
    const Tail tail = tail_of(merged_);
    for (std::size_t k = 0; k < kTailFigures; ++k) st.counters[kTailNames[k]] = tail[k];
    st.counters[kMeanCounter] = merged_.count() ? static_cast<double>(ns) / static_cast<double>(merged_.count()) : NAN;
  }

  bool free_one_received(ThreadState& me) {
    void* q;
    if (!me.inbox.pop(q)) return false;
    std::free(q);
    ++me.received;
    return true;
  }

  // After a run's iterations: a cross-thread run ends when this thread freed every block the
  // previous thread sent it (as many as it allocated itself), so no block outlives its run.
  void finish(const Bench& b, int t, uint64_t iterations) {
    ThreadState& me = state_[t];
    if (b.family == Family::cross_thread)
      while (me.received < iterations)
        if (!free_one_received(me)) sched_yield();
    me.received = 0;
  }

  // Thread 0, inside Google Benchmark: releases the crew at the first timed iteration and waits
  // for it at the last, so the measured time covers every thread's work.
  void drive(benchmark::State& st, const Bench& b) {
    const auto iterations = static_cast<uint64_t>(st.max_iterations);
    uint64_t left = iterations;
    release(&b, iterations);
    for (unsigned rounds = 0; ready_.load(std::memory_order_acquire) != threads_ - 1;) spin(rounds);
    for (auto _ : st) {
      if (left == iterations) go_.store(true, std::memory_order_release);
      op(b, 0);
      if (--left == 0) {
        finish(b, 0, iterations);
        wait_for_crew();
      }
    }
    if (b.family == Family::release) report_release(st);
    ops_ += static_cast<uint64_t>(static_cast<double>(iterations) * b.ops_per_iteration);
  }

  void release(const Bench* b, uint64_t iterations) {
    if (threads_ == 1) return;
    job_ = b;
    job_iterations_ = iterations;
    ready_.store(0, std::memory_order_relaxed);
    go_.store(false, std::memory_order_relaxed);
    busy_.store(threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
  }

  void wait_for_crew() {
    for (unsigned rounds = 0; busy_.load(std::memory_order_acquire) != 0;) spin(rounds);
  }

  // Threads 1..n-1: each run thread 0 releases, until it releases none. Between runs they sleep
  // on a futex (Google Benchmark's bookkeeping is not timed).
  uint64_t serve(int t) {
    ThreadState& me = state_[t];
    uint64_t ops = 0;
    for (;;) {
      generation_.wait(me.generation_seen, std::memory_order_acquire);
      me.generation_seen = generation_.load(std::memory_order_acquire);
      const Bench* b = job_;
      if (!b) return ops;
      const uint64_t iterations = job_iterations_;
      ready_.fetch_add(1, std::memory_order_acq_rel);
      for (unsigned rounds = 0; !go_.load(std::memory_order_acquire);) spin(rounds);
      for (uint64_t i = 0; i < iterations; ++i) op(*b, t);
      finish(*b, t, iterations);
      ops += static_cast<uint64_t>(static_cast<double>(iterations) * b->ops_per_iteration);
      busy_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  int threads_;
  double min_time_;
  int repetitions_;
  std::size_t batch_;
  std::vector<Bench> benches_;
  std::vector<ThreadState> state_;
  LatencyHistogram merged_;  // a release run's frees over all threads
  uint64_t ops_ = 0;  // thread 0's operations in the current phase
  // The run the crew is released into: written by thread 0 before the generation is bumped.
  const Bench* job_ = nullptr;
  uint64_t job_iterations_ = 0;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> ready_{0};  // threads waiting for go_
  alignas(64) std::atomic<bool> go_{false};
  alignas(64) std::atomic<int> busy_{0};   // threads still in the run
};

// The live set's bookkeeping (20 bytes a block) stays small beside the live set itself.
std::string check_release(const Params& p) {
  constexpr uint64_t kMaxBlocks = 100'000'000;
  const uint64_t live = p.bytes("release_live");
  if (live < (64u << 10) || live > (uint64_t{64} << 30)) return "release_live must be within 64K..64G bytes";
  try {
    const auto sizes = SizeDistribution::parse(p.text("release_sizes"));
    if (static_cast<double>(live) / sizes.mean() > kMaxBlocks)
      return "release_live / the mean of release_sizes must be at most 100000000 blocks";
  } catch (const std::exception& e) {
    return std::string("release_sizes: ") + e.what();
  }
  return "";
}

const bool registered = register_workload([] {
  WorkloadInfo w{
      "percall",
      "the cost of single calls, timed by Google Benchmark: malloc/free pairs 8 B..4 MiB, batch allocate-then-free, "
      "realloc growth, aligned allocation, frees of blocks another thread allocated, a release of a live set of mixed "
      "sizes with every free timed (its p50, p99, p99.9, max); ns per operation per benchmark",
      phase_names(),
      {
          {"min_time", ParamType::Float, "0.05", "0.5", "Google Benchmark's minimum time per benchmark run, seconds"},
          {"repetitions", ParamType::Int, "1", "3",
           "Google Benchmark repetitions per benchmark inside a cell; above 1 the median is recorded"},
          {"batch", ParamType::Int, "1000", "1000", "objects allocated, then freed, per iteration of the batch family"},
          {"release_live", ParamType::Bytes, "256M", "1G",
           "bytes each thread allocates, writes and then frees, every free timed, per iteration of the release family"},
          {"release_sizes", ParamType::String, kReleaseSizes, kReleaseSizes,
           "the release family's size classes LO-HI:WEIGHT (weights count blocks), sizes uniform inside a class"},
      },
      [](const Params& p, int threads, const WorkloadEnv&) { return std::make_unique<Percall>(p, threads); },
      [](const Params& p) -> std::string {
        if (!(p.real("min_time") > 0) || p.real("min_time") > 60) return "min_time must be within (0, 60] seconds";
        if (p.integer("repetitions") < 1 || p.integer("repetitions") > 100) return "repetitions must be 1..100";
        if (p.integer("batch") < 1 || p.integer("batch") > 1000000) return "batch must be 1..1000000";
        return check_release(p);
      },
  };
  // The timed loops carry no accounting (it would be part of every call's time), and Google
  // Benchmark allocates for itself between runs: the phases report no live bytes.
  w.tracks_live_bytes = false;
  w.untracked_reason = "the workload times every call itself (workload_metrics.ns_per_op), not one in N";
  w.ops_per_s_not_a_speed = [](const Params&, std::string_view) -> std::string {
    return "sums benchmarks of every size; its figure is ns per operation per benchmark (workload_metrics.ns_per_op)";
  };
  return w;
}());

}  // namespace
}  // namespace allocmark::workloads
