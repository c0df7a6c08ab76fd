#include "harness/runner/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "allocators/backends.h"
#include "harness/metrics/proc.h"

extern char** environ;

namespace allocmark::runner {

std::atomic<bool> g_interrupted{false};

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

json cell_spec(const matrix::Cell& cell, bool pin) {
  return {{"allocator", cell.allocator.name}, {"backend", cell.allocator.backend},
          {"library", cell.allocator.library}, {"workload", cell.workload},
          {"threads", cell.threads},           {"rep", cell.rep},
          {"params", cell.params},             {"pin_threads", pin}};
}

// Everything fork needs is built before fork: the child only dup2s and execs.
struct Spawned {
  pid_t pid = -1;
  int report_fd = -1;
};

Spawned spawn_worker(const std::string& worker, const std::string& mode, const std::string& spec,
                     const std::vector<std::string>& env, const std::string& log_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error("cannot write " + log_path + ": " + std::strerror(errno));
  }
  std::vector<char*> argv{const_cast<char*>(worker.c_str()), const_cast<char*>(mode.c_str()),
                          const_cast<char*>(spec.c_str()), nullptr};
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a terminal's Ctrl-C reaches the driver, which decides
    ::dup2(fds[1], 3);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execve(worker.c_str(), argv.data(), envp.data());
    char msg[512];
    int n = std::snprintf(msg, sizeof msg, "allocmark: cannot execute %s: %s\n", worker.c_str(), std::strerror(errno));
    (void)!::write(2, msg, n);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  ::close(log_fd);
  return {pid, fds[0]};
}

std::string signal_reason(int sig, bool timed_out) {
  if (timed_out) return "timeout";
  std::string name = ::strsignal(sig) ? ::strsignal(sig) : "signal";
  std::string reason = "killed by signal " + std::to_string(sig) + " (" + name + ")";
  if (sig == SIGKILL) reason += "; not sent by allocmark: likely the kernel's OOM killer (see dmesg)";
  return reason;
}

// Keeps at most `cap` points by halving the resolution whenever the cap is reached, so a long
// cell's timeline stays evenly spaced.
class Timeline {
 public:
  explicit Timeline(int cap) : cap_(std::max(cap, 2)) {}
  void add(double t_ms, uint64_t rss) {
    if (++seen_ % stride_ != 0) return;
    points_.push_back({t_ms, static_cast<double>(rss)});
    if (static_cast<int>(points_.size()) >= cap_) {
      std::vector<std::array<double, 2>> kept;
      for (std::size_t i = 0; i < points_.size(); i += 2) kept.push_back(points_[i]);
      points_.swap(kept);
      stride_ *= 2;
    }
  }
  json to_json() const {
    json out = json::array();
    for (const auto& p : points_) out.push_back({std::round(p[0] * 10) / 10, static_cast<uint64_t>(p[1])});
    return out;
  }
  uint64_t max_rss() const {
    double m = 0;
    for (const auto& p : points_) m = std::max(m, p[1]);
    return static_cast<uint64_t>(m);
  }

 private:
  int cap_;
  uint64_t stride_ = 1, seen_ = 0;
  std::vector<std::array<double, 2>> points_;
};

}  // namespace

std::vector<std::string> worker_environment(const matrix::ResolvedAllocator& allocator) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    if (!allocators::is_allocator_env(name)) env.push_back(entry);
  }
  if (!allocator.library.empty()) env.push_back("LD_PRELOAD=" + allocator.library);
  for (const auto& [k, v] : allocator.env) env.push_back(k + "=" + v);
  return env;
}

std::string tail_of_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

