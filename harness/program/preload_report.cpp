// liballocmark-preload-report.so: preloaded after the allocator into a user's program (a program
// cell), it gives that program the proofs the worker gives a built-in workload. At load: which
// object serves malloc (the worker's own check), the allocator's version and options, on the
// report pipe as a `start` event (or an `error`, and the program is stopped before its main runs).
// At exit: the allocator's native statistics, the process's peak RSS since the driver's last
// reset (VmHWM), which closes the last phase exactly, and its resident bytes per NUMA node
// (/proc/self/numa_maps), which the driver cannot read once the process has gone.
//
// Only the process the driver started reports: the variables are removed from the environment at
// load, so the program's own children do not write into the cell's pipe.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "allocators/backends.h"
#include "allocators/native_api.h"
#include "harness/metrics/proc.h"
#include "harness/worker/preload_check.h"
#include "harness/worker/report_line.h"

namespace {

using nlohmann::json;

int g_fd = -1;
pid_t g_pid = -1;
const allocmark::allocators::NativeApi* g_api = nullptr;

void report(const json& event) { allocmark::worker::write_report_line(g_fd, event); }

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void on_exit();

__attribute__((constructor)) void on_load() {
  const char* fd = std::getenv("ALLOCMARK_REPORT_FD");
  if (!fd) return;
  g_fd = std::atoi(fd);
  g_pid = ::getpid();
  const std::string expected = std::getenv("ALLOCMARK_EXPECT_LIBRARY") ? std::getenv("ALLOCMARK_EXPECT_LIBRARY") : "";
  const std::string backend = std::getenv("ALLOCMARK_BACKEND") ? std::getenv("ALLOCMARK_BACKEND") : "";
  ::unsetenv("ALLOCMARK_REPORT_FD");
  ::unsetenv("ALLOCMARK_EXPECT_LIBRARY");
  ::unsetenv("ALLOCMARK_BACKEND");
  try {
    g_api = &allocmark::allocators::native_api(backend);
  } catch (const std::out_of_range&) {
    g_api = nullptr;  // generic libraries expose nothing we know
  }
  // Registered now, after the backend tables were constructed (see harness/CMakeLists.txt), so it
  // runs before they are destroyed.
  std::atexit(on_exit);
  std::string served = allocmark::worker::library_serving("malloc");
  report({{"event", "start"}, {"library", served}, {"pid", g_pid}, {"t_ns", now_ns()},
          {"version", g_api ? g_api->version() : ""}, {"options", g_api ? g_api->read_options() : json::object()}});
  if (auto problem = allocmark::worker::check_served_by(served, expected); !problem.empty()) {
    report({{"event", "error"}, {"error", problem}});
    ::_exit(3);
  }
}

void on_exit() {
  if (g_fd < 0 || ::getpid() != g_pid) return;  // a forked child without exec inherits our state
  allocmark::metrics::MemStatus mem{};
  bool read_ok = allocmark::metrics::read_mem_status(0, mem);
  json done{{"event", "program_exit"}, {"t_ns", now_ns()},
            {"peak_rss_bytes", read_ok ? json(mem.hwm_bytes) : json(nullptr)},
            {"end_rss_bytes", read_ok ? json(mem.rss_bytes) : json(nullptr)}};
  allocmark::metrics::NodeResidency residency;
  if (allocmark::metrics::read_numa_maps(0, residency)) done["numa_resident_bytes"] = allocmark::metrics::residency_list(residency);
  if (g_api) {
    done["alloc_stats"] = g_api->read_stats();
    done["contention"] = g_api->read_contention();
  }
  report(done);
}

}  // namespace
