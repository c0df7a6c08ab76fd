// The user's own program as a cell's workload (`--program NAME='COMMAND ARGS'`, [programs.NAME]).
// A program cell is an ordinary cell whose workload is "program:NAME" and whose parameters describe
// the command, so keys, --resume, records and the results model treat it like any other cell.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace allocmark::matrix {

inline constexpr const char* kProgramPrefix = "program:";
// The variable naming the descriptor a program may write `phase NAME` lines to.
inline constexpr const char* kPhaseFdVariable = "ALLOCMARK_PHASE_FD";

struct ProgramDef {
  std::string name;
  std::string command;  // shell words: split like sh does, without running anything (wordexp, WRDE_NOCMD)
  std::string cwd;      // "" = the driver's working directory
  std::string input;    // file given as standard input; "" = /dev/null
  std::map<std::string, std::string> env;
  std::string origin;   // "--program" or "path:line:column", for messages
};

bool is_program(const std::string& workload);
// The program's name of a program cell's workload ("program:NAME" -> "NAME"), and back.
std::string program_name(const std::string& workload);
inline std::string program_workload(const std::string& name) { return kProgramPrefix + name; }
// A program's or a trace's name in a matrix: letters, digits, '_', '-' or '.'.
bool valid_name(const std::string& name);
// The cell parameters of a program ("command", "cwd", "input", "env.NAME") and back.
std::map<std::string, std::string> program_params(const ProgramDef& def);
ProgramDef program_from_params(const std::string& workload, const std::map<std::string, std::string>& params);
// The command's words; throws ConfigError naming `origin` when it cannot be split (unbalanced
// quotes, $(...), a newline).
std::vector<std::string> command_words(const std::string& command, const std::string& origin);
// Checks everything that can be checked before a cell runs (name, words, an executable found on
// PATH or relative to cwd, cwd and input readable, env names); throws ConfigError.
void check_program(const ProgramDef& def);
// The absolute path of the file the command runs (as the cell resolves it: a path relative to cwd,
// a bare name on PATH), or "" when there is none.
std::string program_executable(const ProgramDef& def);
// The absolute path of the input file (relative to cwd), or "" for none.
std::string program_input(const ProgramDef& def);
// Words back into one command that command_words() splits into the same words (each quoted).
std::string join_command_words(const std::vector<std::string>& words);
// "NAME=COMMAND ARGS" from --program; throws ConfigError.
ProgramDef parse_program_flag(const std::string& flag);

}  // namespace allocmark::matrix