CellOutcome run_cell(const matrix::Cell& cell, const RunnerOptions& options, int cell_index) {
  std::string log_path = options.log_dir + "/" + std::to_string(cell_index) + ".log";
  json record{
      {"allocator", cell.allocator.name}, {"backend", cell.allocator.backend}, {"workload", cell.workload},
      {"threads", cell.threads},          {"rep", cell.rep},                   {"key", cell.key()},
      {"params", cell.params},            {"env", cell.allocator.env},         {"preload", cell.allocator.library},
      {"status", "failed"},               {"error", nullptr},                  {"library", nullptr},
      {"log", log_path},
  };
  Spawned w = spawn_worker(options.worker_path, "--cell", cell_spec(cell, options.pin_threads).dump(),
                           worker_environment(cell.allocator), log_path);
  const int64_t start_ns = monotonic_ns();
  const auto deadline = Clock::now() + std::chrono::duration<double>(options.timeout_s);
  Timeline timeline(options.max_timeline_points);
  json phases = json::array();
  json done, error_event;
  std::string pending;
  bool pipe_open = true, timed_out = false, interrupted = false;
  int wait_status = 0;
  bool exited = false;
  auto next_sample = Clock::now();
  auto next_tick = Clock::now() + std::chrono::seconds(1);

  while (!exited) {
    auto now = Clock::now();
    if (!timed_out && now >= deadline) {
      timed_out = true;
      ::kill(-w.pid, SIGKILL);
    }
    if (!interrupted && g_interrupted.load()) {
      interrupted = true;
      ::kill(-w.pid, SIGKILL);
    }
    if (options.on_tick && now >= next_tick) {
      options.on_tick();
      next_tick = now + std::chrono::seconds(1);
    }
    if (now >= next_sample) {
      uint64_t rss = 0;
      if (metrics::read_statm_rss(w.pid, rss)) timeline.add((monotonic_ns() - start_ns) / 1e6, rss);
      next_sample += std::chrono::milliseconds(options.sample_ms);
      if (next_sample < now) next_sample = now + std::chrono::milliseconds(options.sample_ms);
    }
    int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_sample - Clock::now()).count());
    wait_ms = std::clamp(wait_ms, 0, options.sample_ms);
    if (pipe_open) {
      pollfd pfd{w.report_fd, POLLIN, 0};
      int r = ::poll(&pfd, 1, wait_ms);
      if (r > 0) {
        char buf[65536];
        ssize_t n = ::read(w.report_fd, buf, sizeof buf);
        if (n > 0) {
          pending.append(buf, static_cast<std::size_t>(n));
          std::size_t nl;
          while ((nl = pending.find('\n')) != std::string::npos) {
            std::string line = pending.substr(0, nl);
            pending.erase(0, nl + 1);
            json ev = json::parse(line, nullptr, false);
            if (ev.is_discarded()) continue;
            const std::string kind = ev.value("event", "");
            if (kind == "start") {
              record["library"] = ev["library"];
              record["allocator_version"] = ev["version"];
              record["allocator_options"] = ev["options"];
            } else if (kind == "baseline") {
              record["idle_rss_bytes"] = ev["idle_rss_bytes"];
              record["idle_alloc_stats"] = ev["alloc_stats"];
            } else if (kind == "phase_end") {
              json p = ev["phase"];
              p["start_ms"] = (p.value("t_begin_ns", int64_t{0}) - start_ns) / 1e6;
              p["end_ms"] = (p.value("t_end_ns", int64_t{0}) - start_ns) / 1e6;
              p.erase("t_begin_ns");
              p.erase("t_end_ns");
              phases.push_back(p);
            } else if (kind == "done") {
              done = ev;
            } else if (kind == "error") {
              error_event = ev;
            }
          }
        } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          pipe_open = false;
        }
      }
    } else {
      ::usleep(static_cast<useconds_t>(std::max(wait_ms, 1)) * 1000);
    }
    pid_t r = ::waitpid(w.pid, &wait_status, WNOHANG);
    if (r == w.pid) exited = true;
  }
  ::close(w.report_fd);
  ::kill(-w.pid, SIGKILL);  // anything the worker left behind in its group

  record["phases"] = phases;
  record["timeline"] = timeline.to_json();
  record["sampled_peak_rss_bytes"] = timeline.max_rss();
  uint64_t peak_rss = 0;
  int64_t peak_live = 0;
  for (const auto& p : phases) {
    if (p["peak_rss_bytes"].is_number()) peak_rss = std::max<uint64_t>(peak_rss, p["peak_rss_bytes"]);
    peak_live = std::max<int64_t>(peak_live, p.value("peak_live_bytes", int64_t{0}));
  }
  json totals = json::object();
  for (const char* k : {"wall_s", "ops", "minor_faults", "major_faults", "voluntary_ctx_switches",
                        "involuntary_ctx_switches", "user_s", "sys_s"}) {
    double sum = 0;
    for (const auto& p : phases) sum += p.value(k, 0.0);
    totals[k] = sum;
  }
  if (!phases.empty()) {
    totals["ops_per_s"] = totals["wall_s"].get<double>() > 0 ? totals["ops"].get<double>() / totals["wall_s"].get<double>() : 0.0;
    record["totals"] = totals;
  }
  record["peak_rss_bytes"] = phases.empty() ? json(nullptr) : json(peak_rss);
  record["peak_live_bytes"] = phases.empty() ? json(nullptr) : json(peak_live);
  if (!phases.empty() && peak_live > 0 && record.contains("idle_rss_bytes")) {
    double above = static_cast<double>(peak_rss) - record["idle_rss_bytes"].get<double>();
    record["fragmentation_ratio"] = above / static_cast<double>(peak_live);
  }
  if (!done.is_null()) {
    record["alloc_stats"] = done["alloc_stats"];
    record["contention"] = done["contention"];
  } else {
    record["alloc_stats"] = json::object();
  }
  record["wall_s"] = (monotonic_ns() - start_ns) / 1e9;

  if (interrupted) return {record, true};
  if (timed_out) {
    record["status"] = "timeout";
    char limit[64];
    std::snprintf(limit, sizeof limit, "%g", options.timeout_s);
    record["error"] = std::string("no result within ") + limit + " s; killed";
  } else if (WIFSIGNALED(wait_status)) {
    record["status"] = "crashed";
    std::string tail = tail_of_file(log_path, 400);
    record["error"] = signal_reason(WTERMSIG(wait_status), false) + (tail.empty() ? "" : ": " + tail);
  } else if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0 && !done.is_null()) {
    record["status"] = "ok";
  } else {
    record["status"] = "failed";
    std::string reason = error_event.is_null() ? tail_of_file(log_path, 400) : error_event.value("error", "");
    record["error"] = "exit code " + std::to_string(WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1) +
                      (reason.empty() ? "" : ": " + reason);
  }
  return {record, false};
}

json probe_allocator(const matrix::ResolvedAllocator& allocator, const std::string& worker_path) {
  char tmpl[] = "/tmp/allocmark-probe-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::close(fd);
  json spec{{"backend", allocator.backend}, {"library", allocator.library}};
  Spawned w = spawn_worker(worker_path, "--probe", spec.dump(), worker_environment(allocator), tmpl);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(w.report_fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(w.report_fd);
  int status = 0;
  ::waitpid(w.pid, &status, 0);
  std::string log = tail_of_file(tmpl, 400);
  ::unlink(tmpl);
  json result = json::parse(out.substr(0, out.find('\n')), nullptr, false);
  if (result.is_discarded() || !result.is_object()) {
    std::string why = WIFSIGNALED(status) ? signal_reason(WTERMSIG(status), false)
                                          : "exit code " + std::to_string(WEXITSTATUS(status));
    return {{"error", "the worker did not start with this library preloaded (" + why + ")" +
                          (log.empty() ? "" : ": " + log)}};
  }
  return result;
}

}  // namespace allocmark::runner
