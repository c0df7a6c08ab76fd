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

#include "harness/results/folder_layout.h"
#include "harness/results/reporters/reporter.h"
#include "harness/results/safe_text.h"

namespace allocmark::runner {

std::atomic<bool> g_interrupted{false};

namespace {

void on_signal(int) { g_interrupted = true; }

std::string clock_text(double seconds) {
  int s = static_cast<int>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// summary.csv and summary.json are derived from all of results.jsonl, so rewriting them costs time
// in proportion to the folder. After a cell they are rewritten only when the time since the last
// rewrite is at least ten times what that rewrite took (at most ~10% of a long run's wall time,
// between cells, never while a worker runs), and always when the run ends.
class SummaryWriter {
 public:
  explicit SummaryWriter(results::ResultsDir& dir) : dir_(dir) {}
  void after_cell() {
    if (std::chrono::steady_clock::now() - last_end_ >= 10 * last_cost_) write();
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
    auto t0 = std::chrono::steady_clock::now();
    stale_ = true;
    results::write_summaries(dir_.path());
    stale_ = false;
    last_end_ = std::chrono::steady_clock::now();
    last_cost_ = last_end_ - t0;
  }
  results::ResultsDir& dir_;
  bool stale_ = false;
  std::chrono::steady_clock::time_point last_end_{};
  std::chrono::steady_clock::duration last_cost_{};
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
  if (!record.contains("run_id")) record["run_id"] = run_id.empty() ? random_id() : run_id;
  if (!record.contains(results::kRecordId)) record[results::kRecordId] = random_id();
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

  g_interrupted = false;
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  const bool tty = options.progress_line;
  const auto t0 = std::chrono::steady_clock::now();
  const CellJob* current = nullptr;
  auto progress = [&] {
    if (!current) return;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string eta = report.ran ? clock_text(std::max(0.0, elapsed / report.ran * (jobs.size() - report.ran))) : "--:--";
    msg << fmt::format("\r\033[K[{}/{}] {}  elapsed {}  eta {}", current->index, report.total,
                       results::terminal_line(current->cell.label()), clock_text(elapsed), eta)
        << std::flush;
  };
  // Outside a terminal: a line now and then while a long cell runs, never a redraw.
  auto last_line = std::chrono::steady_clock::now();
  auto heartbeat = [&] {
    const auto now = std::chrono::steady_clock::now();
    if (!current || std::chrono::duration<double>(now - last_line).count() < kHeartbeatSeconds) return;
    last_line = now;
    msg << results::terminal_line(fmt::format("[{}/{}] {}: running, elapsed {}", current->index, report.total,
                                              current->cell.label(),
                                              clock_text(std::chrono::duration<double>(now - t0).count())))
        << "\n" << std::flush;
  };
  SummaryWriter summaries(dir);
  ExecutorEvents events;
  events.stop_requested = [] { return g_interrupted.load(); };
  events.tick = tty ? std::function<void()>(progress) : std::function<void()>(heartbeat);
  events.tick_redraws = tty;
  events.started = [&](const CellJob& job) {
    current = &job;
    last_line = std::chrono::steady_clock::now();
    if (tty) progress();
  };
  events.finished = [&](const CellJob& job, const nlohmann::json& record) {
    nlohmann::json stored = record;
    stored[results::kRecordAttempt] = job.attempt;
    stamp_record_ids(stored, run_id);
    try {
      dir.append(stored);
      summaries.after_cell();
    } catch (const std::exception& e) {
      throw RunStopped(std::string("could not record cell ") + job.cell.label() + ": " + e.what(),
                       dir.recorded().size(), dir.path());
    }
    ++report.ran;
    std::string status = record.value("status", "?");
    if (status != "ok") ++report.not_ok;
    if (!tty || status != "ok") {
      std::string error = record.contains("error") && record["error"].is_string() ? ": " + record["error"].get<std::string>() : "";
      // The label (allocator and program names) and the error (a program's stderr) are shown, never obeyed.
      msg << fmt::format("{}[{}/{}] {}\n", tty ? "\r\033[K" : "", job.index, report.total,
                         results::terminal_line(fmt::format("{}: {} ({:.1f} s){}", job.cell.label(), status,
                                                            record.value("wall_s", 0.0), error)));
      msg << std::flush;
      last_line = std::chrono::steady_clock::now();
    }
  };
  auto restore = [&] {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (tty) msg << "\r\033[K" << std::flush;
  };
  try {
    executor.run(jobs, events);
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
