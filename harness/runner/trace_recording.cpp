#include "harness/runner/trace_recording.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "harness/matrix/program.h"
#include "harness/os/clock.h"
#include "harness/results/folder.h"
#include "harness/results/machine.h"
#include "harness/runner/environment.h"
#include "harness/runner/process.h"
#include "harness/trace/header_keys.h"
#include "harness/trace/summary.h"

namespace allocmark::runner {
namespace {

using nlohmann::json;

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Reads what is in the pipe now; false at its end. Once the stream is found corrupt (`lost` not
// ""), what comes is read and dropped: the program runs on, never blocked on a full pipe.
bool drain(int fd, trace::StreamParser& parser, std::string& lost) {
  uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      if (lost.empty()) {
        try {
          parser.feed(buf, static_cast<std::size_t>(n));
        } catch (const trace::TraceError& e) {
          const int k = record_fd();
          lost = fmt::format(
              "the recording holds bytes the recorder did not write ({}): the program, or a process it started, wrote to "
              "descriptor {} (ALLOCMARK_TRACE_FD), which carries the recording. A program must leave that descriptor "
              "alone (not write to, dup2 over or close descriptors it did not open); no trace written",
              e.what(), k);
          std::cerr << "allocmark: error: the recording is lost (" << e.what() << "); the program runs on to its end\n";
        }
      }
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

}  // namespace

int record_fd() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur <= 1000)
    return std::max(5, static_cast<int>(limit.rlim_cur) - 1);
  return 1000;
}

namespace {

// The recorder first: it sees every call and passes it on to the allocator (or glibc) after it.
std::vector<std::string> recording_environment(const TraceRecording& r) {
  std::vector<std::string> env = worker_environment(r.allocator);
  std::erase_if(env, [](const std::string& e) { return e.rfind("LD_PRELOAD=", 0) == 0; });
  env.push_back(std::string("LD_PRELOAD=") + ALLOCMARK_TRACE_RECORD_LIBRARY +
                (r.allocator.library.empty() ? "" : " " + r.allocator.library));
  env.push_back("ALLOCMARK_TRACE_FD=" + std::to_string(record_fd()));
  env.push_back("ALLOCMARK_TRACE_DRIVER_PID=" + std::to_string(::getpid()));
  if (r.phases) env.push_back(std::string(matrix::kPhaseFdVariable) + "=4");
  return env;
}

SpawnOptions recording_spawn_options(const TraceRecording& r) {
  SpawnOptions options;
  options.inherit_stdio = true;
  options.phase_pipe = r.phases;  // keeps fd 4 for the recorder, which puts its own socket there
  options.report_fd_number = record_fd();
  options.search_path = r.command[0].find('/') == std::string::npos;
  apply_thp_mode(r.allocator, options);
  return options;
}

// Feeds the pipe to `parser` until the program is reaped; returns its wait status.
int follow_recording(const Spawned& child, trace::StreamParser& parser, std::string& lost) {
  int status = 0;
  bool exited = false, open = true;
  try {
    // The program's children may hold the pipe open after it exits: once it has been reaped,
    // what it wrote is all in the pipe, so the stream ends there.
    while (!exited) {
      pollfd p{child.report_fd, POLLIN, 0};
      if (open) ::poll(&p, 1, 100);
      else ::usleep(20000);
      if (open) open = drain(child.report_fd, parser, lost);
      pid_t w = ::waitpid(child.pid, &status, WNOHANG);
      if (w == child.pid) exited = true;
    }
    if (open) drain(child.report_fd, parser, lost);
  } catch (...) {
    ::close(child.report_fd);
    ::kill(child.pid, SIGKILL);
    ::waitpid(child.pid, &status, 0);
    throw;
  }
  ::close(child.report_fd);
  return status;
}

// False, with out.lost saying why, when the trace is not the whole program's.
bool recording_complete(const trace::Trace& t, const TraceRecording& r, RecordedTrace& out) {
  // Every image the recorder loads into says so first: without one, nothing was recorded, and an
  // empty trace would replay as a program that allocates nothing.
  if (t.images == 0)
    throw std::runtime_error("trace record: nothing recorded: the recorder did not load into " + r.command[0] +
                             " (a statically linked or set-uid program, or one that cleared LD_PRELOAD); no trace written");
  if (!t.unrecorded_exec.empty()) {
    out.lost = fmt::format(
        "the program's last image, {} (exec'd by image {}), was not recorded: the recorder could not load into it (a "
        "statically linked or set-uid program, or an environment without LD_PRELOAD); what came before the exec is void. "
        "Record {} itself, or a dynamically linked build of it; no trace written",
        t.unrecorded_exec, t.images, t.unrecorded_exec);
    return false;
  }
  return true;
}

void fill_header(trace::Trace& t, const TraceRecording& r, const RecordedTrace& out, const std::string& started_at,
                 double wall_s) {
  json summary = trace::summarize(t);
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  namespace hk = trace::header_key;
  json& h = t.header;
  h[hk::program] = r.command[0];
  h[hk::arguments] = std::vector<std::string>(r.command.begin() + 1, r.command.end());
  h[hk::cwd] = cwd;
  h[hk::allocator] = {{"name", r.allocator.name}, {"library", r.allocator.library}};
  h[hk::machine] = results::machine_info();
  h[hk::recorded_at] = started_at;
  h[hk::wall_s] = wall_s;
  h[hk::exit_code] = out.exit_code >= 0 ? json(out.exit_code) : json();
  h[hk::exit_signal] = out.exit_signal ? json(out.exit_signal) : json();
  h[hk::ended] = t.ended;
  h[hk::images] = t.images;
  h[hk::threads] = t.threads.size();
  h[hk::events] = t.events;
  h[hk::objects] = summary["objects"];
  h[hk::unknown_frees] = t.unknown_frees;
  h[hk::lost_events] = t.lost_events;
  h[hk::phases] = t.phase_names;
  h[hk::calls] = summary["calls"];
}

}  // namespace

RecordedTrace record_trace(const TraceRecording& r) {
  if (r.command.empty()) throw std::runtime_error("trace record: no command to record (trace record --out FILE -- COMMAND ARGS)");
  const std::vector<std::string> env = recording_environment(r);
  const SpawnOptions options = recording_spawn_options(r);
  const double started_s = os::monotonic_s();
  const std::string started_at = utc_now();
  Spawned child = spawn_process(r.command, env, "", options);
  if (child.phase_fd >= 0) ::close(child.phase_fd);
  ::fcntl(child.report_fd, F_SETFL, O_NONBLOCK);

  trace::StreamParser parser;
  RecordedTrace out;
  const int status = follow_recording(child, parser, out.lost);
  const double wall_s = os::monotonic_s() - started_s;
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  out.exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (!out.lost.empty()) return out;
  try {
    out.trace = parser.finish(out.exit_signal != 0);
  } catch (const trace::TraceError& e) {
    // Cut inside a chunk (a signal, a closed descriptor), or ids that do not check out.
    out.lost = fmt::format("the recording does not read back ({}); no trace written", e.what());
    return out;
  }
  if (!recording_complete(out.trace, r, out)) return out;
  fill_header(out.trace, r, out, started_at, wall_s);
  try {
    results::write_file_atomically(r.out, trace::file_bytes(out.trace));
  } catch (const results::ResultsError& e) {
    throw TraceWriteError(std::string(e.what()) + " (the program ran; its recording is lost)");
  }
  return out;
}

}  // namespace allocmark::runner
