#include "harness/runner/cell_runner.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "harness/matrix/program.h"
#include "harness/metrics/proc.h"
#include "harness/record/record_keys.h"
#include "harness/results/machine.h"
#include "harness/os/clock.h"
#include "harness/runner/cell_launcher.h"
#include "harness/runner/events.h"
#include "harness/runner/status.h"

namespace allocmark::runner {

namespace {

using nlohmann::json;

constexpr int64_t kMs = 1000000, kSecond = 1000 * kMs;

// After the worker exited, what is still in the pipe belongs to the cell (a final `done`, the tail
// of a large burst). Everything it started has been ended (end_leftovers), so EOF comes at once
// unless a process outside its tree holds the pipe (one it passed the descriptor to): the wait is
// bounded for that case, and it is never part of the cell's time.
constexpr int64_t kDrainLimitNs = 5 * kSecond;

// What every kind of cell shares while its process runs: the timeout and the stop request, RSS
// sampling, the report and phase pipes, reaping and the end of leftovers. Times are os::monotonic_ns.
class CellLoop {
 public:
  CellLoop(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path, const CellHooks& hooks,
           CellLauncher& launcher)
      : settings_(settings), log_path_(log_path), hooks_(hooks), launcher_(launcher), w_(launcher.start()),
        start_ns_(os::monotonic_ns()), builder_(cell, log_path, start_ns_), timeline_(settings.max_timeline_points) {
    launcher.began(start_ns_);
    const int64_t now = os::monotonic_ns();
    deadline_ns_ = now + static_cast<int64_t>(settings.timeout_s * 1e9);
    next_sample_ns_ = now;
    next_tick_ns_ = now + kSecond;
    process_.start_ns = start_ns_;
    end_.timeout_s = settings.timeout_s;
    phase_open_ = w_.phase_fd >= 0;
  }

  // Runs until the process has exited and its pipes reached end of file (or the drain limit).
  void run() {
    while (!exited_ || pipe_open_ || phase_open_) {
      const int64_t now = os::monotonic_ns();
      if (!exited_)
        watch(now);
      else if (drain_until_ns_ >= 0 && now >= drain_until_ns_)
        break;
      const int wait_ms = exited_ ? 50 : std::clamp(static_cast<int>((next_sample_ns_ - os::monotonic_ns()) / kMs), 0, settings_.sample_ms);
      if (pipe_open_ || phase_open_)
        read_pipes(wait_ms);
      else if (!exited_)
        ::usleep(static_cast<useconds_t>(std::max(wait_ms, 1)) * 1000);
      if (!exited_) reap();
    }
  }

  CellOutcome finish();

 private:
  void watch(int64_t now);
  void read_pipes(int wait_ms);
  void reap();

