// Starting and stopping one worker process: fork+exec with a report pipe on fd 3, stdout and stderr
// to a log file, its own process group (a terminal's Ctrl-C reaches only the driver, which decides),
// and death with its driver (PR_SET_PDEATHSIG), so a killed driver never leaves a worker running.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace allocmark::runner {

struct Spawned {
  pid_t pid = -1;
  int report_fd = -1;  // read end of the worker's fd 3
};

// Everything is built before fork: the child only sets up descriptors and execs. Throws
// std::runtime_error when the pipe, the log file or the fork cannot be made.
Spawned spawn_worker(const std::string& worker, const std::vector<std::string>& args,
                     const std::vector<std::string>& env, const std::string& log_path);

// SIGKILL to the worker's whole process group (anything it started goes with it).
void kill_group(pid_t pid);

// Text of the last `max_bytes` of a file, for error messages.
std::string tail_of_file(const std::string& path, std::size_t max_bytes);

}  // namespace allocmark::runner
