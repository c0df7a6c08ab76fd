// Cost of call-latency sampling per malloc/free pair: the workloads' allocate()/release() with
// timing off (N = 0: the countdown alone) and at N = 64 and N = 1 (every call timed), next to
// plain malloc/free. Google Benchmark; run with
//   build/bin/call_latency_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "workloads/call_latency.h"
#include "workloads/rng.h"

using namespace allocmark::workloads;

static void BM_MallocFree(benchmark::State& state) {
  Rng rng(1);
  for (auto _ : state) {
    void* p = std::malloc(16 + rng.below(4096));
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}

// range(0) = N.
static void BM_AllocateRelease(benchmark::State& state) {
  call_latency::configure(static_cast<uint32_t>(state.range(0)), 0);
  call_latency::restart_thread();
  Rng rng(1);
  for (auto _ : state) {
    void* p = allocate(16 + rng.below(4096));
    benchmark::DoNotOptimize(p);
    release(p);
  }
}

BENCHMARK(BM_MallocFree);
BENCHMARK(BM_AllocateRelease)->Arg(0)->Arg(64)->Arg(1);
BENCHMARK_MAIN();
