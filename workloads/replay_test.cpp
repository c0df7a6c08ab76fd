// The replay mechanism on small hand-built traces (written with write_trace, read back by the
// workload as a cell would): phases split at the marks, live bytes exact, a free waits for its
// allocation in another thread, realloc chains, every allocation function and its release, and
// teardown. Real programs' traces are replayed end to end by tests/trace_test.py. No timing
// assertions: a recorded-speed replay is used only to make a wait certain.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>
#include <string>

#include "harness/trace/format.h"
#include "harness/trace/summary.h"
#include "workloads/replay.h"
#include "harness/trace/test_events.h"
#include "workloads/test_support.h"

using namespace allocmark::workloads;
namespace tr = allocmark::trace;
using tr::Op;

namespace {

using tr::testing::Events;

struct TraceFile {
  std::string path;
  explicit TraceFile(tr::Trace t, const char* name) {
    path = std::string("/tmp/allocmark_replay_test_") + std::to_string(getpid()) + "_" + name + ".trace";
    for (const auto& th : t.threads) t.events += th.events;
    t.ended = true;
    t.header = {{"program", "replay_test"}};
    tr::write_trace(path, t);
  }
  ~TraceFile() { std::remove(path.c_str()); }
};

const WorkloadInfo& info() { return *find_workload("replay"); }

Params params(const std::string& path, const std::string& speed = "fast", const std::string& touch = "first") {
  return test_support::preset("replay", "quick", {{"trace", path}, {"speed", speed}, {"touch", touch}});
}

constexpr uint64_t K64 = 64 << 10;  // live bytes fold into the total every 64 KiB: larger blocks are exact

}  // namespace

TEST(Replay, PhasesSplitAtTheMarksAndEachThreadReplaysItsOwn) {
  tr::Trace t;
  t.phase_names = {"build", "query"};
  t.phase_times_us = {100, 200};
  t.threads.push_back(Events()
                          .op(Op::Malloc, {1, 1, K64})  // startup
                          .op(Op::Phase, {100, 1})
                          .op(Op::Malloc, {1, 2, 2 * K64})  // build
                          .op(Op::Malloc, {1, 3, 3 * K64})
                          .op(Op::Phase, {100, 2})
                          .op(Op::Free, {1, 2, 2 * K64})  // query
                          .done());
  // Thread 1 does nothing before query: its first event after the second mark says so.
  t.threads.push_back(Events().op(Op::Phase, {250, 2}).op(Op::Malloc, {1, 4, K64}).op(Op::Free, {1, 1, K64}).done());
  t.max_id = 4;
  TraceFile f(t, "phases");
  auto p = params(f.path);
  ASSERT_EQ(info().validate(p), "");
  ASSERT_EQ(info().own_threads(p), 2);
  auto w = info().make(p, 2, {});
  EXPECT_EQ(w->phases(), (std::vector<std::string>{"startup", "build", "query"}));
  LiveBytes live(2);
  auto out = test_support::run_all_phases(*w, live, 2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].ops, 1u);
  EXPECT_EQ(out[0].live_after, static_cast<int64_t>(K64));
  EXPECT_EQ(out[1].ops, 2u);
  EXPECT_EQ(out[1].live_after, static_cast<int64_t>(6 * K64));
  EXPECT_EQ(out[2].ops, 3u);
  EXPECT_EQ(out[2].live_after, static_cast<int64_t>(4 * K64));
  EXPECT_EQ(w->phase_metrics(2)["events"], 3u);
  EXPECT_EQ(replay::live_blocks(*w), 2u);

  // Without marks the whole trace is one phase, "run".
  tr::Trace flat;
  flat.threads.push_back(Events().op(Op::Malloc, {1, 1, 10}).op(Op::Free, {1, 1, 10}).done());
  flat.max_id = 1;
  TraceFile g(flat, "flat");
  auto w2 = info().make(params(g.path), 1, {});
  EXPECT_EQ(w2->phases(), std::vector<std::string>{"run"});
  LiveBytes live2(1);
  auto out2 = test_support::run_all_phases(*w2, live2, 1);
  EXPECT_EQ(out2.at(0).ops, 2u);
  EXPECT_EQ(out2.at(0).live_after, 0);
}

