#include "harness/matrix/program.h"

#include <sys/stat.h>
#include <unistd.h>
#include <wordexp.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "harness/matrix/config.h"
#include "units/input_file.h"

namespace allocmark::matrix {

bool is_program(const std::string& workload) { return workload.rfind(kProgramPrefix, 0) == 0; }
std::string program_name(const std::string& workload) { return workload.substr(std::string(kProgramPrefix).size()); }

std::map<std::string, std::string> program_params(const ProgramDef& def) {
  std::map<std::string, std::string> p{{"command", def.command}, {"cwd", def.cwd}, {"input", def.input}};
  for (const auto& [k, v] : def.env) p["env." + k] = v;
  return p;
}

ProgramDef program_from_params(const std::string& workload, const std::map<std::string, std::string>& params) {
  ProgramDef def;
  def.name = program_name(workload);
  auto get = [&](const char* k) {
    auto it = params.find(k);
    return it == params.end() ? std::string() : it->second;
  };
  def.command = get("command");
  def.cwd = get("cwd");
  def.input = get("input");
  for (const auto& [k, v] : params)
    if (k.rfind("env.", 0) == 0) def.env[k.substr(4)] = v;
  return def;
}

std::vector<std::string> command_words(const std::string& command, const std::string& origin) {
  wordexp_t w{};
  int rc = ::wordexp(command.c_str(), &w, WRDE_NOCMD | WRDE_SHOWERR);
  std::vector<std::string> words;
  if (rc == 0)
    for (std::size_t i = 0; i < w.we_wordc; ++i) words.emplace_back(w.we_wordv[i]);
  if (rc == 0 || rc == WRDE_NOSPACE) ::wordfree(&w);
  const char* why = rc == WRDE_BADCHAR ? "a character the shell would treat specially (| & ; < > ( ) { } or a newline); quote it"
                    : rc == WRDE_CMDSUB ? "a command substitution, which allocmark does not run"
                    : rc == WRDE_SYNTAX ? "a shell syntax error (unbalanced quotes?)"
                                        : "words that cannot be split";
  if (rc != 0) throw ConfigError(origin + ": command '" + command + "' has " + why);
  if (words.empty()) throw ConfigError(origin + ": the command is empty");
  return words;
}

namespace {

bool executable_file(const std::filesystem::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}


}  // namespace

std::string program_executable(const ProgramDef& def) {
  namespace fs = std::filesystem;
  const std::string exe = command_words(def.command, def.origin + " (program " + def.name + ")")[0];
  const fs::path cwd = def.cwd.empty() ? fs::current_path() : fs::path(def.cwd);
  if (exe.find('/') != std::string::npos) {
    const fs::path p = fs::path(exe).is_absolute() ? fs::path(exe) : cwd / exe;
    return executable_file(p) ? fs::absolute(p).lexically_normal().string() : "";
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "";
  for (std::size_t b = 0, e; b <= dirs.size(); b = e + 1) {
    e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    const fs::path p = fs::path(dirs.substr(b, e - b)) / exe;
    if (executable_file(p)) return fs::absolute(p).lexically_normal().string();
  }
  return "";
}

std::string program_input(const ProgramDef& def) {
  namespace fs = std::filesystem;
  if (def.input.empty()) return "";
  const fs::path cwd = def.cwd.empty() ? fs::current_path() : fs::path(def.cwd);
  return fs::absolute(fs::path(def.input).is_absolute() ? fs::path(def.input) : cwd / def.input).lexically_normal().string();
}

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

void check_program(const ProgramDef& def) {
  const std::string& at = def.origin;
  if (!valid_name(def.name))
    throw ConfigError(at + ": program name '" + def.name + "' must be letters, digits, '_', '-' or '.'");
  std::vector<std::string> words = command_words(def.command, at + " (program " + def.name + ")");
  namespace fs = std::filesystem;
  if (!def.cwd.empty() && !fs::is_directory(def.cwd))
    throw ConfigError(at + ": program " + def.name + ": working directory '" + def.cwd + "' is not a folder");
  if (program_executable(def).empty())
    throw ConfigError(at + ": program " + def.name + ": '" + words[0] + "' is not an executable file (nor found on PATH)");
  if (!def.input.empty()) {
    const std::string in = program_input(def);
    if (std::string problem = units::input_file_problem(in); !problem.empty())
      throw ConfigError(at + ": program " + def.name + ": input: " + problem);
  }
  for (const auto& [k, v] : def.env) {
    bool ok = !k.empty() && !std::isdigit(static_cast<unsigned char>(k[0]));
    for (unsigned char c : k) ok = ok && (std::isalnum(c) || c == '_');
    if (!ok) throw ConfigError(at + ": program " + def.name + ": '" + k + "' is not an environment variable name");
    for (unsigned char c : v)
      if (c < 0x20 && c != '\t') throw ConfigError(at + ": program " + def.name + ": the value of " + k + " holds a control character");
  }
}

std::string join_command_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    out += out.empty() ? "'" : " '";
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += "'";
  }
  return out;
}

ProgramDef parse_program_flag(const std::string& flag) {
  auto eq = flag.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--program " + flag + ": expected NAME='COMMAND ARGS'");
  ProgramDef def;
  def.name = flag.substr(0, eq);
  def.command = flag.substr(eq + 1);
  def.origin = "--program " + def.name;
  return def;
}

}  // namespace allocmark::matrix
