// The runner's pieces on recorded event streams, and the one-cell unit against a fake worker for
// the timings the real worker only hits by chance.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "harness/runner/cell_runner.h"
#include "harness/runner/events.h"
#include "harness/runner/probe.h"
#include "harness/runner/process.h"
#include "harness/runner/program_phases.h"
#include "harness/runner/progress_display.h"
#include "harness/runner/record.h"
#include "harness/runner/status.h"
#include "harness/results/model.h"

using namespace allocmark::runner;
using nlohmann::json;
namespace mx = allocmark::matrix;
namespace results = allocmark::results;

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
                {"phase", {{"name", name}, {"wall_s", (e - b) / 1e9}, {"ops", ops},
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
  // The figures records carried before 2026-12-03 are back (issue 41), each the model's metric
  // over the measured fields, so the two can never differ.
  EXPECT_EQ(first["schema_version"], results::kRecordSchemaVersion);
  const results::Model model = results::Model::from_records({first});
  ASSERT_EQ(model.cells().size(), 1u);
  const results::CellResult& cell = model.cells()[0];
  const results::PhaseValues whole = results::whole_cell(cell);
  const auto metric = [&](results::Metric m, const results::PhaseValues& p) { return *results::metric_value(m, cell, p); };
  EXPECT_EQ(first["peak_rss_bytes"], 11000000);
  EXPECT_EQ(first["peak_rss_bytes"].get<double>(), metric(results::Metric::peak_rss_bytes, whole));
  EXPECT_EQ(first["peak_live_bytes"], 4000000);
  EXPECT_EQ(first["peak_live_bytes"].get<double>(), metric(results::Metric::peak_live_bytes, whole));
  // (11,000,000 - 1,000,000) / 4,000,000
  EXPECT_DOUBLE_EQ(first["fragmentation_ratio"].get<double>(), 2.5);
  EXPECT_EQ(first["fragmentation_ratio"].get<double>(), metric(results::Metric::rss_above_idle_over_live, whole));
  EXPECT_DOUBLE_EQ(first["totals"]["ops"].get<double>(), 4000);
  EXPECT_DOUBLE_EQ(first["totals"]["wall_s"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(first["totals"]["minor_faults"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(first["totals"]["user_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(first["totals"]["major_faults"].get<double>(), 0);  // no phase has it: 0, as before
  EXPECT_DOUBLE_EQ(first["totals"]["ops_per_s"].get<double>(), 4000 / 1.5);
  EXPECT_EQ(first["totals"]["ops_per_s"].get<double>(), metric(results::Metric::ops_per_s, whole));
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_EQ(first["phases"][i]["ops_per_s"].get<double>(), metric(results::Metric::ops_per_s, cell.phases[i])) << i;
  EXPECT_DOUBLE_EQ(first["phases"][1]["ops_per_s"].get<double>(), 3000.0);
  EXPECT_EQ(first["alloc_stats"]["stats.active"], 123);
  EXPECT_EQ(first["contention"]["num_wait"], 2);
  EXPECT_EQ(first["key"], test_cell().key());
  EXPECT_EQ(first["env"]["MALLOC_CONF"], "background_thread:true");
}

// A phase's contention gets back its two shares, as the metrics compute them; null where a metric
// has no value (no operations, no schedstat).
TEST(RecordBuilder, ContentionCarriesItsSharesAsTheMetricsComputeThem) {
  auto phase = [](const char* name, double ops, json contention) {
    return json{{"event", "phase_end"},
                {"phase", {{"name", name}, {"wall_s", 0.5}, {"ops", ops}, {"peak_rss_bytes", 1 << 20}, {"voluntary_ctx_switches", 30},
                           {"contention", contention}, {"t_begin_ns", 0}, {"t_end_ns", 500000000}}}}
               .dump() + "\n";
  };
  const std::string stream =
      json{{"event", "start"}, {"library", "/usr/lib/libjemalloc.so.2"}}.dump() + "\n" +
      phase("busy", 3e6, {{"runqueue_wait_ns", 1000}, {"run_ns", 3000}, {"runqueue_threads", 2}}) +
      phase("idle", 0, {{"runqueue_wait_ns", nullptr}, {"run_ns", nullptr}, {"runqueue_threads", nullptr}}) +
      json{{"event", "done"}}.dump() + "\n";
  EventStream s;
  RecordBuilder b = replay(stream, s, 0, 1);
  const json r = b.finish(json::array(), 0, 1.0, classify(ended(b, s, W_EXITCODE(0, 0))));
  const json& busy = r["phases"][0]["contention"];
  EXPECT_DOUBLE_EQ(busy["runqueue_wait_share"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(busy["voluntary_ctx_switches_per_mop"].get<double>(), 10.0);
  const json& idle = r["phases"][1]["contention"];
  EXPECT_TRUE(idle["runqueue_wait_share"].is_null());
  EXPECT_TRUE(idle["voluntary_ctx_switches_per_mop"].is_null());
  EXPECT_EQ(r["phases"][1]["ops_per_s"], 0.0);
  EXPECT_TRUE(r["peak_live_bytes"].is_null());  // size_mix counts live bytes; this stream has none
  EXPECT_FALSE(r.contains("fragmentation_ratio"));  // absent without live bytes, as it always was
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

// The fake worker, unpinned, killed after timeout_s.
CellSettings fake_worker_settings(double timeout_s) {
  CellSettings s;
  s.worker_path = fake_worker();
  s.timeout_s = timeout_s;
  s.pin = allocmark::placement::parse_pin("none", "");
  return s;
}

// Defect (issue 7): the runner stopped reading when waitpid saw the worker exit, losing what was
// still in the pipe. A worker with a 1 MiB pipe writes ~600 KiB and exits at once.
TEST(RunCell, ReadsTheReportPipeToTheEndAfterTheWorkerExits) {
  ::setenv("FAKE_WORKER_MODE", "burst", 1);
  std::string log = ::testing::TempDir() + "/burst.log";
  CellOutcome out = run_cell_here(test_cell(), fake_worker_settings(30), log);
  ::unsetenv("FAKE_WORKER_MODE");
  EXPECT_EQ(out.record["status"], "ok") << out.record["error"];
  EXPECT_EQ(out.record["phases"].size(), 150u);
  EXPECT_EQ(out.record["alloc_stats"]["k"], 1);
}

TEST(RunCell, CutShortStreamFailsWithAReason) {
  ::setenv("FAKE_WORKER_MODE", "cut", 1);
  CellOutcome out = run_cell_here(test_cell(), fake_worker_settings(30), ::testing::TempDir() + "/cut.log");
  ::unsetenv("FAKE_WORKER_MODE");
  EXPECT_EQ(out.record["status"], "failed");
  EXPECT_NE(out.record["error"].get<std::string>().find("cut short"), std::string::npos) << out.record["error"];
}

TEST(RunCell, HangIsKilledAtTheTimeout) {
  ::setenv("FAKE_WORKER_MODE", "hang", 1);
  CellOutcome out = run_cell_here(test_cell(), fake_worker_settings(0.5), ::testing::TempDir() + "/hang.log");
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

// Defect (issue 21): a log tail cut inside a multibyte character, or a log with stray bytes, made
// the record unserialisable and lost the cell.
TEST(TailOfFile, StartsAtACharacterBoundaryAndIsValidUtf8) {
  const std::string path = ::testing::TempDir() + "/tail.log";
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 300; ++i) out << "\xC3\xA9";  // e-acute, 2 bytes
    out << "stray \xFF\n";
  }
  const std::string tail = tail_of_file(path, 401);  // the cut falls on the second byte of an e-acute
  EXPECT_EQ(tail.substr(0, 5), "...\xC3\xA9");
  EXPECT_EQ(tail.substr(tail.size() - 9), "stray \xEF\xBF\xBD");
  EXPECT_NO_THROW((void)json(tail).dump());
  EXPECT_EQ(tail_of_file(::testing::TempDir() + "/no-such.log", 400), "");
}

TEST(EventStream, StraysInAStringAreReplacedNotTheWholeEvent) {
  EventStream s;
  const std::string line = "{\"event\":\"error\",\"error\":\"bad \xFF path\"}\n";
  auto evs = s.feed(line.data(), line.size());
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0]["error"], "bad \xEF\xBF\xBD path");
  EXPECT_EQ(s.malformed_lines(), 0u);
}

TEST(ProgramPhases, AMarkThatIsNotUtf8IsABadLineStoredAsValidText) {
  ProgramPhases phases(::getpid(), 0, {0});
  const std::string marks = "phase caf\xE9\nphase a\x01" "b\nphase \xC3\xA9t\xC3\xA9\n";
  std::vector<json> closed = phases.feed(marks.data(), marks.size(), 1000);
  ASSERT_EQ(closed.size(), 1u);  // only the well-formed name closes a phase
  EXPECT_EQ(phases.take_answers(), "error\nerror\nok\n");
  ASSERT_EQ(phases.bad_lines().size(), 2u);
  EXPECT_EQ(phases.bad_lines()[0], "phase caf\xEF\xBF\xBD");
  EXPECT_NO_THROW((void)json(phases.bad_lines()).dump());
}

TEST(ProgramPhases, MarksReadAfterTheProgramEndedReadNothingOfAReusedPid) {
  ProgramPhases phases(::getpid(), 0, {0});
  phases.program_ended();
  std::vector<json> closed = phases.feed("phase late\n", 11, 5000);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(closed[0]["phase"]["peak_rss_bytes"].is_null()) << closed[0];
  rusage none{};
  json last = phases.finish(json(), none, 4000, 0);  // its mark came before the end was seen
  EXPECT_GE(last["phase"]["t_end_ns"].get<int64_t>(), last["phase"]["t_begin_ns"].get<int64_t>());
}

TEST(RecordBuilder, AProgramsCommandAndPathsThatAreNotUtf8StillMakeARecord) {
  mx::Cell c = test_cell();
  c.workload = "program:p";
  c.params = {{"command", "/bin/echo caf\xE9"}, {"env.V", "\xFF"}};
  RecordBuilder b(c, "/tmp/\xFE.log", 0);
  b.annotate({{"stdout", "/tmp/\xFE.stdout"}, {"phase_mark_errors", json::array({"x"})}});
  json r = b.finish(json::array(), 0, 1.0, {"ok", nullptr});
  EXPECT_NO_THROW((void)r.dump());
  EXPECT_EQ(r["params"]["command"], "/bin/echo caf\xEF\xBF\xBD");
  EXPECT_EQ(r["stdout"], "/tmp/\xEF\xBF\xBD.stdout");
}

// Defect (issue 21): a program's children that left its process group (setsid) lived on after the
// cell; the driver, as their subreaper, ends them and says how many there were.
TEST(EndLeftovers, EndsTheGroupAndWhatWasReparentedAndCountsThem) {
  become_subreaper();
  Spawned s = spawn_process({"/bin/sh", "-c", "sleep 30 & setsid sleep 31 & exit 0"}, {"PATH=/usr/bin:/bin"},
                            ::testing::TempDir() + "/leftovers.log", {});
  int status = 0;
  ASSERT_EQ(::waitpid(s.pid, &status, 0), s.pid);
  ::close(s.report_fd);
  EXPECT_EQ(end_leftovers(s.pid), 2u);
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child of the driver is left";
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(end_leftovers(s.pid), 0u);
}

// Issue 41: outside a terminal, a line per finished cell and, while one runs long, a heartbeat at
// most every kHeartbeatSeconds; never a carriage return or an erase sequence. A fake clock stands
// for the minutes a real hanging cell would take.
TEST(ProgressDisplay, OutsideATerminalAHeartbeatComesEveryThirtySecondsOfACellAndNoSooner) {
  using namespace std::chrono;
  allocmark::os::Clock::time_point now{};
  std::ostringstream out;
  ProgressDisplay display(out, /*tty=*/false, 3, 3, [&] { return now; });
  display.tick();  // no cell yet: nothing
  display.started(1, "glibc size_mix t1 r1");
  for (int s = 1; s < 30; ++s) {
    now += seconds(1);
    display.tick();
  }
  EXPECT_EQ(out.str(), "") << "no heartbeat before 30 s";
  now += seconds(1);
  display.tick();
  EXPECT_EQ(out.str(), "[1/3] glibc size_mix t1 r1: running, cell 00:30, run 00:30\n");
  for (int s = 0; s < 29; ++s) {
    now += seconds(1);
    display.tick();
  }
  now += milliseconds(999);
  display.tick();
  EXPECT_EQ(out.str(), "[1/3] glibc size_mix t1 r1: running, cell 00:30, run 00:30\n") << "at most one per 30 s";
  now += milliseconds(1);
  display.tick();
  display.finished(1, "glibc size_mix t1 r1", "ok", 61.0, "");
  display.started(2, "glibc size_mix t1 r2");
  now += seconds(29);
  display.tick();  // the cell line just written counts: the next heartbeat is 30 s after it
  display.finished(2, "glibc size_mix t1 r2", "failed", 29.0, "exit code 1");
  EXPECT_EQ(out.str(),
            "[1/3] glibc size_mix t1 r1: running, cell 00:30, run 00:30\n"
            "[1/3] glibc size_mix t1 r1: running, cell 01:00, run 01:00\n"
            "[1/3] glibc size_mix t1 r1: ok (61.0 s)\n"
            "[2/3] glibc size_mix t1 r2: failed (29.0 s): exit code 1\n");
  display.clear_line();
  EXPECT_EQ(out.str().find_first_of("\r\033"), std::string::npos);
}

// Issue 43: the heartbeat's single "elapsed" counted from the run's start and a 2.5 min cell was
// read as 7.5 min. A later cell's heartbeat names its own clock and the run's, apart.
TEST(ProgressDisplay, AHeartbeatNamesTheCellsOwnElapsedTimeAndTheRunsApart) {
  using namespace std::chrono;
  allocmark::os::Clock::time_point now{};
  std::ostringstream out;
  ProgressDisplay display(out, /*tty=*/false, 2, 2, [&] { return now; });
  now += seconds(300);  // the run's first five minutes went before this cell (a probe, a build, a cell)
  display.started(2, "mimalloc size_mix t2 r1");
  now += seconds(151);
  display.tick();
  EXPECT_EQ(out.str(), "[2/2] mimalloc size_mix t2 r1: running, cell 02:31, run 07:31\n");
}

TEST(ProgressDisplay, OnATerminalOneLineIsRedrawnAndOnlyCellsNotOkStay) {
  using namespace std::chrono;
  allocmark::os::Clock::time_point now{};
  std::ostringstream out;
  ProgressDisplay display(out, /*tty=*/true, 2, 2, [&] { return now; });
  display.started(1, "glibc size_mix t1 r1");
  now += seconds(90);
  display.tick();
  display.finished(1, "glibc size_mix t1 r1", "ok", 90.0, "");
  display.started(2, "jemalloc size_mix t1 r1");
  display.finished(2, "jemalloc size_mix t1 r1", "timeout", 1.0, "");
  EXPECT_EQ(out.str(),
            "\r\033[K[1/2] glibc size_mix t1 r1  cell 00:00, run 00:00  eta --:--"
            "\r\033[K[1/2] glibc size_mix t1 r1  cell 01:30, run 01:30  eta --:--"
            "\r\033[K[2/2] jemalloc size_mix t1 r1  cell 00:00, run 01:30  eta 01:30"
            "\r\033[K[2/2] jemalloc size_mix t1 r1: timeout (1.0 s)\n");
}
