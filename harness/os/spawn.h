// Starting a process: the harness's one launcher (cells, programs, helper tools, the plotting
// script, the --system-thp restorer). Everything is built before fork; the child only sets itself
// up from what was prepared (it allocates nothing: the driver is threaded) and execs, or runs one
// function of the driver's (`run`) and exits.
//
// In the child, in this order: its own session (new_session) or process group (new_group), the
// parent-death signal (and _exit(127) if the parent is already gone), SIGPIPE back to its default
// (the driver ignores it; an ignored signal would stay ignored across exec), `ignore_signals`, the
// descriptors of `fds`, `refuse`, PR_SET_THP_DISABLE, the CPU affinity, the memory policy, the
// working folder, then exec (or, with `run`, every descriptor but 0-2 and the copies closed, and run).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace allocmark::os {

// The child's descriptor `to` is a copy of the caller's `from`, close-on-exec cleared. Copies do
// not disturb one another (a `from` may be another copy's `to`).
struct FdCopy {
  int from, to;
};
inline constexpr std::size_t kMaxFdCopies = 8;

struct SpawnOptions {
  std::vector<std::string> argv;                // argv[0] is the program: a path, or a name on PATH (search_path)
  std::optional<std::vector<std::string>> env;  // the child's whole environment ("KEY=VALUE"); none: the caller's
  bool search_path = false;                     // argv[0] is looked up on PATH (execvpe's rules)
  // At most kMaxFdCopies. Every other descriptor is closed at exec only if it is close-on-exec:
  // the harness opens every descriptor with O_CLOEXEC.
  std::vector<FdCopy> fds;
  std::string cwd;         // "" = the caller's
  int pdeathsig = 0;       // sent to the child when the thread that spawned it ends (PR_SET_PDEATHSIG); 0: none
  bool new_group = false;  // the child leads a process group of its own (set by child and parent, so no race)
  bool thp_disable = false;  // PR_SET_THP_DISABLE before exec (kept across exec and by its children)
  std::vector<int> cpus;     // the child's CPU affinity; empty: inherited
  std::vector<int> membind;  // nodes its memory policy binds to (MPOL_BIND, node numbers below 1024); empty: inherited
  std::string refuse;        // not "": the child fails with this message instead of exec
  // Where a failure in the child (refuse, a setting the kernel refused, exec) goes. false: spawn
  // returns it (the child is reaped). true: the child writes "allocmark: WHAT: REASON" to its
  // standard error (after `fds`: a cell's log) and exits 127, and spawn returns its pid.
  bool fail_in_child = false;
  std::string exec_failure;  // WHAT when exec fails; "" = "cannot execute ARGV0"
  // True: the child leads a session of its own (setsid; no controlling terminal, its own group),
  // so a terminal's or a group's signal does not reach it. Not together with new_group.
  bool new_session = false;
  std::vector<int> ignore_signals;  // set to SIG_IGN in the child (they stay ignored across exec)
  // Instead of exec (argv may then be empty): the child calls run(run_arg) and _exits with what it
  // returns, for a helper that is the driver's own code rather than a program (the --system-thp
  // restorer). Like the rest of the child it may only make system calls (no allocation, no lock),
  // and it keeps descriptors 0-2 and the copies' `to` only: no exec closes the others for it.
  int (*run)(const void* run_arg) = nullptr;
  const void* run_arg = nullptr;
};

struct SpawnResult {
  pid_t pid = -1;        // the child, or -1
  int error_number = 0;  // errno of the step that failed
  std::string error;     // what failed and why ("fork: ...", "cannot execute X: ..."); "" when started
};

SpawnResult spawn(const SpawnOptions& options);

// waitpid(pid, &status, 0) retried on EINTR; false (errno set) when it fails otherwise.
bool wait_for(pid_t pid, int& status);

}  // namespace allocmark::os
