#include "harness/runner/cell_runner.h"

#include <poll.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "harness/metrics/proc.h"
#include "harness/runner/environment.h"
#include "harness/runner/events.h"
#include "harness/runner/process.h"
#include "harness/runner/record.h"
#include "harness/runner/timeline.h"

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
// of a large burst). Its process group is dead, so EOF comes at once unless a process outside the
// group kept the pipe open: the wait is bounded for that case.
constexpr auto kDrainLimit = std::chrono::seconds(5);

}  // namespace

json worker_spec(const matrix::Cell& cell, const CellSettings& settings) {
  return {{"allocator", cell.allocator.name}, {"backend", cell.allocator.backend},
          {"library", cell.allocator.library}, {"workload", cell.workload},
          {"threads", cell.threads},           {"rep", cell.rep},
          {"params", cell.params},             {"pin_threads", settings.pin_threads},
          {"driver_pid", ::getpid()}};
}

CellOutcome run_cell(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path,
                     const CellHooks& hooks) {
  Spawned w = spawn_worker(settings.worker_path, {"--cell", worker_spec(cell, settings).dump()},
                           worker_environment(cell.allocator), log_path);
  const int64_t start_ns = monotonic_ns();
  const auto deadline = Clock::now() + std::chrono::duration<double>(settings.timeout_s);
  RecordBuilder builder(cell, log_path, start_ns);
  EventStream stream;
  Timeline timeline(settings.max_timeline_points);
  WorkerEnd end;
  end.timeout_s = settings.timeout_s;
  bool interrupted = false, exited = false, pipe_open = true;
  std::optional<Clock::time_point> drain_until;
  auto next_sample = Clock::now();
  auto next_tick = Clock::now() + std::chrono::seconds(1);
  char buf[65536];

  // Runs until the worker has exited and its report pipe reached end of file (or the drain limit).
  while (!exited || pipe_open) {
    auto now = Clock::now();
    if (!exited) {
      if (!end.timed_out && now >= deadline) {
        end.timed_out = true;
        kill_group(w.pid);
      }
      if (!interrupted && hooks.stop_requested && hooks.stop_requested()) {
        interrupted = true;
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
    if (pipe_open) {
      pollfd pfd{w.report_fd, POLLIN, 0};
      if (::poll(&pfd, 1, wait_ms) > 0) {
        ssize_t n = ::read(w.report_fd, buf, sizeof buf);
        if (n > 0) {
          for (const auto& ev : stream.feed(buf, static_cast<std::size_t>(n))) builder.on_event(ev);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          pipe_open = false;
        }
      }
    } else if (!exited) {
      ::usleep(static_cast<useconds_t>(std::max(wait_ms, 1)) * 1000);
    }
    if (!exited && ::waitpid(w.pid, &end.wait_status, WNOHANG) == w.pid) {
      exited = true;
      kill_group(w.pid);  // anything the worker left behind in its group
      drain_until = Clock::now() + kDrainLimit;
    }
  }
  ::close(w.report_fd);
  const double wall_s = (monotonic_ns() - start_ns) / 1e9;

  end.saw_done = builder.saw_done();
  end.error_event = builder.error_event();
  end.partial_bytes = stream.partial_bytes();
  end.malformed_lines = stream.malformed_lines();
  if (!end.timed_out && !interrupted && !(end.saw_done && WIFEXITED(end.wait_status) && WEXITSTATUS(end.wait_status) == 0))
    end.log_tail = tail_of_file(log_path, 400);
  json record = builder.finish(timeline.to_json(), timeline.max_rss(), wall_s, classify(end));
  // The host the cell ran on, in the record itself: cells of one folder may come from many nodes
  // (a Slurm array), and readers never pool cells of different hosts.
  utsname host{};
  ::uname(&host);
  record["host"] = host.nodename;
  return {std::move(record), interrupted};
}

}  // namespace allocmark::runner