TEST(Replay, AMarkRepeatedOrNamedLikeTheHarnesssOwnIsAPhaseOfItsOwn) {
  // Readers pool phases of one name as repetitions: a second `load` (or a mark named `startup`)
  // must not be one (issue 41). trace show names them as the replay does.
  tr::Trace t;
  t.phase_names = {"load", "load", "startup", "load#2"};
  t.phase_times_us = {1, 2, 3, 4};
  t.threads.push_back(Events()
                          .op(Op::Phase, {1, 1})
                          .op(Op::Phase, {2, 2})
                          .op(Op::Phase, {3, 3})
                          .op(Op::Phase, {4, 4})
                          .op(Op::Malloc, {5, 1, 10})
                          .op(Op::Free, {5, 1, 10})
                          .done());
  t.max_id = 1;
  TraceFile f(t, "repeated_marks");
  auto w = info().make(params(f.path), 1, {});
  const std::vector<std::string> expected{"startup", "load", "load#2", "startup#2", "load#2#2"};
  EXPECT_EQ(w->phases(), expected);
  std::vector<std::string> shown;
  const nlohmann::json summary = tr::summarize(tr::read_trace(f.path));
  for (const auto& ph : summary["phases"]) shown.push_back(ph["name"]);
  EXPECT_EQ(shown, expected);
}

TEST(Replay, ACellRefusesATraceWhoseContentsChangedSinceThePlan) {
  // A replay cell is the trace's contents (pin_trace): the path absolute, the SHA-256 pinned; a
  // file replaced after the plan is another trace, never recorded as this cell (issue 41).
  tr::Trace t;
  t.threads.push_back(Events().op(Op::Malloc, {1, 1, 10}).op(Op::Free, {1, 1, 10}).done());
  t.max_id = 1;
  TraceFile f(t, "pinned");
  std::map<std::string, ParamValue> values{{"trace", f.path}};
  replay::pin_trace(values);
  const std::string digest = std::get<std::string>(values.at("trace_sha256"));
  EXPECT_EQ(digest.size(), 64u);
  auto pinned = [&](const std::string& sha) {
    return test_support::preset("replay", "quick", {{"trace", f.path}, {"trace_sha256", sha}});
  };
  EXPECT_NO_THROW(info().make(pinned(digest), 1, {}));
  try {
    info().make(pinned(std::string(64, '0')), 1, {});
    FAIL() << "a trace other than the one planned was replayed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("changed since the matrix was planned"), std::string::npos) << e.what();
  }
  // A relative path is stored absolute; a fifo is named, never opened.
  std::map<std::string, ParamValue> relative{{"trace", std::string("some/where.trace")}};
  EXPECT_THROW(replay::pin_trace(relative), std::invalid_argument);
  EXPECT_EQ(std::get<std::string>(relative.at("trace")).front(), '/');
}

TEST(Replay, SingleThreadPeakLiveIsExact) {
  tr::Trace t;
  t.threads.push_back(Events()
                          .op(Op::Malloc, {1, 1, 16 * K64})
                          .op(Op::Calloc, {1, 2, 32 * K64})
                          .op(Op::Free, {1, 1, 16 * K64})
                          .op(Op::Malloc, {1, 3, 8 * K64})
                          .op(Op::Free, {1, 3, 8 * K64})
                          .done());
  t.max_id = 3;
  TraceFile f(t, "peak");
  for (const char* touch : {"first", "all", "none"}) {
    auto w = info().make(params(f.path, "fast", touch), 1, {});
    LiveBytes live(1);
    auto out = test_support::run_all_phases(*w, live, 1);
    EXPECT_EQ(out.at(0).peak_live, static_cast<int64_t>(48 * K64)) << touch;
    EXPECT_EQ(out.at(0).live_after, static_cast<int64_t>(32 * K64)) << touch;
    EXPECT_EQ(out.at(0).ops, 5u);
    w->teardown();
    EXPECT_EQ(replay::live_blocks(*w), 0u);
  }
}

