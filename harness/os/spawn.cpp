#include "harness/os/spawn.h"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace allocmark::os {

namespace {

// The steps of the child that can fail, each with its message.
enum Step { kFds, kRefuse, kThp, kAffinity, kMemory, kCwd, kExec, kSteps };

constexpr int kNodeBits = 1024;
constexpr int kLongBits = 8 * sizeof(unsigned long);

// What the child uses, made before fork: the child allocates nothing.
struct Prepared {
  std::vector<char*> argv, envp;
  char* const* env = nullptr;
  cpu_set_t cpus;
  unsigned long nodes[kNodeBits / kLongBits] = {};
  std::string what[kSteps];
  pid_t parent = -1;
  int error_fd = -1;  // write end of the pipe that tells the parent why the child failed (not fail_in_child)
};

struct ChildFailure {
  int error_number, step;
};

void prepare(const SpawnOptions& o, Prepared& p) {
  for (const auto& a : o.argv) p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  if (o.env) {
    for (const auto& e : *o.env) p.envp.push_back(const_cast<char*>(e.c_str()));
    p.envp.push_back(nullptr);
    p.env = p.envp.data();
  } else {
    p.env = environ;
  }
  CPU_ZERO(&p.cpus);
  for (int c : o.cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &p.cpus);
  for (int n : o.membind)
    if (n >= 0 && n < kNodeBits) p.nodes[n / kLongBits] |= 1UL << (n % kLongBits);
  p.what[kFds] = "cannot pass a descriptor";
  p.what[kRefuse] = o.refuse;
  p.what[kThp] = "cannot disable transparent huge pages";
  p.what[kAffinity] = "cannot set the CPU affinity";
  p.what[kMemory] = "cannot bind the memory policy";
  p.what[kCwd] = "cannot enter " + o.cwd;
  p.what[kExec] = o.exec_failure.empty() ? "cannot execute " + (o.argv.empty() ? std::string() : o.argv[0]) : o.exec_failure;
  p.parent = ::getpid();
}

void write_text(const char* text) { (void)!::write(2, text, std::strlen(text)); }

[[noreturn]] void child_fails(const SpawnOptions& o, const Prepared& p, Step step, int error_number) {
  if (o.fail_in_child) {
    write_text("allocmark: ");
    write_text(p.what[step].c_str());
    if (step != kRefuse) {
      write_text(": ");
      write_text(std::strerror(error_number));
    }
    write_text("\n");
  } else {
    const ChildFailure f{error_number, step};
    (void)!::write(p.error_fd, &f, sizeof f);
  }
  ::_exit(127);
}

// Each copy's source is first moved above every descriptor named, so that no copy overwrites a
// source that a later one reads (nor the error pipe).
bool copy_fds(const std::vector<FdCopy>& fds, Prepared& p) {
  int high = std::max(p.error_fd, 2) + 1;
  for (const FdCopy& c : fds) high = std::max({high, c.from + 1, c.to + 1});
  if (p.error_fd >= 0 && (p.error_fd = ::fcntl(p.error_fd, F_DUPFD_CLOEXEC, high)) < 0) return false;
  int moved[kMaxFdCopies];
  for (std::size_t i = 0; i < fds.size(); ++i)
    if ((moved[i] = ::fcntl(fds[i].from, F_DUPFD_CLOEXEC, high)) < 0) return false;
  for (std::size_t i = 0; i < fds.size(); ++i)
    if (::dup2(moved[i], fds[i].to) < 0) return false;  // dup2 clears close-on-exec on the copy
  return true;
}

// What exec does for the close-on-exec descriptors, done for a `run` child to all but 0-2 and the
// copies' `to` (the error pipe's end too: the parent's read of it then ends, the child started).
void close_all_but_copies(const std::vector<FdCopy>& fds) {
  unsigned from = 3;
  for (;;) {
    unsigned next = ~0u;  // the lowest kept descriptor at or above `from`
    for (const FdCopy& c : fds)
      if (c.to >= 0 && static_cast<unsigned>(c.to) >= from && static_cast<unsigned>(c.to) < next) next = static_cast<unsigned>(c.to);
    if (next > from) ::syscall(SYS_close_range, from, next == ~0u ? ~0u : next - 1, 0u);
    if (next == ~0u) return;
    from = next + 1;
  }
}

[[noreturn]] void run_child(const SpawnOptions& o, Prepared& p) {
  if (o.new_session) ::setsid();
  if (o.new_group) ::setpgid(0, 0);
  if (o.pdeathsig != 0) {
    // The signal follows the thread that forked; the second check closes the window in which
    // the parent died before prctl took effect. It survives execve (nothing here is set-uid).
    ::prctl(PR_SET_PDEATHSIG, o.pdeathsig);
    if (::getppid() != p.parent) ::_exit(127);
  }
  ::signal(SIGPIPE, SIG_DFL);
  for (int sig : o.ignore_signals) ::signal(sig, SIG_IGN);
  if (!copy_fds(o.fds, p)) child_fails(o, p, kFds, errno);
  if (!o.refuse.empty()) child_fails(o, p, kRefuse, 0);
  if (o.thp_disable && ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) child_fails(o, p, kThp, errno);
  if (!o.cpus.empty() && ::sched_setaffinity(0, sizeof p.cpus, &p.cpus) != 0) child_fails(o, p, kAffinity, errno);
  if (!o.membind.empty() && ::syscall(SYS_set_mempolicy, MPOL_BIND, p.nodes, kNodeBits) != 0) child_fails(o, p, kMemory, errno);
  if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) child_fails(o, p, kCwd, errno);
  if (o.run) {
    close_all_but_copies(o.fds);
    ::_exit(o.run(o.run_arg));
  }
  if (o.search_path)
    ::execvpe(p.argv[0], p.argv.data(), p.env);
  else
    ::execve(p.argv[0], p.argv.data(), p.env);
  child_fails(o, p, kExec, errno);
}

