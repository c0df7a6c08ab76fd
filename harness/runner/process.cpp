#include "harness/runner/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

#include "harness/os/files.h"
#include "harness/os/spawn.h"
#include "harness/results/safe_text.h"

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

namespace {
// The report pipe and, when asked for, the phase socket: both ends, owned until the spawn.
struct Channels {
  int report[2] = {-1, -1};
  int phase[2] = {-1, -1};
};

Channels open_channels(Fds& owned, bool phase_pipe) {
  Channels c;
  if (::pipe2(c.report, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  owned.keep(c.report[0]);
  owned.keep(c.report[1]);
  if (phase_pipe) {
    // A socket, not a pipe: the driver answers each mark once the phase edge is measured, so a
    // program that waits for the answer has exact edges.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c.phase) != 0)
      throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    owned.keep(c.phase[0]);
    owned.keep(c.phase[1]);
  }
  return c;
}

// The child's descriptors: the report pipe, the phase socket on 4, and unless it inherits the
// driver's, standard input (stdin_path or /dev/null), output (stdout_path or the log) and error (the log).
std::vector<os::FdCopy> child_fds(Fds& owned, const Channels& c, const std::string& log_path, const SpawnOptions& options) {
  std::vector<os::FdCopy> fds{{c.report[1], options.report_fd_number}};
  if (c.phase[1] >= 0) fds.push_back({c.phase[1], 4});
  if (options.inherit_stdio) return fds;
  // O_NOFOLLOW: a log truncated through a link planted in a results folder would destroy its target.
  const int log_fd = open_or_throw(owned, log_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, "write");
  const int out_fd = options.stdout_path.empty()
                         ? log_fd
                         : open_or_throw(owned, options.stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, "write");
  const int in_fd = open_or_throw(owned, options.stdin_path.empty() ? "/dev/null" : options.stdin_path, O_RDONLY, "read");
  fds.insert(fds.end(), {{out_fd, 1}, {log_fd, 2}, {in_fd, 0}});
  return fds;
}
}  // namespace

Spawned spawn_process(const std::vector<std::string>& args, const std::vector<std::string>& env,
                      const std::string& log_path, const SpawnOptions& options) {
  Fds owned;
  const Channels c = open_channels(owned, options.phase_pipe);
  os::SpawnOptions o;
  o.argv = args;
  o.env = env;
  o.search_path = options.search_path;
  o.fds = child_fds(owned, c, log_path, options);
  o.cwd = options.cwd;
  // Dies with the driver (the signal follows the thread that forked: always the driver's main
  // thread), and in its own group unless it shares the driver's terminal.
  o.pdeathsig = SIGKILL;
  o.new_group = !options.inherit_stdio;
  o.thp_disable = options.thp_disable;
  o.cpus = options.cpus;
  o.membind = options.membind;
  o.refuse = options.refuse;
  o.fail_in_child = true;  // in the cell's log, which the record quotes
  const os::SpawnResult child = os::spawn(o);
  if (child.pid < 0) throw std::runtime_error(child.error);
  if (c.phase[0] >= 0) ::fcntl(c.phase[0], F_SETFL, O_NONBLOCK);  // an answer nobody reads must not block the driver
  // The parent keeps only the read ends; everything else closes with `owned`.
  for (int& fd : owned.fds)
    if (fd == c.report[0] || fd == c.phase[0]) fd = -1;
  return {child.pid, c.report[0], c.phase[0]};
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
  for (const pid_t pid : os::process_ids()) {
    char path[300], text[512];
    ProcessEntry p{pid, 0, 0, '?'};
    os::proc_path(path, sizeof path, p.pid, "stat");
    if (os::read_file(path, text, sizeof text) <= 0) continue;
    const char* fields = std::strrchr(text, ')');
    if (fields && std::sscanf(fields + 1, " %c %d %d", &p.state, &p.parent, &p.group) == 3) out.push_back(p);
  }
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
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  os::SpawnOptions o;
  o.argv = args;
  o.search_path = true;
  o.fds = {{fds[1], 1}, {fds[1], 2}};
  if (null_fd >= 0) o.fds.push_back({null_fd, 0});
  const os::SpawnResult child = null_fd >= 0 ? os::spawn(o) : os::SpawnResult{-1, errno, ""};
  if (null_fd >= 0) ::close(null_fd);
  ::close(fds[1]);
  if (child.pid < 0) {
    ::close(fds[0]);
    return {-1, args[0] + ": " + std::strerror(child.error_number)};
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
  os::wait_for(child.pid, ws);
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