TEST(Replay, ACrossThreadFreeWaitsForItsAllocation) {
  // Thread 0 frees at once what thread 1 allocates 30 ms into the recording; at recorded speed
  // thread 1 allocates it no earlier, so thread 0 must wait (how long is not asserted).
  tr::Trace t;
  t.threads.push_back(Events().op(Op::Free, {1, 1, K64}).op(Op::Realloc, {1, 2, 3, 2 * K64, K64}).done());
  t.threads.push_back(Events().op(Op::Malloc, {30000, 1, K64}).op(Op::Malloc, {1, 2, K64}).done());
  t.max_id = 3;
  TraceFile f(t, "wait");
  auto w = info().make(params(f.path, "recorded"), 2, {});
  LiveBytes live(2);
  auto out = test_support::run_all_phases(*w, live, 2);
  EXPECT_EQ(out.at(0).ops, 4u);
  EXPECT_EQ(out.at(0).live_after, static_cast<int64_t>(2 * K64));
  auto m = w->phase_metrics(0);
  EXPECT_GE(m["waits"].get<uint64_t>(), 1u);
  EXPECT_LE(m["waits"].get<uint64_t>(), 2u);
  EXPECT_EQ(m["events"], 4u);
  EXPECT_EQ(replay::live_blocks(*w), 1u);
}

TEST(Replay, ReallocChainsCarryTheBlockAndItsBytes) {
  tr::Trace t;
  t.threads.push_back(Events()
                          .op(Op::Malloc, {1, 1, K64})
                          .op(Op::Realloc, {1, 1, 2, 4 * K64, K64})       // grows
                          .op(Op::Realloc, {1, 2, 3, 2 * K64, 4 * K64})   // shrinks
                          .op(Op::Realloc, {1, 0, 4, 3 * K64, 0})         // realloc(NULL, n)
                          .op(Op::Realloc, {1, 3, 0, 0, 2 * K64})         // realloc(p, 0): gone
                          .op(Op::Realloc, {1, 0, 0, uint64_t{1} << 62, 0})  // failed when recorded
                          .done());
  // Another thread goes on with the chain once thread 0 is done with it.
  t.threads.push_back(Events().op(Op::Realloc, {1, 4, 5, 5 * K64, 3 * K64}).op(Op::Free, {1, 5, 5 * K64}).done());
  t.max_id = 5;
  TraceFile f(t, "realloc");
  auto w = info().make(params(f.path, "fast", "all"), 2, {});
  LiveBytes live(2);
  auto out = test_support::run_all_phases(*w, live, 2);
  EXPECT_EQ(out.at(0).ops, 8u);
  EXPECT_EQ(out.at(0).live_after, 0);
  EXPECT_EQ(w->phase_metrics(0)["recorded_failures"], 1u);
  EXPECT_EQ(replay::live_blocks(*w), 0u);
}

TEST(Replay, EveryFunctionIsCalledAndTeardownFreesWhatIsLeft) {
  tr::Trace t;
  Events e;
  e.op(Op::Malloc, {1, 1, 100})
      .op(Op::Calloc, {1, 2, 100})
      .op(Op::PosixMemalign, {1, 3, 100, 64})
      .op(Op::AlignedAlloc, {1, 4, 128, 128})
      .op(Op::Memalign, {1, 5, 100, 256})
      .op(Op::Valloc, {1, 6, 100})
      .op(Op::Pvalloc, {1, 7, 100})
      .op(Op::New, {1, 8, 100})
      .op(Op::NewArray, {1, 9, 100})
      .op(Op::NewAligned, {1, 10, 100, 128})
      .op(Op::NewArrayAligned, {1, 11, 100, 128})
      .op(Op::New, {1, 12, 100})
      .op(Op::NewArray, {1, 13, 100})
      .op(Op::Malloc, {1, 0, uint64_t{1} << 62})  // a recorded failure: called again, nothing kept
      .op(Op::Free, {1, 1, 100})
      .op(Op::Delete, {1, 8, 100})
      .op(Op::DeleteArray, {1, 9, 100})
      .op(Op::DeleteAligned, {1, 10, 100})
      .op(Op::DeleteArrayAligned, {1, 11, 100})
      .op(Op::DeleteSized, {1, 12, 100})
      .op(Op::DeleteArraySized, {1, 13, 100})
      .op(Op::Free, {1, 0, 0})  // free(NULL)
      // Left for teardown, each to be freed its own way.
      .op(Op::New, {1, 14, 100})
      .op(Op::NewArrayAligned, {1, 15, 100, 64});
  t.threads.push_back(e.done());
  t.max_id = 15;
  TraceFile f(t, "functions");
  auto w = info().make(params(f.path), 1, {});
  LiveBytes live(1);
  auto out = test_support::run_all_phases(*w, live, 1);
  EXPECT_EQ(out.at(0).ops, 24u);
  EXPECT_EQ(out.at(0).live_after, 128 + 100 * 7);  // ids 2..7, 14, 15
  EXPECT_EQ(w->phase_metrics(0)["recorded_failures"], 1u);
  EXPECT_EQ(replay::live_blocks(*w), 8u);
  w->teardown();
  EXPECT_EQ(replay::live_blocks(*w), 0u);
  w->teardown();  // twice is harmless (the destructor runs it again)
}

