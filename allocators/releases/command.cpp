#include "allocators/releases/command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "harness/os/spawn.h"

extern char** environ;

namespace allocmark::allocators::releases {
namespace {

int exit_status(pid_t pid) {
  int status = 0;
  if (!os::wait_for(pid, status)) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

CommandResult capture(const std::vector<std::string>& argv, bool with_stderr) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {-1, std::string("pipe: ") + std::strerror(errno)};
  os::SpawnOptions o;
  o.argv = argv;
  o.search_path = true;
  o.fds = {{fds[1], 1}};
  if (with_stderr) o.fds.push_back({fds[1], 2});
  o.pdeathsig = SIGTERM;  // a driver that dies takes its helper with it
  os::SpawnResult r = os::spawn(o);
  ::close(fds[1]);
  CommandResult out;
  char buf[65536];
  ssize_t n;
  while (r.pid > 0 && ((n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0) out.output.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  if (r.pid <= 0) return {-1, r.error};
  out.status = exit_status(r.pid);
  return out;
}

int run_logged(const std::string& command, const std::string& cwd, const std::string& log,
               const std::vector<std::string>& env) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  os::SpawnOptions o;
  o.argv = {"/bin/sh", "-c", command};
  // The caller's environment with `env`'s variables replaced (CC, CXX: the compiler of the key).
  std::vector<std::string> ours(env);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const auto& mine : env) replaced = replaced || mine.compare(0, key.size(), key) == 0;
    if (!replaced) ours.push_back(entry);
  }
  o.env = ours;
  o.cwd = cwd;
  o.fds = {{devnull, 0}, {fd, 1}, {fd, 2}};  // a step that asks a question reads end of input, never hangs
  o.pdeathsig = SIGTERM;
  os::SpawnResult r = os::spawn(o);
  ::close(fd);
  ::close(devnull);
  return r.pid > 0 ? exit_status(r.pid) : -1;
}

}  // namespace allocmark::allocators::releases
