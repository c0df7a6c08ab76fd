#include "harness/runner/system_thp.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "harness/metrics/proc.h"
#include "harness/runner/process.h"

namespace allocmark::runner {
namespace {

bool write_mode(const std::string& mode) {
  int fd = ::open(kThpEnabledPath, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, mode.data(), mode.size()) == static_cast<ssize_t>(mode.size());
  return ::close(fd) == 0 && ok;
}

}  // namespace

std::string system_thp_problem() {
  const std::string now = metrics::thp_enabled_mode();
  if (now.empty()) return std::string("this kernel has no transparent huge pages (no ") + kThpEnabledPath + ")";
  if (::access(kThpEnabledPath, W_OK) != 0)
    return std::string("cannot write ") + kThpEnabledPath + " (" + std::strerror(errno) + "; setting the machine's mode needs root)";
  return "";
}

SystemThpSwitch::SystemThpSwitch(const std::string& mode, std::ostream& messages) : original_(metrics::thp_enabled_mode()) {
  if (auto problem = system_thp_problem(); !problem.empty()) throw std::runtime_error("--system-thp: " + problem);
  int keepalive[2];
  if (::pipe2(keepalive, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  // Everything the restorer uses is ready before fork: the child of a threaded driver may only
  // make system calls.
  const std::string original = original_;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(keepalive[0]);
    ::close(keepalive[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Its own session, deaf to the signals that stop a run: it outlives the driver by design.
    ::setsid();
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(sig, SIG_IGN);
    if (keepalive[0] != 3) ::dup2(keepalive[0], 3);
    int null = ::open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
    ::syscall(SYS_close_range, 4u, ~0u, 0u);  // the results folder's lock and logs are not the restorer's
    for (char byte;;) {
      const ssize_t n = ::read(3, &byte, 1);
      if (n == 0 || (n < 0 && errno != EINTR)) break;  // EOF: no driver holds the pipe any more
    }
    if (int fd = ::open(kThpEnabledPath, O_WRONLY); fd >= 0) {
      (void)!::write(fd, original.data(), original.size());
      ::close(fd);
    }
    ::_exit(0);
  }
  ::close(keepalive[0]);
  keepalive_fd_ = keepalive[1];
  restorer_ = pid;
  spare_from_leftovers(pid);  // the driver's child, but not a cell's
  const bool written = write_mode(mode);
  const std::string why = written ? "it reads back as '" + metrics::thp_enabled_mode() + "'" : std::strerror(errno);
  if (!written || metrics::thp_enabled_mode() != mode) {
    write_mode(original_);
    ::close(keepalive_fd_);
    ::waitpid(restorer_, nullptr, 0);
    throw std::runtime_error(std::string("--system-thp ") + mode + ": could not set " + kThpEnabledPath + " (" + why + ")");
  }
  messages << "allocmark: transparent huge pages set to '" << mode << "' for the whole machine while this run lasts (was '"
           << original_ << "'; put back when it ends, also if it is killed)\n";
}

SystemThpSwitch::~SystemThpSwitch() {
  write_mode(original_);
  ::close(keepalive_fd_);  // the restorer writes it once more and exits
  ::waitpid(restorer_, nullptr, 0);
  spare_from_leftovers(-1);
}

}  // namespace allocmark::runner
