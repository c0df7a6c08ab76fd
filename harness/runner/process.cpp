#include "harness/runner/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <numaif.h>
#include <sched.h>
#include <sys/syscall.h>
#include <spawn.h>
#include <sys/wait.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <atomic>
#include <set>
#include <sstream>
#include <vector>
#include <stdexcept>

#include "harness/results/safe_text.h"

extern char** environ;

namespace allocmark::runner {

Spawned spawn_worker(const std::string& worker, const std::vector<std::string>& args,
                     const std::vector<std::string>& env, const std::string& log_path, const SpawnOptions& options) {
  std::vector<std::string> argv{worker};
  argv.insert(argv.end(), args.begin(), args.end());
  return spawn_process(argv, env, log_path, options);
}

namespace {
// Closes what was opened so far when a later step fails.
struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  int keep(int fd) {
    fds.push_back(fd);
    return fd;
  }
};

int open_or_throw(Fds& owned, const std::string& path, int flags, const char* what) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(std::string("cannot ") + what + " " + path + ": " + std::strerror(errno));
  return owned.keep(fd);
}
}  // namespace

Spawned spawn_process(const std::vector<std::string>& args, const std::vector<std::string>& env,
                      const std::string& log_path, const SpawnOptions& options) {
  Fds owned;
  int report[2], phase[2] = {-1, -1};
  if (::pipe2(report, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  owned.keep(report[0]);
  owned.keep(report[1]);
  if (options.phase_pipe) {
    // A socket, not a pipe: the driver answers each mark once the phase edge is measured, so a
    // program that waits for the answer has exact edges.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, phase) != 0)
      throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    owned.keep(phase[0]);
    owned.keep(phase[1]);
  }
  // O_NOFOLLOW: a log truncated through a link planted in a results folder would destroy its target.
  int log_fd = 2, out_fd = 1, in_fd = 0;
  if (!options.inherit_stdio) {
    log_fd = open_or_throw(owned, log_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, "write");
    out_fd = options.stdout_path.empty() ? log_fd
                                         : open_or_throw(owned, options.stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, "write");
    in_fd = open_or_throw(owned, options.stdin_path.empty() ? "/dev/null" : options.stdin_path, O_RDONLY, "read");
  }
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // Affinity and memory policy are prepared here: the child of a threaded driver must not allocate.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : options.cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  constexpr int kBits = 8 * sizeof(unsigned long);
  std::vector<unsigned long> node_mask(1024 / kBits, 0);
  for (int n : options.membind)
    if (n >= 0 && n < 1024) node_mask[n / kBits] |= 1UL << (n % kBits);
  const pid_t driver = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (!options.inherit_stdio) ::setpgid(0, 0);
    // Die with the driver. The signal follows the thread that forked, which is always the
    // driver's main thread; the second check closes the window in which the driver died before
    // prctl took effect. It survives execve (the worker is not set-uid).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != driver) ::_exit(127);
    // The driver ignores SIGPIPE (a program may close its phase socket at any time); an ignored
    // signal stays ignored across exec, and the program must get the default it expects.
    ::signal(SIGPIPE, SIG_DFL);
    // dup2 clears close-on-exec on the copies; the originals close at exec.
    ::dup2(report[1], options.report_fd_number);
    if (options.phase_pipe) ::dup2(phase[1], 4);
    if (!options.inherit_stdio) {
      ::dup2(out_fd, 1);
      ::dup2(log_fd, 2);
      ::dup2(in_fd, 0);
    }
    auto refuse = [](const char* what) {
      char msg[256];
      int n = std::snprintf(msg, sizeof msg, "allocmark: %s: %s\n", what, std::strerror(errno));
      (void)!::write(2, msg, n);
      ::_exit(127);
    };
    if (!options.refuse.empty()) {
      (void)!::write(2, "allocmark: ", 11);
      (void)!::write(2, options.refuse.data(), options.refuse.size());
      (void)!::write(2, "\n", 1);
      ::_exit(127);
    }
    if (options.thp_disable && ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) refuse("cannot disable transparent huge pages");
    if (!options.cpus.empty() && ::sched_setaffinity(0, sizeof cpus, &cpus) != 0) refuse("cannot set the CPU affinity");
    if (!options.membind.empty() && ::syscall(SYS_set_mempolicy, MPOL_BIND, node_mask.data(), node_mask.size() * kBits) != 0)
      refuse("cannot bind the memory policy");
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) {
      char msg[512];
      int n = std::snprintf(msg, sizeof msg, "allocmark: cannot enter %s: %s\n", options.cwd.c_str(), std::strerror(errno));
      (void)!::write(2, msg, n);
      ::_exit(127);
    }
    if (options.search_path)
      ::execvpe(argv[0], argv.data(), envp.data());
    else
      ::execve(argv[0], argv.data(), envp.data());
    char msg[512];
    int n = std::snprintf(msg, sizeof msg, "allocmark: cannot execute %s: %s\n", argv[0], std::strerror(errno));
    (void)!::write(2, msg, n);
    ::_exit(127);
  }
  if (!options.inherit_stdio) ::setpgid(pid, pid);
  if (phase[0] >= 0) ::fcntl(phase[0], F_SETFL, O_NONBLOCK);  // an answer nobody reads must not block the driver
  Spawned out{pid, report[0], phase[0]};
  // The parent keeps only the read ends; everything else closes with `owned`.
  for (int& fd : owned.fds)
    if (fd == report[0] || fd == phase[0]) fd = -1;
  return out;
}