  const CellSettings& settings_;
  const std::string& log_path_;
  const CellHooks& hooks_;
  CellLauncher& launcher_;
  const Spawned w_;
  const int64_t start_ns_;
  RecordBuilder builder_;
  EventStream stream_;
  Timeline timeline_;
  ProcessEnd process_;
  WorkerEnd end_;
  bool exited_ = false, pipe_open_ = true, phase_open_ = false;
  int64_t deadline_ns_ = 0, next_sample_ns_ = 0, next_tick_ns_ = 0, drain_until_ns_ = -1;
  char buf_[65536];
};

// While the process runs: its timeout, a stop request, the once-a-second hook and RSS samples.
void CellLoop::watch(int64_t now) {
  if (!end_.timed_out && now >= deadline_ns_) {
    end_.timed_out = true;
    kill_group(w_.pid);
  }
  if (!process_.interrupted && hooks_.stop_requested && hooks_.stop_requested()) {
    process_.interrupted = true;
    kill_group(w_.pid);
  }
  if (hooks_.on_tick && now >= next_tick_ns_) {
    hooks_.on_tick();
    next_tick_ns_ = now + kSecond;
  }
  if (now >= next_sample_ns_) {
    uint64_t rss = 0;
    if (metrics::read_statm_rss(w_.pid, rss)) timeline_.add((os::monotonic_ns() - start_ns_) / 1e6, rss);
    const int64_t period = settings_.sample_ms * kMs;
    next_sample_ns_ += period;
    if (next_sample_ns_ < now) next_sample_ns_ = now + period;
  }
}

// The report pipe and a program's phase pipe, each read as it has data.
void CellLoop::read_pipes(int wait_ms) {
  pollfd pfds[2] = {{pipe_open_ ? w_.report_fd : -1, POLLIN, 0}, {phase_open_ ? w_.phase_fd : -1, POLLIN, 0}};
  if (::poll(pfds, 2, wait_ms) <= 0) return;
  for (int i = 0; i < 2; ++i) {
    if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = ::read(pfds[i].fd, buf_, sizeof buf_);
    if (n > 0) {
      if (i == 0)
        for (const auto& ev : stream_.feed(buf_, static_cast<std::size_t>(n))) launcher_.take_event(ev, builder_);
      else  // marks still unread when the program exited were written before: their edges are its exit
        launcher_.take_phase_marks(buf_, static_cast<std::size_t>(n), exited_ ? process_.exit_ns : os::monotonic_ns(), builder_);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      (i == 0 ? pipe_open_ : phase_open_) = false;
    }
  }
}

void CellLoop::reap() {
  if (::wait4(w_.pid, &end_.wait_status, WNOHANG, &process_.usage) != w_.pid) return;
  exited_ = true;
  process_.exit_ns = os::monotonic_ns();
  launcher_.exited();
  // The cell ends with its process: what it started (in its group, or reparented to the
  // driver after leaving it) ends now, and no longer holds the pipes open.
  process_.outlived_by = end_leftovers(w_.pid);
  drain_until_ns_ = os::monotonic_ns() + kDrainLimitNs;
}

// Both pipes read: the launcher completes the record, the cell is classified, the host added.
CellOutcome CellLoop::finish() {
  ::close(w_.report_fd);
  if (w_.phase_fd >= 0) ::close(w_.phase_fd);
  process_.wait_status = end_.wait_status;
  process_.timed_out = end_.timed_out;
  launcher_.complete(builder_, process_, timeline_);
  // The process's whole group is dead by now, so nothing writes into the folder any more.
  launcher_.clean_up();
  const double wall_s = (process_.exit_ns - start_ns_) / 1e9;
  end_.saw_done = builder_.saw_done();
  end_.error_event = builder_.error_event();
  end_.partial_bytes = stream_.partial_bytes();
  end_.malformed_lines = stream_.malformed_lines();
  if (!end_.timed_out && !process_.interrupted &&
      !(end_.saw_done && WIFEXITED(end_.wait_status) && WEXITSTATUS(end_.wait_status) == 0))
    end_.log_tail = tail_of_file(log_path_, 400);
  json record = builder_.finish(timeline_.to_json(), timeline_.max_rss(), wall_s, classify(end_));
  // The host the cell ran on, in the record itself: cells of one folder may come from many nodes
  // (a Slurm array), and readers never pool cells of different hosts.
  record[record::kRecordHost] = results::host_name();
  return {std::move(record), process_.interrupted};
}

}  // namespace

std::unique_ptr<CellLauncher> launcher_for(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path) {
  return matrix::is_program(cell.workload) ? program_launcher(cell, settings, log_path) : worker_launcher(cell, settings, log_path);
}

CellOutcome run_cell_here(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path,
                          const CellHooks& hooks) {
  std::unique_ptr<CellLauncher> launcher = launcher_for(cell, settings, log_path);
  become_subreaper();
  CellLoop loop(cell, settings, log_path, hooks, *launcher);
  loop.run();
  return loop.finish();
}

}  // namespace allocmark::runner
