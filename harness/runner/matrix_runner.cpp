#include "harness/runner/matrix_runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/random.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <iostream>

#include "harness/os/clock.h"
#include "harness/record/record_keys.h"
#include "harness/results/folder_layout.h"
#include "harness/results/reporters/reporter.h"
#include "harness/results/safe_text.h"
#include "harness/runner/progress_display.h"

namespace allocmark::runner {

std::atomic<bool> g_interrupted{false};

namespace {

void on_signal(int) { g_interrupted = true; }

// summary.csv and summary.json are derived from all of results.jsonl, so rewriting them costs time
// in proportion to the folder. After a cell they are rewritten only when the time since the last
// rewrite is at least ten times what that rewrite took (at most ~10% of a long run's wall time,
// between cells, never while a worker runs), and always when the run ends.
class SummaryWriter {
 public:
  explicit SummaryWriter(results::ResultsDir& dir) : dir_(dir) {}
  void after_cell() {
    if (os::Clock::now() - last_end_ >= 10 * last_cost_) write();
    else stale_ = true;
  }
  void final() {
    if (stale_) write();
  }
  void try_final() {
    try {
      final();
    } catch (const std::exception&) {  // the run already stops with the first error
    }
  }

 private:
  void write() {
    auto t0 = os::Clock::now();
    stale_ = true;
    results::write_summaries(dir_.path());
    stale_ = false;
    last_end_ = os::Clock::now();
    last_cost_ = last_end_ - t0;
  }
  results::ResultsDir& dir_;
  bool stale_ = false;
  os::Clock::time_point last_end_{};
  os::Clock::duration last_cost_{};
};

}  // namespace

std::string random_id() {
  unsigned char bytes[16];
  for (std::size_t got = 0; got < sizeof bytes;) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("cannot draw a run id (getrandom): ") + std::strerror(errno));
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

void stamp_record_ids(nlohmann::json& record, const std::string& run_id) {
  if (!record.contains(record::kRecordRunId)) record[record::kRecordRunId] = run_id.empty() ? random_id() : run_id;
  if (!record.contains(record::kRecordId)) record[record::kRecordId] = random_id();
}

std::vector<CellJob> pending_jobs(const matrix::Plan& plan, const results::ResultsDir& dir, bool retry_failed) {
  std::vector<CellJob> jobs;
  for (std::size_t i = 0; i < plan.cells.size(); ++i) {
    const auto& cell = plan.cells[i];
    const std::string key = cell.key();
    int attempt = 1;
    if (auto it = dir.recorded().find(key); it != dir.recorded().end()) {
      if (!retry_failed || it->second.identity.status == "ok") continue;
      attempt = it->second.identity.attempt + 1;
    }
    jobs.push_back({cell, i + 1, dir.path() + "/" + results::layout::cell_files(key, attempt).log, attempt});
  }
  return jobs;
}

bool progress_redraws() {
  const char* asked = std::getenv("ALLOCMARK_PROGRESS");
  if (!asked || !*asked) return ::isatty(2) != 0;
  const std::string value = asked;
  if (value == "redraw") return true;
  if (value == "lines") return false;
  throw matrix::ConfigError("ALLOCMARK_PROGRESS='" + value + "': expected lines or redraw (unset: redraw on a terminal)");
}

namespace {

// SIGINT and SIGTERM set g_interrupted while the run goes on; restore() gives back the old handlers.
class InterruptSignals {
 public:
  InterruptSignals() {
    g_interrupted = false;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  void restore() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// The executor's events: each finished cell recorded and counted, and the run's progress shown
// (a redrawn line on a terminal, else a line per cell and a heartbeat while a long one runs).
class RunProgress {
 public:
  RunProgress(std::ostream& msg, MatrixRunReport& report, results::ResultsDir& dir, SummaryWriter& summaries,
              std::size_t jobs, bool tty, const std::string& run_id)
      : report_(report), dir_(dir), summaries_(summaries), run_id_(run_id), display_(msg, tty, report.total, jobs) {}

  ExecutorEvents events() {
    ExecutorEvents events;
    events.stop_requested = [] { return g_interrupted.load(); };
    events.tick = [this] { display_.tick(); };
    events.tick_redraws = display_.redraws();
    events.started = [this](const CellJob& job) { display_.started(job.index, job.cell.label()); };
    events.finished = [this](const CellJob& job, const nlohmann::json& record) { finished(job, record); };
    return events;
  }
  void clear_line() { display_.clear_line(); }

 private:
  void finished(const CellJob& job, const nlohmann::json& record) {
    nlohmann::json stored = record;
    stored[results::kRecordAttempt] = job.attempt;
    stamp_record_ids(stored, run_id_);
    try {
      dir_.append(stored);
      summaries_.after_cell();
    } catch (const std::exception& e) {
      throw RunStopped(std::string("could not record cell ") + job.cell.label() + ": " + e.what(),
                       dir_.recorded().size(), dir_.path());
    }
    ++report_.ran;
    std::string status = record.value(record::kRecordStatus, "?");
    if (status != "ok") ++report_.not_ok;
    auto error = record.find(record::kRecordError);
    display_.finished(job.index, job.cell.label(), status, record.value(record::kRecordWallS, 0.0),
                      error != record.end() && error->is_string() ? error->get<std::string>() : "");
  }

  MatrixRunReport& report_;
  results::ResultsDir& dir_;
  SummaryWriter& summaries_;
  const std::string& run_id_;
  ProgressDisplay display_;
};

}  // namespace

MatrixRunReport run_matrix(const matrix::Plan& plan, results::ResultsDir& dir, Executor& executor,
                           const MatrixRunOptions& options) {
  std::ostream& msg = options.messages ? *options.messages : std::cerr;
  MatrixRunReport report;
  report.total = plan.cells.size();
  const std::string run_id = options.run_id.empty() ? random_id() : options.run_id;
  std::vector<CellJob> jobs = pending_jobs(plan, dir, options.retry_failed);
  for (const auto& cell : plan.cells) report.already_recorded += dir.recorded().count(cell.key());
  if (report.already_recorded)
    msg << fmt::format("allocmark: {} of {} cells already recorded; running {}\n", report.already_recorded, report.total,
                       jobs.size());

  InterruptSignals signals;
  SummaryWriter summaries(dir);
  RunProgress progress(msg, report, dir, summaries, jobs.size(), options.progress_line, run_id);
  auto restore = [&] {
    signals.restore();
    progress.clear_line();
  };
  try {
    executor.run(jobs, progress.events());
  } catch (const RunStopped&) {
    restore();
    summaries.try_final();
    throw;
  } catch (const std::exception& e) {
    restore();
    summaries.try_final();
    throw RunStopped(e.what(), dir.recorded().size(), dir.path());
  }
  restore();
  try {
    summaries.final();
  } catch (const std::exception& e) {
    throw RunStopped(std::string("could not write the summaries: ") + e.what(), dir.recorded().size(), dir.path());
  }
  report.interrupted = g_interrupted.load();
  for (const auto& cell : plan.cells)
    if (auto it = dir.recorded().find(cell.key()); it != dir.recorded().end() && it->second.identity.status != "ok")
      ++report.not_ok_in_folder;
  return report;
}

}  // namespace allocmark::runner
