#include "harness/runner/system_thp.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "harness/metrics/proc.h"
#include "harness/os/spawn.h"
#include "harness/runner/process.h"

namespace allocmark::runner {
namespace {

bool write_mode(const std::string& mode) {
  int fd = ::open(kThpEnabledPath, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, mode.data(), mode.size()) == static_cast<ssize_t>(mode.size());
  return ::close(fd) == 0 && ok;
}

constexpr int kKeepaliveFd = 3, kLockFd = 4;

// The restorer: waits until no driver holds the keepalive pipe's write end (the driver ended, however),
// then writes the original mode (*arg) back. Only system calls: it runs in a child of a threaded driver.
int restore_when_the_driver_is_gone(const void* arg) {
  const auto& original = *static_cast<const std::string*>(arg);
  for (char byte;;) {
    const ssize_t n = ::read(kKeepaliveFd, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  if (int fd = ::open(kThpEnabledPath, O_WRONLY); fd >= 0) {
    (void)!::write(fd, original.data(), original.size());
    ::close(fd);
  }
  return 0;
}

}  // namespace

std::string system_thp_problem() {
  const std::string now = metrics::thp_enabled_mode();
  if (now.empty()) return std::string("this kernel has no transparent huge pages (no ") + kThpEnabledPath + ")";
  if (::access(kThpEnabledPath, W_OK) != 0)
    return std::string("cannot write ") + kThpEnabledPath + " (" + std::strerror(errno) + "; setting the machine's mode needs root)";
  return "";
}

SystemThpLock::SystemThpLock(const std::string& command) {
  const std::string path = kThpLockPath;
  // Root's file in a shared folder: never followed through a link someone planted there.
  fd_ = ::open(kThpLockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = fd_ < 0 ? std::strerror(errno) : "not a regular file";
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("--system-thp: cannot open the machine's lock " + path + " (" + why + ")");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[1024];
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\r')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw std::runtime_error("--system-thp: another allocmark run holds this machine's transparent huge page mode (" +
                               (holder.empty() ? std::string("holder unknown") : holder) + "; lock " + path +
                               "); only one run at a time may change it: wait for that run to end");
    throw std::runtime_error("--system-thp: cannot lock " + path + ": " + std::strerror(err));
  }
  const std::string text = "pid " + std::to_string(::getpid()) + (command.empty() ? "" : ": " + command) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, text.data(), text.size(), 0);
}

SystemThpLock::~SystemThpLock() {
  if (fd_ >= 0) ::close(fd_);  // the restorer's copy, if any, holds it until the mode is back
}

SystemThpSwitch::SystemThpSwitch(const std::string& mode, const SystemThpLock& lock, std::ostream& messages)
    : original_(metrics::thp_enabled_mode()) {
  if (auto problem = system_thp_problem(); !problem.empty()) throw std::runtime_error("--system-thp: " + problem);
  int keepalive[2];
  if (::pipe2(keepalive, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) {
    const int err = errno;
    ::close(keepalive[0]);
    ::close(keepalive[1]);
    throw std::runtime_error(std::string("cannot open /dev/null: ") + std::strerror(err));
  }
  // The restorer is the driver's own code (os::spawn's `run`): a session of its own, deaf to the
  // signals that stop a run, since it outlives the driver by design. fd 3: the keepalive pipe;
  // fd 4: the machine's lock, held until the mode is back; the results folder's lock and logs are
  // closed in it.
  os::SpawnOptions o;
  o.run = restore_when_the_driver_is_gone;
  o.run_arg = &original_;
  o.new_session = true;
  o.ignore_signals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
  o.fds = {{null, 0}, {null, 1}, {null, 2}, {keepalive[0], kKeepaliveFd}, {lock.fd(), kLockFd}};
  const os::SpawnResult started = os::spawn(o);
  ::close(null);
  if (started.pid < 0) {
    ::close(keepalive[0]);
    ::close(keepalive[1]);
    throw std::runtime_error("--system-thp: cannot start the process that puts the mode back: " + started.error);
  }
  ::close(keepalive[0]);
  keepalive_fd_ = keepalive[1];
  restorer_ = started.pid;
  spare_from_leftovers(restorer_);  // the driver's child, but not a cell's
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
