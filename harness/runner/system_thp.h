// `run --system-thp MODE`: the machine's transparent-huge-page mode set for the length of one run
// and put back however the run ends. The driver restores it itself when the session ends
// (normally, on an error, after Ctrl-C or SIGTERM); a small restorer process, started first and
// blocked on a pipe only the driver holds, restores it when the driver dies without doing so
// (SIGKILL, a crash). The mode is the whole machine's: every process on it sees it while the run lasts.
#pragma once

#include <sys/types.h>

#include <ostream>
#include <string>

namespace allocmark::runner {

inline constexpr const char* kThpEnabledPath = "/sys/kernel/mm/transparent_hugepage/enabled";

// Whether the machine's mode can be set here: "" when it can, else why not (no THP, not writable).
std::string system_thp_problem();

// The machine-wide lock of the switch (kThpLockPath, flock): one run at a time may change the
// machine's mode, so that the mode read as "what the machine had" is never another run's. Taken
// before the run writes anything; a second run is refused naming the holder's pid and command.
// The restorer shares it, so it is held until the machine's own mode is back, even after the
// driver was killed.
inline constexpr const char* kThpLockPath = "/run/lock/allocmark-system-thp.lock";

class SystemThpLock {
 public:
  // Throws std::runtime_error naming the lock file and its holder when another run holds it.
  explicit SystemThpLock(const std::string& command);
  ~SystemThpLock();
  SystemThpLock(const SystemThpLock&) = delete;
  SystemThpLock& operator=(const SystemThpLock&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

class SystemThpSwitch {
 public:
  // Sets the mode (after starting the restorer, which inherits `lock`) and says so on `messages`;
  // the mode it puts back is the one read under the lock. Throws std::runtime_error naming the
  // file when it cannot.
  SystemThpSwitch(const std::string& mode, const SystemThpLock& lock, std::ostream& messages);
  ~SystemThpSwitch();
  SystemThpSwitch(const SystemThpSwitch&) = delete;
  SystemThpSwitch& operator=(const SystemThpSwitch&) = delete;
  const std::string& original() const { return original_; }

 private:
  std::string original_;
  int keepalive_fd_ = -1;  // the restorer reads EOF from it when the driver is gone
  pid_t restorer_ = -1;
};

}  // namespace allocmark::runner