void kill_group(pid_t pid) {
  if (pid > 0) ::kill(-pid, SIGKILL);
}

void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

namespace {
struct ProcessEntry {
  pid_t pid, parent, group;
  char state;
};

// Every process in /proc with its parent, process group and state. /proc/PID/stat reads
// "PID (COMM) STATE PPID PGRP ...", where COMM may hold spaces and parentheses: the fields are
// taken after the last ')'.
std::vector<ProcessEntry> all_processes() {
  std::vector<ProcessEntry> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300], text[512];
    std::snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (n <= 0) continue;
    text[n] = '\0';
    const char* fields = std::strrchr(text, ')');
    ProcessEntry p{static_cast<pid_t>(std::atoi(e->d_name)), 0, 0, '?'};
    if (fields && std::sscanf(fields + 1, " %c %d %d", &p.state, &p.parent, &p.group) == 3) out.push_back(p);
  }
  ::closedir(proc);
  return out;
}
}  // namespace

namespace {
std::atomic<pid_t> spared_pid{-1};
}  // namespace

void spare_from_leftovers(pid_t pid) { spared_pid.store(pid); }

std::size_t end_leftovers(pid_t group) {
  const pid_t self = ::getpid();
  const pid_t spared = spared_pid.load();
  std::set<pid_t> running;
  // Bounded: a process in uninterruptible sleep dies only when it wakes; 2 s is plenty for SIGKILL.
  for (int round = 0; round < 200; ++round) {
    bool any = false;
    for (const ProcessEntry& p : all_processes()) {
      if (p.pid == self || p.pid == spared || (p.group != group && p.parent != self)) continue;
      any = true;
      if (p.state != 'Z') {
        running.insert(p.pid);
        ::kill(p.pid, SIGKILL);
      }
      if (p.parent == self) ::waitpid(p.pid, nullptr, WNOHANG);
    }
    if (group > 0) ::kill(-group, SIGKILL);  // after the count: one that joined it since goes too
    if (!any) break;
    ::usleep(round < 10 ? 1000 : 10000);
  }
  return running.size();
}

std::string tail_of_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  std::streamoff from = size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  in.seekg(from);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (from > 0) {
    // Continuation bytes are 10xxxxxx: skip the rest of a character cut at the front (3 at most).
    std::size_t skip = 0;
    while (skip < 3 && skip < text.size() && (static_cast<unsigned char>(text[skip]) & 0xC0) == 0x80) ++skip;
    text = "..." + text.substr(skip);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return results::valid_utf8(text);
}

ToolResult run_tool(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {-1, std::string("pipe: ") + std::strerror(errno)};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The tool gets the default SIGPIPE, not the driver's ignored one (see spawn_process).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &pipe_signal);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return {-1, args[0] + ": " + std::strerror(rc)};
  }
  ToolResult out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  out.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  while (!out.output.empty() && (out.output.back() == '\n' || out.output.back() == ' ')) out.output.pop_back();
  return out;
}

std::optional<std::string> find_on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && ::access((dir + "/" + tool).c_str(), X_OK) == 0) return dir + "/" + tool;
  return std::nullopt;
}

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace allocmark::runner
