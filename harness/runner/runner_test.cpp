// The runner's pieces on recorded event streams, and the one-cell unit against a fake worker for
// the timings the real worker only hits by chance.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "harness/runner/cell_runner.h"
#include "harness/runner/events.h"
#include "harness/runner/probe.h"
#include "harness/runner/record.h"
#include "harness/runner/status.h"

using namespace allocmark::runner;
using nlohmann::json;
namespace mx = allocmark::matrix;

namespace {

mx::Cell test_cell() {
  mx::Cell c;
  c.allocator = {"jemalloc:bg", "jemalloc", "/usr/lib/libjemalloc.so.2", {{"MALLOC_CONF", "background_thread:true"}}, "", false};
  c.workload = "size_mix";
  c.threads = 2;
  c.rep = 1;
  c.params = {{"live_mib", "8"}};
  return c;
}

// A worker's report stream as recorded from a real size_mix cell, trimmed to two phases.
std::string ok_stream(int64_t t0) {
  auto phase = [&](const char* name, int64_t b, int64_t e, uint64_t peak, uint64_t live, double ops) {
    return json{{"event", "phase_end"},
                {"phase", {{"name", name}, {"wall_s", (e - b) / 1e9}, {"ops", ops}, {"ops_per_s", ops / ((e - b) / 1e9)},
                           {"peak_rss_bytes", peak}, {"end_rss_bytes", peak / 2}, {"peak_live_bytes", live},
                           {"minor_faults", 10}, {"user_s", 0.25}, {"t_begin_ns", b}, {"t_end_ns", e}}}}
               .dump() + "\n";
  };
  return json{{"event", "start"}, {"library", "/usr/lib/libjemalloc.so.2"}, {"version", "5.3.0"}, {"options", {{"opt.background_thread", true}}}}.dump() + "\n" +
         json{{"event", "baseline"}, {"idle_rss_bytes", 1000000}, {"alloc_stats", json::object()}, {"pinned_cpus", {0, 1}}}.dump() + "\n" +
         json{{"event", "phase_begin"}, {"phase", "fill"}}.dump() + "\n" + phase("fill", t0 + 1000000, t0 + 501000000, 9000000, 4000000, 1000) +
         phase("churn", t0 + 501000000, t0 + 1501000000, 11000000, 4000000, 3000) +
         json{{"event", "done"}, {"alloc_stats", {{"stats.active", 123}}}, {"contention", {{"num_wait", 2}}}}.dump() + "\n";
}

// Feeds `stream` in random-sized chunks, as a pipe delivers it.
RecordBuilder replay(const std::string& stream, EventStream& events, int64_t t0, unsigned seed) {
  RecordBuilder b(test_cell(), "/tmp/x.log", t0);
  std::mt19937 rng(seed);
  for (std::size_t pos = 0; pos < stream.size();) {
    std::size_t n = std::min<std::size_t>(stream.size() - pos, 1 + rng() % 97);
    for (const auto& ev : events.feed(stream.data() + pos, n)) b.on_event(ev);
    pos += n;
  }
  return b;
}

WorkerEnd ended(const RecordBuilder& b, const EventStream& s, int wait_status) {
  WorkerEnd end;
  end.wait_status = wait_status;
  end.saw_done = b.saw_done();
  end.error_event = b.error_event();
  end.partial_bytes = s.partial_bytes();
  end.malformed_lines = s.malformed_lines();
  return end;
}

std::string fake_worker() { return FAKE_WORKER; }

}  // namespace

TEST(EventStream, OnlyWholeLinesBecomeEvents) {
  EventStream s;
  EXPECT_TRUE(s.feed("{\"event\":\"st", 12).empty());
  auto evs = s.feed("art\"}\nnot json\n{\"a\":", 20);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0]["event"], "start");
  EXPECT_EQ(s.malformed_lines(), 1u);
  EXPECT_EQ(s.partial_bytes(), 5u);
}

