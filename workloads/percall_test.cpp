// percall's release family in-process: a release's free() latency figures reach the phase's
// workload_metrics, ordered as percentiles are, and count every free of every thread. Never
// timings: which allocator is faster is a benchmark's question (docs/benchmarks.md).
#include <gtest/gtest.h>

#include <thread>

#include "workloads/test_support.h"

using namespace allocmark::workloads;

namespace {

constexpr std::size_t kReleasePhase = 5;
const char* const kTail[] = {"p50_ns", "p99_ns", "p999_ns", "max_ns"};

// Runs only the release phase, every thread as the worker's crew would, and returns its metrics.
nlohmann::json run_release(int threads, const std::map<std::string, std::string>& overrides) {
  auto overridden = overrides;
  overridden.emplace("min_time", "0.001");
  auto w = find_workload("percall")->make(test_support::preset("percall", "quick", overridden), threads, WorkloadEnv{});
  EXPECT_EQ(w->phases().at(kReleasePhase), "release");
  LiveBytes live(threads);
  std::vector<std::thread> crew;
  for (int t = 0; t < threads; ++t)
    crew.emplace_back([&, t] {
      ThreadContext ctx{t, threads, live.local(t)};
      EXPECT_GT(w->run_phase(kReleasePhase, ctx), 0u);
    });
  for (auto& t : crew) t.join();
  return w->phase_metrics(kReleasePhase);
}

}  // namespace

TEST(PercallRelease, PhasesEndWithTheReleaseFamily) {
  const auto& phases = find_workload("percall")->phases;
  EXPECT_EQ(phases, (std::vector<std::string>{"malloc_free", "batch", "realloc", "aligned", "cross_thread", "release"}));
}

TEST(PercallRelease, FreeLatencyFiguresAreOrderedPercentiles) {
  for (int threads : {1, 2}) {
    const nlohmann::json m = run_release(threads, {{"release_live", "2M"}});
    ASSERT_TRUE(m.contains("free_latency")) << m.dump();
    // One benchmark, named by the live set's bytes like the other families' sizes.
    ASSERT_EQ(m["ns_per_op"].size(), 1u) << m.dump();
    ASSERT_TRUE(m["ns_per_op"].contains("release_2097152")) << m.dump();
    EXPECT_GT(m["ns_per_op"]["release_2097152"].get<double>(), 0) << threads;
    const auto& tail = m["free_latency"]["release_2097152"];
    for (const char* name : kTail) ASSERT_TRUE(tail.contains(name)) << name << " in " << tail.dump();
    EXPECT_LE(tail["p50_ns"].get<double>(), tail["p99_ns"].get<double>()) << tail.dump();
    EXPECT_LE(tail["p99_ns"].get<double>(), tail["p999_ns"].get<double>()) << tail.dump();
    EXPECT_LE(tail["p999_ns"].get<double>(), tail["max_ns"].get<double>()) << tail.dump();
    EXPECT_GT(tail["max_ns"].get<double>(), 0) << tail.dump();
    // The mean lies within what was sampled.
    EXPECT_LE(m["ns_per_op"]["release_2097152"].get<double>(), tail["max_ns"].get<double>()) << tail.dump();
  }
}

TEST(PercallRelease, EveryFreeOfEveryThreadIsOneSample) {
  // Blocks of one size: each thread's live set is exactly 64 KiB / 64 B blocks, so a run's samples
  // are whole releases of every thread (Google Benchmark picks how many iterations).
  for (int threads : {1, 2}) {
    const nlohmann::json m = run_release(threads, {{"release_live", "64K"}, {"release_sizes", "64-64:1"}});
    const double samples = m["free_latency"]["release_65536"]["samples"].get<double>();
    EXPECT_GT(samples, 0) << threads;
    EXPECT_EQ(static_cast<uint64_t>(samples) % (1024u * threads), 0u) << samples << " at " << threads;
  }
}

TEST(PercallRelease, OtherPhasesHaveNoFreeLatency) {
  auto w = find_workload("percall")->make(test_support::preset("percall", "quick", {{"release_live", "64K"}}), 1,
                                          WorkloadEnv{});
  for (std::size_t phase = 0; phase < kReleasePhase; ++phase)
    EXPECT_FALSE(w->phase_metrics(phase).contains("free_latency")) << phase;
}

TEST(PercallRelease, BadReleaseParametersAreNamed) {
  const auto* percall = find_workload("percall");
  const std::pair<std::map<std::string, std::string>, const char*> cases[] = {
      {{{"release_live", "1K"}}, "release_live"},
      {{{"release_live", "65G"}}, "release_live"},
      {{{"release_sizes", "16-8:1"}}, "release_sizes"},
      {{{"release_sizes", "big"}}, "release_sizes"},
      {{{"release_live", "64G"}, {"release_sizes", "16-16:1"}}, "blocks"},
  };
  for (const auto& [overrides, needle] : cases) {
    const std::string why = percall->validate(test_support::preset("percall", "quick", overrides));
    EXPECT_NE(why.find(needle), std::string::npos) << "'" << why << "' for " << overrides.begin()->second;
  }
  EXPECT_EQ(percall->validate(test_support::preset("percall", "quick")), "");
}