SpawnResult failed(int error_number, const std::string& what) {
  return {-1, error_number, what + ": " + std::strerror(error_number)};
}

// The child's report of a failed step, read until exec closes the pipe (nothing: it started).
SpawnResult outcome(pid_t pid, int error_read_fd, const Prepared& p) {
  ChildFailure f{};
  std::size_t got = 0;
  for (;;) {
    const ssize_t n = ::read(error_read_fd, reinterpret_cast<char*>(&f) + got, sizeof f - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
    if (got == sizeof f) break;
  }
  ::close(error_read_fd);
  if (got != sizeof f) return {pid, 0, ""};
  int status = 0;
  wait_for(pid, status);
  if (f.step == kRefuse) return {-1, 0, p.what[kRefuse]};
  return failed(f.error_number, p.what[f.step >= 0 && f.step < kSteps ? f.step : kExec]);
}

}  // namespace

SpawnResult spawn(const SpawnOptions& options) {
  if (options.argv.empty() && !options.run) return {-1, EINVAL, "spawn: no program"};
  if (options.new_session && options.new_group) return {-1, EINVAL, "spawn: new_session and new_group both asked"};
  if (options.fds.size() > kMaxFdCopies) return {-1, EINVAL, "spawn: too many descriptors to pass"};
  Prepared p;
  prepare(options, p);
  int error_pipe[2] = {-1, -1};
  if (!options.fail_in_child) {
    if (::pipe2(error_pipe, O_CLOEXEC) != 0) return failed(errno, "pipe");
    p.error_fd = error_pipe[1];
  }
  const pid_t pid = ::fork();
  if (pid == 0) run_child(options, p);
  const int fork_errno = errno;
  if (error_pipe[1] >= 0) ::close(error_pipe[1]);
  if (pid < 0) {
    if (error_pipe[0] >= 0) ::close(error_pipe[0]);
    return failed(fork_errno, "fork");
  }
  if (options.new_group) ::setpgid(pid, pid);
  if (options.fail_in_child) return {pid, 0, ""};
  return outcome(pid, error_pipe[0], p);
}

bool wait_for(pid_t pid, int& status) {
  for (;;) {
    if (::waitpid(pid, &status, 0) == pid) return true;
    if (errno != EINTR) return false;
  }
}

}  // namespace allocmark::os
