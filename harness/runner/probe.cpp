#include "harness/runner/probe.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "allocators/backends.h"
#include "harness/os/clock.h"
#include "harness/record/cell.h"
#include "harness/record/event_keys.h"
#include "harness/runner/environment.h"
#include "harness/runner/process.h"
#include "harness/runner/status.h"

namespace allocmark::runner {

using nlohmann::json;
namespace event_key = record::event_key;  // probe_allocator's answer is the worker's probe event, or its error

json probe_allocator(const matrix::ResolvedAllocator& allocator, const std::string& worker_path, double timeout_s) {
  char log[] = "/tmp/allocmark-probe-XXXXXX";
  int fd = ::mkstemp(log);
  if (fd >= 0) ::close(fd);
  const json spec = record::worker_cell(record::Cell{allocator});  // the worker reads the allocator only
  Spawned w = spawn_worker(worker_path, {"--probe", spec.dump()}, worker_environment(allocator), log);
  const auto deadline = os::Clock::now() + std::chrono::duration<double>(timeout_s);
  std::string out;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - os::Clock::now()).count());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{w.report_fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // re-check the deadline
    ssize_t n = ::read(w.report_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(w.report_fd);
  if (timed_out) kill_group(w.pid);
  int status = 0;
  ::waitpid(w.pid, &status, 0);
  kill_group(w.pid);
  std::string log_tail = tail_of_file(log, 400);
  // What the allocator said as it loaded: a configuration it cannot use and runs without.
  const allocators::Backend* backend = allocators::find_backend(allocator.backend);
  const std::string invalid = backend ? allocators::invalid_config_line(*backend, tail_of_file(log, 64 << 10)) : "";
  ::unlink(log);
  const std::string library = allocator.library.empty() ? "the C library" : allocator.library;
  if (timed_out) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", timeout_s);
    return {{event_key::error, library + " did not finish loading within " + limit + " s (the probe worker was killed)" +
                          (log_tail.empty() ? "" : ": " + log_tail)}};
  }
  if (!invalid.empty()) {
    std::string env;
    for (const auto& [k, v] : allocator.env) env += (env.empty() ? "" : " ") + k + "=" + v;
    return {{event_key::error, "the allocator says its configuration is invalid and would run without it: \"" + invalid + "\"" +
                          (env.empty() ? "" : " (the variant sets " + env + ")")}};
  }
  json result = json::parse(out.substr(0, out.find('\n')), nullptr, false);
  if (result.is_discarded() || !result.is_object()) {
    std::string why = WIFSIGNALED(status) ? signal_reason(WTERMSIG(status))
                                          : "exit code " + std::to_string(WEXITSTATUS(status));
    return {{event_key::error, "the worker did not start with this library preloaded (" + why + ")" +
                          (log_tail.empty() ? "" : ": " + log_tail)}};
  }
  return result;
}

json describe_backends(const std::string& worker_path) {
  json out = json::array();
  for (const auto* b : allocators::backends()) {
    json entry{{"name", b->name}, {"summary", b->summary}, {"kind", "backend"}};
    if (!b->native) {
      entry["available"] = true;
      entry["note"] = "name a library: [allocators.NAME] backend = \"generic\", library = \"/path/lib.so\"";
      out.push_back(entry);
      continue;
    }
    try {
      auto resolved = matrix::resolve_allocator(b->name, {}, "list");
      json probe = probe_allocator(resolved, worker_path);
      entry["library"] = resolved.library.empty() ? probe.value(event_key::library, "") : resolved.library;
      entry["available"] = !probe.contains(event_key::error);
      if (probe.contains(event_key::error)) entry["why_not"] = probe[event_key::error];
      entry["version"] = probe.value(event_key::version, "");
    } catch (const matrix::ConfigError& e) {
      entry["available"] = false;
      entry["why_not"] = e.what();
    }
    out.push_back(entry);
  }
  return out;
}

}  // namespace allocmark::runner
