// liballocmark-preload-report.so: preloaded after the allocator into a user's program (a program
// cell), it gives that program the proofs the worker gives a built-in workload. At load: which
// object serves malloc (the worker's own check), the allocator's version and options, on the
// report pipe as a `start` event (or an `error`, and the program is stopped before its main runs).
// At exit: the allocator's native statistics, the process's peak RSS since the driver's last
// reset (VmHWM), which closes the last phase exactly, and its resident bytes per NUMA node
// (/proc/self/numa_maps), which the driver cannot read once the process has gone.
//
// The exit report is also the proof that the process's final image was served by the allocator:
// a process that execs into an image without the companion (`env -u LD_PRELOAD prog`) sends none,
// and the driver fails the cell. So it is sent from `exit` (atexit) and from `_exit`/`_Exit`,
// which this library interposes (dash leaves that way); `_exit` may run in a signal handler, so
// that report allocates nothing and carries only the peak and end RSS.
//
// Only the process the driver started reports (its parent is the driver, ALLOCMARK_DRIVER_PID),
// in every image it execs into: the variables stay in the environment for those, and the
// program's own children, whose parent is not the driver, stay silent. Every event carries the
// pid, so the driver also ignores an orphan of the program that was reparented to it.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "allocators/backends.h"
#include "allocators/native_api.h"
#include "harness/metrics/phase_record.h"
#include "harness/metrics/proc.h"
#include "harness/record/event_keys.h"
#include "harness/record/phase_keys.h"
#include "harness/worker/preload_check.h"
#include "harness/worker/report_line.h"
#include "harness/os/clock.h"
#include "harness/os/files.h"