TEST(RecordBuilder, OkStreamInAnyChunkingGivesTheSameRecord) {
  const int64_t t0 = 5000000000;
  std::string stream = ok_stream(t0);
  json first;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    EventStream s;
    RecordBuilder b = replay(stream, s, t0, seed);
    json r = b.finish(json::array({{1.0, 2000000}}), 2000000, 2.0, classify(ended(b, s, W_EXITCODE(0, 0))));
    if (seed == 1) first = r;
    EXPECT_EQ(r, first);
  }
  EXPECT_EQ(first["status"], "ok");
  EXPECT_TRUE(first["error"].is_null());
  EXPECT_EQ(first["library"], "/usr/lib/libjemalloc.so.2");
  EXPECT_EQ(first["pinned_cpus"], json({0, 1}));
  ASSERT_EQ(first["phases"].size(), 2u);
  EXPECT_DOUBLE_EQ(first["phases"][0]["start_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(first["phases"][1]["end_ms"].get<double>(), 1501.0);
  EXPECT_FALSE(first["phases"][0].contains("t_begin_ns"));
  EXPECT_EQ(first["peak_rss_bytes"], 11000000);
  EXPECT_EQ(first["peak_live_bytes"], 4000000);
  // (11,000,000 - 1,000,000) / 4,000,000
  EXPECT_DOUBLE_EQ(first["fragmentation_ratio"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(first["totals"]["ops"].get<double>(), 4000);
  EXPECT_DOUBLE_EQ(first["totals"]["ops_per_s"].get<double>(), 4000 / 1.5);
  EXPECT_EQ(first["alloc_stats"]["stats.active"], 123);
  EXPECT_EQ(first["contention"]["num_wait"], 2);
  EXPECT_EQ(first["key"], test_cell().key());
  EXPECT_EQ(first["env"]["MALLOC_CONF"], "background_thread:true");
}

TEST(Classify, CrashHangCutShortAndMissingDone) {
  const int64_t t0 = 0;
  std::string stream = ok_stream(t0);
  std::string without_done = stream.substr(0, stream.rfind("{\"alloc_stats\"") == std::string::npos
                                                   ? stream.rfind("{\"event\":\"done\"")
                                                   : stream.rfind("{\"alloc_stats\""));
  {  // killed by SIGSEGV after its phases
    EventStream s;
    RecordBuilder b = replay(without_done, s, t0, 1);
    WorkerEnd end = ended(b, s, SIGSEGV);  // WIFSIGNALED
    end.log_tail = "Segmentation fault";
    CellStatus st = classify(end);
    EXPECT_EQ(st.status, "crashed");
    EXPECT_NE(st.error.get<std::string>().find("signal 11"), std::string::npos);
    EXPECT_NE(st.error.get<std::string>().find("Segmentation fault"), std::string::npos);
    json r = b.finish(json::array(), 0, 1.0, st);
    EXPECT_EQ(r["phases"].size(), 2u) << "phases measured before the crash are kept";
  }
  {  // killed at the timeout
    EventStream s;
    RecordBuilder b = replay(without_done, s, t0, 2);
    WorkerEnd end = ended(b, s, SIGKILL);
    end.timed_out = true;
    end.timeout_s = 2.5;
    CellStatus st = classify(end);
    EXPECT_EQ(st.status, "timeout");
    EXPECT_EQ(st.error, "no result within 2.5 s; killed");
  }
  {  // SIGKILL nobody in allocmark sent
    CellStatus st = classify(ended(RecordBuilder(test_cell(), "", 0), EventStream(), SIGKILL));
    EXPECT_EQ(st.status, "crashed");
    EXPECT_NE(st.error.get<std::string>().find("OOM killer"), std::string::npos);
  }
  {  // exit 0 with the last line cut short: not ok, and says why
    EventStream s;
    RecordBuilder b = replay(without_done + "{\"event\":\"done\",\"alloc", s, t0, 3);
    CellStatus st = classify(ended(b, s, W_EXITCODE(0, 0)));
    EXPECT_EQ(st.status, "failed");
    EXPECT_NE(st.error.get<std::string>().find("without reporting `done`"), std::string::npos);
    EXPECT_NE(st.error.get<std::string>().find("cut short"), std::string::npos);
  }
  {  // the worker's own error event wins over the log
    EventStream s;
    RecordBuilder b = replay(json{{"event", "error"}, {"error", "preload did not take"}}.dump() + "\n", s, t0, 4);
    WorkerEnd end = ended(b, s, W_EXITCODE(3, 0));
    end.log_tail = "noise";
    CellStatus st = classify(end);
    EXPECT_EQ(st.status, "failed");
    EXPECT_EQ(st.error, "exit code 3: preload did not take");
  }
}

// Defect (issue 7): the runner stopped reading when waitpid saw the worker exit, losing what was
// still in the pipe. A worker with a 1 MiB pipe writes ~600 KiB and exits at once.
TEST(RunCell, ReadsTheReportPipeToTheEndAfterTheWorkerExits) {
  ::setenv("FAKE_WORKER_MODE", "burst", 1);
  std::string log = ::testing::TempDir() + "/burst.log";
  CellOutcome out = run_cell(test_cell(), {fake_worker(), 30, 10, 100, allocmark::placement::parse_pin("none", "")}, log);
  ::unsetenv("FAKE_WORKER_MODE");
  EXPECT_EQ(out.record["status"], "ok") << out.record["error"];
  EXPECT_EQ(out.record["phases"].size(), 150u);
  EXPECT_EQ(out.record["alloc_stats"]["k"], 1);
}

TEST(RunCell, CutShortStreamFailsWithAReason) {
  ::setenv("FAKE_WORKER_MODE", "cut", 1);
  CellOutcome out = run_cell(test_cell(), {fake_worker(), 30, 10, 100, allocmark::placement::parse_pin("none", "")}, ::testing::TempDir() + "/cut.log");
  ::unsetenv("FAKE_WORKER_MODE");
  EXPECT_EQ(out.record["status"], "failed");
  EXPECT_NE(out.record["error"].get<std::string>().find("cut short"), std::string::npos) << out.record["error"];
}

TEST(RunCell, HangIsKilledAtTheTimeout) {
  ::setenv("FAKE_WORKER_MODE", "hang", 1);
  CellOutcome out = run_cell(test_cell(), {fake_worker(), 0.5, 10, 100, allocmark::placement::parse_pin("none", "")}, ::testing::TempDir() + "/hang.log");
  ::unsetenv("FAKE_WORKER_MODE");
  EXPECT_EQ(out.record["status"], "timeout");
}

// Defect (issue 7): the pre-run probe waited for ever on a library that hangs while loading.
TEST(Probe, ALibraryThatHangsWhileLoadingIsReportedAfterTheLimit) {
  ::setenv("FAKE_WORKER_MODE", "hang", 1);
  mx::ResolvedAllocator a{"slow", "generic", "/opt/slow/libslow.so", {}, "", true};
  json probe = probe_allocator(a, fake_worker(), 0.5);
  ::unsetenv("FAKE_WORKER_MODE");
  ASSERT_TRUE(probe.contains("error")) << probe;
  EXPECT_NE(probe["error"].get<std::string>().find("/opt/slow/libslow.so did not finish loading within 0.5 s"),
            std::string::npos)
      << probe;
}

TEST(Probe, AnswerIsReturned) {
  ::setenv("FAKE_WORKER_MODE", "probe", 1);
  json probe = probe_allocator({"glibc", "glibc", "", {}, "", false}, fake_worker(), 10);
  ::unsetenv("FAKE_WORKER_MODE");
  EXPECT_EQ(probe.value("library", ""), "/fake/lib.so") << probe;
}