TEST(Replay, TeardownFreesBlocksOfPhasesNeverRun) {
  tr::Trace t;
  t.phase_names = {"later"};
  t.phase_times_us = {10};
  t.threads.push_back(Events().op(Op::Malloc, {1, 1, 10}).op(Op::Phase, {10, 1}).op(Op::Free, {1, 1, 10}).done());
  t.max_id = 1;
  TraceFile f(t, "partial");
  auto w = info().make(params(f.path), 1, {});
  LiveBytes live(1);
  ThreadContext ctx{0, 1, live.local(0)};
  EXPECT_EQ(w->run_phase(0, ctx), 1u);
  EXPECT_EQ(replay::live_blocks(*w), 1u);
  w->teardown();
  EXPECT_EQ(replay::live_blocks(*w), 0u);
}

TEST(ReplayDeathTest, AFreeWhoseAllocationNeverComesFailsTheCellNamingThreadIdAndPhase) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Thread 0 frees object 1 in startup; thread 1 allocates it only in the next phase, which
  // cannot begin before thread 0 finishes startup.
  tr::Trace t;
  t.phase_names = {"next"};
  t.phase_times_us = {10};
  t.threads.push_back(Events().op(Op::Free, {1, 1, 10}).done());
  t.threads.push_back(Events().op(Op::Phase, {10, 1}).op(Op::Malloc, {1, 1, 10}).done());
  t.max_id = 1;
  TraceFile f(t, "stuck");
  EXPECT_EXIT(
      {
        replay::set_wait_limit_ms(50);
        auto w = info().make(params(f.path), 2, {});
        LiveBytes live(2);
        test_support::run_all_phases(*w, live, 2);
      },
      testing::ExitedWithCode(3), "thread 0 waited .* in phase 'startup' to free object 1");
}

TEST(Replay, ValidateNamesWhatIsWrongWithTheTrace) {
  EXPECT_EQ(info().validate(params("")), "replay.trace: name a trace file (allocmark trace record)");
  const std::string missing = "/tmp/allocmark_replay_test_no_such_file.trace";
  EXPECT_NE(info().validate(params(missing)).find(missing), std::string::npos);
  const std::string junk = "/tmp/allocmark_replay_test_" + std::to_string(getpid()) + "_junk.trace";
  {
    FILE* out = std::fopen(junk.c_str(), "w");
    std::fputs("not a trace at all, just some text", out);
    std::fclose(out);
  }
  const std::string problem = info().validate(params(junk));
  EXPECT_NE(problem.find(junk), std::string::npos) << problem;
  EXPECT_NE(problem.find("offset"), std::string::npos) << problem;
  std::remove(junk.c_str());

  tr::Trace t;
  t.threads.push_back(Events().op(Op::Malloc, {1, 1, 10}).done());
  t.max_id = 1;
  TraceFile f(t, "valid");
  EXPECT_EQ(info().validate(params(f.path)), "");
  EXPECT_NE(info().validate(params(f.path, "slow")).find("replay.speed"), std::string::npos);
  EXPECT_NE(info().validate(params(f.path, "fast", "some")).find("replay.touch"), std::string::npos);
  EXPECT_TRUE(info().named_only);
}
