#include "harness/runner/status.h"

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>

#include "harness/record/event_keys.h"

namespace allocmark::runner {

std::string signal_reason(int sig) {
  const char* name = ::strsignal(sig);
  std::string reason = "killed by signal " + std::to_string(sig) + " (" + (name ? name : "signal") + ")";
  if (sig == SIGKILL) reason += "; not sent by allocmark: likely the kernel's OOM killer (see dmesg)";
  return reason;
}

CellStatus classify(const WorkerEnd& end) {
  auto with_tail = [&](std::string reason) {
    return end.log_tail.empty() ? reason : reason + ": " + end.log_tail;
  };
  if (end.timed_out) {
    char limit[64];
    std::snprintf(limit, sizeof limit, "%g", end.timeout_s);
    return {"timeout", std::string("no result within ") + limit + " s; killed"};
  }
  if (WIFSIGNALED(end.wait_status)) return {"crashed", with_tail(signal_reason(WTERMSIG(end.wait_status)))};
  const int code = WIFEXITED(end.wait_status) ? WEXITSTATUS(end.wait_status) : -1;
  if (code == 0 && end.saw_done) return {"ok", nullptr};
  std::string reason = "exit code " + std::to_string(code);
  if (!end.error_event.is_null()) return {"failed", reason + ": " + end.error_event.value(record::event_key::error, "")};
  if (code == 0) {
    reason += ": the worker ended without reporting `done`";
    if (end.partial_bytes) reason += " (its last report line was cut short)";
    if (end.malformed_lines) reason += " (" + std::to_string(end.malformed_lines) + " malformed report lines)";
  }
  return {"failed", with_tail(reason)};
}

}  // namespace allocmark::runner
