// arena_churn in-process: the live total after each phase is exactly what the long-lived objects
// hold (every request object freed, every handover drained), phases come in order, thread churn
// really happens, and one seed gives one operation sequence whatever the thread interleaving.
#include "workloads/arena_churn.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include "workloads/test_support.h"

using namespace allocmark::workloads;

// Named after the file: its helpers and tests share a unity batch with other files (cmake/allocmark_build_speed.cmake).
namespace arena_churn_test {
namespace {
std::map<std::string, std::string> small(int64_t seed = 1, int pool = 4, const std::string& schedule = "waves") {
  return {{"pool_threads", std::to_string(pool)},
          {"schedule", schedule},
          {"burst_requests", "30"},
          {"steady_requests", "20"},
          {"thread_life_min", "3"},
          {"thread_life_max", "8"},
          {"big_chance", "0.2"},
          {"big_max", "1M"},
          {"long_lived_per_slot", "16"},
          {"idle_ms", "5"},
          {"seed", std::to_string(seed)}};
}

// Runs a test body on a thread of its own. glibc's mallinfo2 counts chunks parked in a thread's
// tcache as in use; freeing the workload's objects on gtest's main thread would leave them there
// and skew later tests in this process that compare mallinfo2 with their live bytes.
template <class Body>
void on_own_thread(Body body) {
  std::thread(body).join();
}

Params small_params(int64_t seed = 1, int pool = 4, const std::string& schedule = "waves") {
  return test_support::preset("arena_churn", "quick", small(seed, pool, schedule));
}

struct Trace {
  std::vector<int64_t> live_after;
  std::vector<int64_t> peak_live;
  std::vector<uint64_t> ops;
  uint64_t digest;
  bool operator==(const Trace& o) const { return live_after == o.live_after && peak_live == o.peak_live && ops == o.ops && digest == o.digest; }
  friend void PrintTo(const Trace& t, std::ostream* os) {
    *os << "live_after " << testing::PrintToString(t.live_after) << " peak_live " << testing::PrintToString(t.peak_live)
        << " ops " << testing::PrintToString(t.ops) << " digest " << t.digest;
  }
};

Trace run(int64_t seed, int pool, int threads) {
  Trace r;
  on_own_thread([&] {
    ArenaChurn w(small_params(seed, pool), threads, WorkloadEnv{});
    LiveBytes live(threads);
    for (const auto& o : test_support::run_all_phases(w, live, threads)) {
      r.live_after.push_back(o.live_after);
      r.peak_live.push_back(o.peak_live);
      r.ops.push_back(o.ops);
    }
    r.digest = w.trace_digest();
  });
  return r;
}
}  // namespace

TEST(ArenaChurn, PhasesInDocumentedOrder) {
  on_own_thread([] {
    ArenaChurn w(small_params(), 1, WorkloadEnv{});
    EXPECT_EQ(w.phases(), (std::vector<std::string>{"burst", "steady", "idle"}));
    EXPECT_EQ(find_workload("arena_churn")->phases, w.phases());
  });
}

TEST(ArenaChurn, LiveIsExactlyTheLongLivedSetAfterEveryPhase) {
  on_own_thread([] {
    for (auto [pool, schedule] : std::vector<std::pair<int, std::string>>{{1, "waves"}, {5, "waves"}, {5, "free"}}) {
      for (int threads : {1, 2, 3}) {
        ArenaChurn w(small_params(1, pool, schedule), threads, WorkloadEnv{});
        LiveBytes live(threads);
        std::vector<int64_t> held;
        auto outcome = test_support::run_all_phases(w, live, threads, [&](std::size_t) { held.push_back(w.long_lived_bytes()); });
        ASSERT_EQ(outcome.size(), 3u);
        for (std::size_t ph = 0; ph < outcome.size(); ++ph) {
          // Request objects are all freed and every handover drained: only long-lived objects remain.
          EXPECT_EQ(outcome[ph].live_after, held[ph]) << pool << " " << schedule << " " << threads << " " << ph;
          EXPECT_GT(outcome[ph].live_after, 0) << pool << " " << schedule << " " << threads << " " << ph;
        }
        // The requests held far more than the long-lived set at some point.
        EXPECT_GT(outcome[0].peak_live, outcome[0].live_after);
        EXPECT_EQ(outcome[0].ops, static_cast<uint64_t>(30 * pool));
        EXPECT_EQ(outcome[2].ops, 0u);
        w.teardown();
        EXPECT_EQ(w.long_lived_bytes(), 0);
      }
    }
  });
}

TEST(ArenaChurn, LiveBytesMatchWhatGlibcHolds) {
  on_own_thread([] {
    // A second accounting: glibc's in-use bytes over all arenas grow by at least the live figure
    // (each chunk has a header and rounding), and not by much more.
    ArenaChurn w(small_params(2, 3), 1, WorkloadEnv{});
    LiveBytes live(1);
    struct mallinfo2 before = mallinfo2();
    ThreadContext ctx{0, 1, live.local(0)};
    w.run_phase(0, ctx);
    struct mallinfo2 after = mallinfo2();
    int64_t growth = static_cast<int64_t>(after.uordblks + after.hblkhd) - static_cast<int64_t>(before.uordblks + before.hblkhd);
    EXPECT_EQ(live.current(), w.long_lived_bytes());
    EXPECT_GE(growth, live.current());
    EXPECT_LT(growth, live.current() * 1.3 + (256 << 10));
    w.teardown();
  });
}

TEST(ArenaChurn, ThreadsChurnAndObjectsCrossThreads) {
  on_own_thread([] {
    ArenaChurn w(small_params(), 2, WorkloadEnv{});
    LiveBytes live(2);
    std::vector<nlohmann::json> m;
    test_support::run_all_phases(w, live, 2, [&](std::size_t phase) { m.push_back(w.phase_metrics(phase)); });
    auto &burst = m[0], &steady = m[1], &idle = m[2];
    EXPECT_EQ(burst["pool_threads"], 4);
    EXPECT_EQ(burst["requests"], 4 * 30);
    // Threads serve 3-8 requests each, so 30 requests per slot take at least 4 threads.
    EXPECT_GE(burst["threads_created"].get<int>(), 4 * 4);
    EXPECT_GT(burst["remote_frees"].get<int>(), 0);
    EXPECT_GT(burst["big_buffers"].get<int>(), 0);
    EXPECT_EQ(steady["active_slots"], 2);
    EXPECT_EQ(steady["requests"], 2 * 20);
    EXPECT_EQ(idle["requests"], 0);
    EXPECT_EQ(idle["long_lived_bytes"], w.long_lived_bytes());
  });
}

TEST(ArenaChurn, SameSeedSameSequence) {
  // Slots carry their own generators and requests run in waves, so the digest and the live
  // figures, peaks included, do not depend on how the pool's threads were scheduled or how many
  // crew threads managed them.
  Trace a = run(3, 4, 2);
  EXPECT_EQ(a, run(3, 4, 2));
  EXPECT_EQ(a, run(3, 4, 1));
  EXPECT_EQ(a, run(3, 4, 3));
  // More slots than CPUs, as at the default 8 per core: the peak still follows the schedule.
  Trace many = run(5, 12, 2);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(many, run(5, 12, 1 + i));
  Trace b = run(4, 4, 2);
  EXPECT_NE(a.digest, b.digest);
  EXPECT_NE(a.live_after, b.live_after);
}

TEST(ArenaChurn, DefaultPoolIsEightPerCore) {
  on_own_thread([] {
    auto p = test_support::preset("arena_churn", "quick", {{"burst_requests", "0"}, {"steady_requests", "0"}, {"idle_ms", "0"}});
    ArenaChurn w(p, 1, WorkloadEnv{});
    EXPECT_EQ(w.pool_size(), 8 * static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  });
}

TEST(ArenaChurn, RejectsBadParameters) {
  const auto* info = find_workload("arena_churn");
  EXPECT_EQ(info->validate(small_params()), "");
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"allocs_min", "0"}, {"thread_life_max", "2"}, {"remote_max", "0.1"}, {"long_lived_min", "1.5"},
           {"steady_active", "0"}, {"scale", "0"}, {"schedule", "lockstep"}, {"big_min", "16M"}, {"pool_threads", "-1"}}) {
    auto o = small();
    o[name] = value;
    EXPECT_NE(info->validate(test_support::preset("arena_churn", "quick", o)), "") << name;
  }
}

}  // namespace arena_churn_test
