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

class SystemThpSwitch {
 public:
  // Sets the mode (after starting the restorer) and says so on `messages`; throws
  // std::runtime_error naming the file when it cannot.
  SystemThpSwitch(const std::string& mode, std::ostream& messages);
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
