#include "harness/runner/cell_runner.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>

#include "harness/matrix/program.h"
#include "harness/metrics/proc.h"
#include "harness/runner/cell_launcher.h"
#include "harness/runner/events.h"
#include "harness/runner/status.h"

namespace allocmark::runner {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// After the worker exited, what is still in the pipe belongs to the cell (a final `done`, the tail
// of a large burst). Everything it started has been ended (end_leftovers), so EOF comes at once
// unless a process outside its tree holds the pipe (one it passed the descriptor to): the wait is
// bounded for that case, and it is never part of the cell's time.
constexpr auto kDrainLimit = std::chrono::seconds(5);

}  // namespace

std::unique_ptr<CellLauncher> launcher_for(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path) {
  return matrix::is_program(cell.workload) ? program_launcher(cell, settings, log_path) : worker_launcher(cell, settings, log_path);
}

CellOutcome run_cell_here(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path,
                          const CellHooks& hooks) {
  std::unique_ptr<CellLauncher> launcher = launcher_for(cell, settings, log_path);
  become_subreaper();
  Spawned w = launcher->start();
  const int64_t start_ns = monotonic_ns();
  launcher->began(start_ns);
  const auto deadline = Clock::now() + std::chrono::duration<double>(settings.timeout_s);
  RecordBuilder builder(cell, log_path, start_ns);
  EventStream stream;
  Timeline timeline(settings.max_timeline_points);
  ProcessEnd process;
  process.start_ns = start_ns;
  WorkerEnd end;
  end.timeout_s = settings.timeout_s;
  bool exited = false, pipe_open = true, phase_open = w.phase_fd >= 0;
  std::optional<Clock::time_point> drain_until;
  auto next_sample = Clock::now();
  auto next_tick = Clock::now() + std::chrono::seconds(1);
  char buf[65536];

  // Runs until the process has exited and its pipes reached end of file (or the drain limit).
  while (!exited || pipe_open || phase_open) {
    auto now = Clock::now();
    if (!exited) {
      if (!end.timed_out && now >= deadline) {
        end.timed_out = true;
        kill_group(w.pid);
      }
      if (!process.interrupted && hooks.stop_requested && hooks.stop_requested()) {
        process.interrupted = true;
        kill_group(w.pid);
      }
      if (hooks.on_tick && now >= next_tick) {
        hooks.on_tick();
        next_tick = now + std::chrono::seconds(1);
      }
      if (now >= next_sample) {
        uint64_t rss = 0;
        if (metrics::read_statm_rss(w.pid, rss)) timeline.add((monotonic_ns() - start_ns) / 1e6, rss);
        next_sample += std::chrono::milliseconds(settings.sample_ms);
        if (next_sample < now) next_sample = now + std::chrono::milliseconds(settings.sample_ms);
      }
    } else if (drain_until && now >= *drain_until) {
      break;
    }
    int wait_ms = exited ? 50
                         : std::clamp(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                          next_sample - Clock::now()).count()),
                                      0, settings.sample_ms);
    if (pipe_open || phase_open) {
      // The report pipe and a program's phase pipe, each read as it has data.
      pollfd pfds[2] = {{pipe_open ? w.report_fd : -1, POLLIN, 0}, {phase_open ? w.phase_fd : -1, POLLIN, 0}};
      if (::poll(pfds, 2, wait_ms) > 0) {
        for (int i = 0; i < 2; ++i) {
          if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t n = ::read(pfds[i].fd, buf, sizeof buf);
          if (n > 0) {
            if (i == 0)
              for (const auto& ev : stream.feed(buf, static_cast<std::size_t>(n))) launcher->take_event(ev, builder);
            else  // marks still unread when the program exited were written before: their edges are its exit
              launcher->take_phase_marks(buf, static_cast<std::size_t>(n), exited ? process.exit_ns : monotonic_ns(), builder);
          } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            (i == 0 ? pipe_open : phase_open) = false;
          }
        }
      }
    } else if (!exited) {
      ::usleep(static_cast<useconds_t>(std::max(wait_ms, 1)) * 1000);
    }
    if (!exited && ::wait4(w.pid, &end.wait_status, WNOHANG, &process.usage) == w.pid) {
      exited = true;
      process.exit_ns = monotonic_ns();
      launcher->exited();
      // The cell ends with its process: what it started (in its group, or reparented to the
      // driver after leaving it) ends now, and no longer holds the pipes open.
      process.outlived_by = end_leftovers(w.pid);
      drain_until = Clock::now() + kDrainLimit;
    }
  }
  ::close(w.report_fd);
  if (w.phase_fd >= 0) ::close(w.phase_fd);
  process.wait_status = end.wait_status;
  process.timed_out = end.timed_out;
  launcher->complete(builder, process, timeline);
  // The process's whole group is dead by now, so nothing writes into the folder any more.
  launcher->clean_up();
  const double wall_s = (process.exit_ns - start_ns) / 1e9;

  end.saw_done = builder.saw_done();
  end.error_event = builder.error_event();
  end.partial_bytes = stream.partial_bytes();
  end.malformed_lines = stream.malformed_lines();
  if (!end.timed_out && !process.interrupted && !(end.saw_done && WIFEXITED(end.wait_status) && WEXITSTATUS(end.wait_status) == 0))
    end.log_tail = tail_of_file(log_path, 400);
  json record = builder.finish(timeline.to_json(), timeline.max_rss(), wall_s, classify(end));
  // The host the cell ran on, in the record itself: cells of one folder may come from many nodes
  // (a Slurm array), and readers never pool cells of different hosts.
  utsname host{};
  ::uname(&host);
  record["host"] = host.nodename;
  return {std::move(record), process.interrupted};
}

}  // namespace allocmark::runner
