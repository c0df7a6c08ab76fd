// Starting and stopping one worker process (through os::spawn, harness/os/spawn.h): a report pipe
// on fd 3, stdout and stderr to a log file, its own process group (a terminal's Ctrl-C reaches only the driver, which decides),
// and death with its driver (PR_SET_PDEATHSIG), so a killed driver never leaves a worker running.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace allocmark::runner {

struct Spawned {
  pid_t pid = -1;
  int report_fd = -1;  // read end of the worker's fd 3 (SpawnOptions::report_fd_number)
  int phase_fd = -1;   // the driver's end of a program's phase socket (the program's fd 4), when asked for
};

// How to start a process other than the worker: a user's program in a program cell.
struct SpawnOptions {
  std::string stdout_path;  // "" = the log
  std::string stdin_path;   // "" = /dev/null
  std::string cwd;          // "" = the driver's
  bool phase_pipe = false;  // a socket on fd 4 (matrix::kPhaseFdVariable names it) for phase marks
  int report_fd_number = 3;  // where the child finds the report pipe's write end (`trace record`: a high one)
  bool search_path = false; // argv[0] is looked up on PATH (execvp rules)
  std::vector<int> cpus;     // the child's CPU affinity before exec; empty: inherited
  std::vector<int> membind;  // nodes its memory policy binds to (MPOL_BIND); empty: inherited
  bool thp_disable = false;  // PR_SET_THP_DISABLE before exec (kept across exec and by its children)
  std::string refuse;        // not "": the child prints this to its log and exits 127 instead of exec
  // The child keeps the driver's standard input, output and error and its process group (a
  // program recorded at a terminal: `trace record`); there is no log then ("" for log_path).
  bool inherit_stdio = false;
};

// Everything is built before fork: the child only sets up descriptors and execs. Throws
// std::runtime_error when the pipe, the log file or the fork cannot be made.
Spawned spawn_worker(const std::string& worker, const std::vector<std::string>& args,
                     const std::vector<std::string>& env, const std::string& log_path, const SpawnOptions& options = {});
// argv[0] is the program. Throws std::runtime_error like spawn_worker, also for the stdin and stdout files.
Spawned spawn_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      const std::string& log_path, const SpawnOptions& options);

// SIGKILL to the worker's whole process group (anything it started goes with it).
void kill_group(pid_t pid);

// Makes the calling process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER): a
// process a cell started that left the cell's process group (setsid, a daemon's double fork) is
// then still found, as the driver's child, when the cell ends.
void become_subreaper();

// Ends everything a cell's process left behind once it has been reaped: the members of its process
// group and the processes reparented to the driver (its subreaper), each SIGKILLed, then reaped,
// round after round until none is left (a killed process's children are reparented in turn).
// Returns how many of them were still running (zombies are reaped, not counted). The driver starts
// no other process while a cell runs, so its children are the cell's.
std::size_t end_leftovers(pid_t group);
// A child of the driver that is not a cell's (the --system-thp restorer), left alone by
// end_leftovers; -1 spares none.
void spare_from_leftovers(pid_t pid);

// The last `max_bytes` of a file (at most: the cut is moved forward to a character boundary), as
// valid UTF-8, for error messages that go into records.
std::string tail_of_file(const std::string& path, std::size_t max_bytes);

// A helper tool (sbatch, ldd, cpio, ...) run to completion: its exit status and what it printed.
struct ToolResult {
  int status = -1;     // exit status, 128+signal when killed; -1 when it could not be started
  std::string output;  // stdout and stderr together, trailing blanks removed
};
// argv[0] is looked up on PATH; stdin is /dev/null.
ToolResult run_tool(const std::vector<std::string>& args);

// The absolute path of `tool` on $PATH (execvp's search), or nullopt.
std::optional<std::string> find_on_path(const std::string& tool);

// `s` as one word for /bin/sh.
std::string shell_quoted(const std::string& s);

}  // namespace allocmark::runner
