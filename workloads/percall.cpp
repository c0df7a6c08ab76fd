// percall: the cost of single allocator calls, timed by Google Benchmark (Debian's libbenchmark)
// inside the worker, so each cell has the allocator preloaded, the preload proof and the records
// of every other workload. Each phase is one family of benchmarks; each benchmark's nanoseconds
// per operation are the phase's workload_metrics (`ns_per_op.<benchmark>`).
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

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "workloads/refused.h"
#include "workloads/spsc_ring.h"
#include "workloads/workload.h"

namespace allocmark::workloads {
namespace {

enum class Family { malloc_free, batch, realloc_double, realloc_step, aligned, cross_thread };

struct Bench {
  std::size_t phase;
  std::string key;   // in workload_metrics: ns_per_op.<key>; sizes in bytes, so names sort naturally
  Family family;
  std::size_t size;  // bytes; for realloc the final size; for aligned the alignment (and size)
  double ops_per_iteration;
  double ns_per_op = NAN;  // written by the reporter
};

const std::vector<std::string>& phase_names() {
  static const std::vector<std::string> names{"malloc_free", "batch", "realloc", "aligned", "cross_thread"};
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
    for (auto& s : state_) {
      s.blocks.assign(batch_, nullptr);
      s.inbox.reserve(kRingCapacity);
    }
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
      if (b.phase == phase && !(b.ns_per_op > 0)) {
        std::fprintf(stderr, "percall: benchmark %s reported no time%s%s\n", b.key.c_str(),
                     collector.error.empty() ? "" : ": ", collector.error.c_str());
        std::abort();
      }
    return ops_;
  }

  nlohmann::json phase_metrics(std::size_t phase) override {
    nlohmann::json ns = nlohmann::json::object();
    for (const auto& b : benches_)
      if (b.phase == phase) ns[b.key] = b.ns_per_op;
    return {{"ns_per_op", ns}};
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
          if (phase_names()[b.phase] + "/" + b.key == run.run_name.function_name)
            b.ns_per_op = run.GetAdjustedRealTime() / b.ops_per_iteration;
      }
    }
    std::string error;

   private:
    Percall& owner_;
  };

  struct alignas(64) ThreadState {
    std::vector<void*> blocks;  // batch
    SpscRing<void*> inbox;      // cross_thread: blocks the previous thread allocated, for this one to free
    uint64_t received = 0;
    uint32_t generation_seen = 0;
  };

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
    }
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
  uint64_t ops_ = 0;  // thread 0's operations in the current phase
  // The run the crew is released into: written by thread 0 before the generation is bumped.
  const Bench* job_ = nullptr;
  uint64_t job_iterations_ = 0;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> ready_{0};  // threads waiting for go_
  alignas(64) std::atomic<bool> go_{false};
  alignas(64) std::atomic<int> busy_{0};   // threads still in the run
};

const bool registered = register_workload([] {
  WorkloadInfo w{
      "percall",
      "the cost of single calls, timed by Google Benchmark: malloc/free pairs 8 B..4 MiB, batch allocate-then-free, "
      "realloc growth, aligned allocation, frees of blocks another thread allocated; ns per operation per benchmark",
      phase_names(),
      {
          {"min_time", ParamType::Float, "0.05", "0.5", "Google Benchmark's minimum time per benchmark run, seconds"},
          {"repetitions", ParamType::Int, "1", "3",
           "Google Benchmark repetitions per benchmark inside a cell; above 1 the median is recorded"},
          {"batch", ParamType::Int, "1000", "1000", "objects allocated, then freed, per iteration of the batch family"},
      },
      [](const Params& p, int threads, const WorkloadEnv&) { return std::make_unique<Percall>(p, threads); },
      [](const Params& p) -> std::string {
        if (!(p.real("min_time") > 0) || p.real("min_time") > 60) return "min_time must be within (0, 60] seconds";
        if (p.integer("repetitions") < 1 || p.integer("repetitions") > 100) return "repetitions must be 1..100";
        if (p.integer("batch") < 1 || p.integer("batch") > 1000000) return "batch must be 1..1000000";
        return "";
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