namespace {

using nlohmann::json;
namespace phase_key = allocmark::record::phase_key;
namespace event = allocmark::record::event;
namespace event_key = allocmark::record::event_key;

int g_fd = -1;
pid_t g_pid = -1;
bool g_exit_reported = false;
const allocmark::allocators::NativeApi* g_api = nullptr;

// A path or an allocator's option text need not be UTF-8; JSON must be: such bytes become U+FFFD.
void report(json event) {
  event[event_key::pid] = g_pid;
  allocmark::worker::write_report_line(g_fd, json::parse(event.dump(-1, ' ', false, json::error_handler_t::replace)));
}

int64_t now_ns() { return allocmark::os::monotonic_ns(); }

[[noreturn]] void exit_group(int status) {
  for (;;) ::syscall(SYS_exit_group, status);
}

void on_exit();

__attribute__((constructor)) void on_load() {
  const char* fd = std::getenv("ALLOCMARK_REPORT_FD");
  const char* driver = std::getenv("ALLOCMARK_DRIVER_PID");
  if (!fd || !driver || ::getppid() != std::atoi(driver)) return;
  g_fd = std::atoi(fd);
  g_pid = ::getpid();
  const std::string expected = std::getenv("ALLOCMARK_EXPECT_LIBRARY") ? std::getenv("ALLOCMARK_EXPECT_LIBRARY") : "";
  const std::string backend = std::getenv("ALLOCMARK_BACKEND") ? std::getenv("ALLOCMARK_BACKEND") : "";
  try {
    g_api = &allocmark::allocators::native_api(backend);
  } catch (const std::out_of_range&) {
    g_api = nullptr;  // generic libraries expose nothing we know
  }
  // Registered now, after the backend tables were constructed (see harness/CMakeLists.txt), so it
  // runs before they are destroyed.
  std::atexit(on_exit);
  std::string served = allocmark::worker::library_serving("malloc");
  report({{event_key::event, event::start}, {event_key::library, served}, {event_key::t_ns, now_ns()},
          {event_key::version, g_api ? g_api->version() : ""},
          {event_key::options, g_api ? g_api->read_options() : json::object()}});
  if (auto problem = allocmark::worker::check_served_by(served, expected); !problem.empty()) {
    report({{event_key::event, event::error}, {event_key::error, problem}});
    g_exit_reported = true;
    exit_group(3);
  }
}

// Only the process that loaded this image reports: a forked child without exec inherits our state.
bool reports_exit() { return g_fd >= 0 && !g_exit_reported && ::getpid() == g_pid; }

void on_exit() {
  if (!reports_exit()) return;
  g_exit_reported = true;
  allocmark::metrics::MemAndNodes now{};
  bool read_ok = allocmark::metrics::read_mem_and_nodes(0, now);
  json done{{event_key::event, event::program_exit}, {event_key::t_ns, now_ns()},
            {phase_key::peak_rss_bytes, read_ok ? json(now.mem.hwm_bytes) : json(nullptr)},
            {phase_key::end_rss_bytes, read_ok ? json(now.mem.rss_bytes) : json(nullptr)}};
  if (now.nodes_ok) done[event_key::numa_resident_bytes] = allocmark::metrics::residency_list(now.nodes);
  // The system's huge pages per node while this process's are still mapped (nodes not present: null).
  {
    int ids[allocmark::metrics::kMaxNumaNodes];
    for (int n = 0; n < allocmark::metrics::kMaxNumaNodes; ++n) ids[n] = n;
    allocmark::metrics::SystemNodeHuge huge;
    allocmark::metrics::read_system_node_huge(ids, allocmark::metrics::kMaxNumaNodes, huge);
    done[event_key::system_anon_huge_bytes] = allocmark::metrics::system_node_huge_list(huge);
  }
  if (g_api) {
    done[event_key::alloc_stats] = g_api->read_stats();
    done[event_key::contention] = g_api->read_contention();
  }
  report(done);
}

// What follows runs from _exit, perhaps inside a signal handler: system calls and stack buffers only.

// The value of a "Name:   N kB" line of /proc/self/status in bytes, or -1.
int64_t status_kib_field(const char* status, const char* name) {
  const char* at = std::strstr(status, name);
  if (!at) return -1;
  at += std::strlen(name);
  while (*at == ' ' || *at == '\t') ++at;
  if (*at < '0' || *at > '9') return -1;
  int64_t kib = 0;
  while (*at >= '0' && *at <= '9') kib = kib * 10 + (*at++ - '0');
  return kib * 1024;
}

// `value` in decimal at `out`, "null" when negative; returns the end.
char* put_number(char* out, int64_t value) {
  if (value < 0) return std::strcpy(out, "null") + 4;
  char digits[24];
  int n = 0;
  do digits[n++] = static_cast<char>('0' + value % 10);
  while ((value /= 10) > 0);
  while (n) *out++ = digits[--n];
  return out;
}

char* put_text(char* out, const char* text) { return std::strcpy(out, text) + std::strlen(text); }

char* put_quoted(char* out, const char* text) { return put_text(put_text(put_text(out, "\""), text), "\""); }

// ,"KEY": (`before` '{' for the first key)
char* put_key(char* out, const char* key, char before = ',') {
  *out++ = before;
  return put_text(put_quoted(out, key), ":");
}

void report_exit_without_allocating() {
  if (!reports_exit()) return;
  g_exit_reported = true;
  const int saved_errno = errno;
  char status[8192];
  if (allocmark::os::read_file("/proc/self/status", status, sizeof status) < 0) status[0] = '\0';
  char line[256];
  char* p = put_quoted(put_key(line, event_key::event, '{'), event::program_exit);
  p = put_number(put_key(p, event_key::pid), g_pid);
  p = put_number(put_key(p, event_key::t_ns), now_ns());
  p = put_key(p, phase_key::peak_rss_bytes);
  p = put_number(p, status_kib_field(status, "\nVmHWM:"));
  p = put_key(p, phase_key::end_rss_bytes);
  p = put_number(p, status_kib_field(status, "\nVmRSS:"));
  p = put_text(p, "}\n");
  for (const char* q = line; q < p;) {
    ssize_t n = ::write(g_fd, q, static_cast<std::size_t>(p - q));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    q += n;
  }
  errno = saved_errno;
}

}  // namespace

extern "C" {
// The C library's exit() ends through its internal _exit, not these: that path reports from atexit.
[[noreturn]] void _exit(int status) {
  report_exit_without_allocating();
  exit_group(status);
}
[[noreturn]] void _Exit(int status) noexcept {
  report_exit_without_allocating();
  exit_group(status);
}
}
