#include "harness/runner/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace allocmark::runner {

Spawned spawn_worker(const std::string& worker, const std::vector<std::string>& args,
                     const std::vector<std::string>& env, const std::string& log_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error("cannot write " + log_path + ": " + std::strerror(err));
  }
  std::vector<char*> argv{const_cast<char*>(worker.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const pid_t driver = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    ::close(log_fd);
    throw std::runtime_error(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // Die with the driver. The signal follows the thread that forked, which is always the
    // driver's main thread; the second check closes the window in which the driver died before
    // prctl took effect. It survives execve (the worker is not set-uid).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != driver) ::_exit(127);
    ::dup2(fds[1], 3);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execve(worker.c_str(), argv.data(), envp.data());
    char msg[512];
    int n = std::snprintf(msg, sizeof msg, "allocmark: cannot execute %s: %s\n", worker.c_str(), std::strerror(errno));
    (void)!::write(2, msg, n);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  ::close(log_fd);
  return {pid, fds[0]};
}

void kill_group(pid_t pid) {
  if (pid > 0) ::kill(-pid, SIGKILL);
}

std::string tail_of_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace allocmark::runner
