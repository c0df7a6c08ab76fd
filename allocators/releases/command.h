// The commands a build runs (its steps, tar, nm, objdump, cc --version), through the harness's one
// launcher (harness/os/spawn.h). Internal to allocators/releases/.
#pragma once

#include <string>
#include <vector>

namespace allocmark::allocators::releases {

struct CommandResult {
  int status = -1;     // the exit status; 128+N for a signal N; -1 when it could not start
  std::string output;  // standard output (and standard error when asked), or why it could not start
};

// Runs argv (argv[0] looked up on PATH) and collects its standard output, and its standard error
// too when `with_stderr`; the caller's environment.
CommandResult capture(const std::vector<std::string>& argv, bool with_stderr = false);

// Runs `command` with /bin/sh in `cwd`, its output appended to the file at `log`, `env` added to
// the caller's environment ("KEY=VALUE"). The exit status as in CommandResult.
int run_logged(const std::string& command, const std::string& cwd, const std::string& log,
               const std::vector<std::string>& env);

}  // namespace allocmark::allocators::releases
