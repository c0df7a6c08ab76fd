// Cost of the harness's own instrumentation inside measured phases: live-byte accounting
// (LiveBytes::Local::add) next to the malloc/free pair it accounts. Google Benchmark; run with
//   build/bin/live_bytes_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "workloads/rng.h"
#include "workloads/workload.h"

using namespace allocmark::workloads;

static void BM_MallocFree(benchmark::State& state) {
  Rng rng(1);
  for (auto _ : state) {
    std::size_t size = 16 + rng.below(4096);
    void* p = std::malloc(size);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}

static void BM_MallocFreeAccounted(benchmark::State& state) {
  static LiveBytes live(64);
  LiveBytes::Local& local = live.local(state.thread_index());
  Rng rng(1);
  for (auto _ : state) {
    std::size_t size = 16 + rng.below(4096);
    void* p = std::malloc(size);
    local.add(static_cast<int64_t>(size));
    benchmark::DoNotOptimize(p);
    std::free(p);
    local.add(-static_cast<int64_t>(size));
  }
}

// The accounting alone, with a net positive drift so the shared total is folded into regularly.
static void BM_AccountingOnly(benchmark::State& state) {
  static LiveBytes live(64);
  LiveBytes::Local& local = live.local(state.thread_index());
  Rng rng(1);
  for (auto _ : state) {
    int64_t size = 16 + static_cast<int64_t>(rng.below(4096));
    local.add(size);
    local.add(-size + 8);
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_MallocFree)->Threads(1)->Threads(2);
BENCHMARK(BM_MallocFreeAccounted)->Threads(1)->Threads(2);
BENCHMARK(BM_AccountingOnly)->Threads(1)->Threads(2);
BENCHMARK_MAIN();
