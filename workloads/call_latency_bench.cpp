// Cost of call-latency sampling per malloc/free pair: the workloads' allocate()/release() with
// timing off (N = 0: the countdown alone) and at N = 64 and N = 1 (every call timed), next to
// plain malloc/free; and with the placement address ring recording every sampled block. Google Benchmark; run with
//   build/bin/call_latency_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "workloads/address_sample.h"
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
static void allocate_release_loop(benchmark::State& state) {
  call_latency::configure(static_cast<uint32_t>(state.range(0)), 0);
  call_latency::restart_thread();
  Rng rng(1);
  for (auto _ : state) {
    void* p = allocate(16 + rng.below(4096));
    benchmark::DoNotOptimize(p);
    release(p);
  }
}

static void BM_AllocateRelease(benchmark::State& state) { allocate_release_loop(state); }

// The same with a placement ring bound to the thread (address_sample.h), as a crew thread has one:
// the difference to BM_AllocateRelease is what recording each sampled block's address and CPU adds.
static void BM_AllocateReleaseWithAddresses(benchmark::State& state) {
  address_sample::configure(1);
  address_sample::bind_thread(0);
  allocate_release_loop(state);
  address_sample::bind_thread(-1);
}

BENCHMARK(BM_MallocFree);
BENCHMARK(BM_AllocateRelease)->Arg(0)->Arg(64)->Arg(1);
BENCHMARK(BM_AllocateReleaseWithAddresses)->Arg(64)->Arg(1);
BENCHMARK_MAIN();
