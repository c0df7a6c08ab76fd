#include "harness/lab/request.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/matrix/config.h"
#include "harness/matrix/program.h"
#include "harness/runner/process.h"
#include "units/input_file.h"
#include "units/units.h"

namespace allocmark::lab {
namespace {

namespace fs = std::filesystem;
namespace mx = allocmark::matrix;

// The interpreter a `#!` script names ("" for anything else); `#!/usr/bin/env NAME` names NAME on PATH.
std::string script_interpreter(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || line.rfind("#!", 0) != 0) return "";
  std::istringstream words(line.substr(2));
  std::string interpreter, first_argument;
  words >> interpreter >> first_argument;
  if (fs::path(interpreter).filename() == "env" && !first_argument.empty() && first_argument[0] != '-')
    return resolve_program(first_argument, "lab: the interpreter of " + path);
  return interpreter.empty() ? "" : resolve_program(interpreter, "lab: the interpreter of " + path);
}

// What a program cell needs in the guest, at the same paths: its executable with its shared
// libraries (a script's interpreter too), its cwd folder whole and its input file. What the
// program itself starts is not known here: a shell's commands find the carried files, then
// busybox's applets (after the host's PATH), and --carry adds the rest.
void carry_programs(const mx::Plan& plan, LabRequest& request) {
  std::set<std::string> seen;
  for (const auto& c : plan.cells) {
    if (!mx::is_program(c.workload) || !seen.insert(c.workload).second) continue;
    const mx::ProgramDef def = mx::program_from_params(c.workload, c.params);
    const std::string executable = mx::program_executable(def);
    request.carry_elves.push_back(executable);
    if (std::string interpreter = script_interpreter(executable); !interpreter.empty()) request.carry_elves.push_back(interpreter);
    if (!def.cwd.empty()) {
      const std::string cwd = fs::absolute(def.cwd).lexically_normal().string();
      request.carry_folders.push_back(cwd);
      request.make_folders.push_back(cwd);
    }
    if (!def.input.empty()) request.carry_files.push_back(mx::program_input(def));
  }
}

// `run` in the guest: the driver with the worker, the preload companion, each allocator's
// library, the RocksDB module when a cell needs it, the program cells' files, the matrix file
// and the configuration folder.
void carry_for_run(const LabArgs& args, const GuestRun& run, LabRequest& request) {
  request.program = run.driver;
  request.guest_args = args.command;
  request.carry_elves.push_back(run.worker);
  request.carry_elves.push_back(ALLOCMARK_PRELOAD_REPORT_LIBRARY);
  for (const auto& a : run.plan.allocators)
    if (!a.library.empty()) request.carry_elves.push_back(a.library);
  for (const auto& c : run.plan.cells)
    if (c.workload == "rocksdb") {
      request.carry_elves.push_back(ALLOCMARK_ROCKSDB_MODULE);
      break;
    }
  carry_programs(run.plan, request);
  if (!run.matrix_path.empty()) request.carry_files.push_back(fs::absolute(run.matrix_path).string());
  request.carry_folders.push_back(mx::config_dir());
  if (const char* dir = std::getenv("ALLOCMARK_CONFIG_DIR"); dir && *dir) request.guest_env.emplace_back("ALLOCMARK_CONFIG_DIR", dir);
}

}  // namespace

std::string resolve_program(const std::string& word, const std::string& flag) {
  std::string program = word;
  if (program.find('/') == std::string::npos) {
    auto found = runner::find_on_path(program);
    if (!found) throw mx::ConfigError(flag + ": " + program + " is not on PATH");
    program = *found;
  }
  if (::access(program.c_str(), X_OK) != 0 || fs::is_directory(program))
    throw mx::ConfigError(flag + ": " + program + " is not an executable file");
  return fs::absolute(program).lexically_normal().string();
}

LabRequest lab_request(const LabArgs& args, const std::function<GuestRun()>& check_guest_run,
                       const std::string& default_out_dir, const std::string& host_command) {
  LabRequest request;
  request.topology = topology::load_topology_file(args.topology_file, "--topology");
  request.topology_file = args.topology_file;
  if (args.memory_per_node) {
    try {
      request.vm.memory_per_node = units::parse_bytes(*args.memory_per_node);
    } catch (const std::exception& e) {
      throw mx::ConfigError("--memory-per-node: " + std::string(e.what()));
    }
  }
  if (!(args.timeout_s > 0)) throw mx::ConfigError(fmt::format("--timeout: must be positive, not {}", args.timeout_s));
  request.vm.accel = args.accel == "kvm" ? Accel::kKvm : Accel::kTcg;
  request.accel_auto = args.accel == "auto";
  request.vm.thp = args.thp;
  request.vm.kernel = args.kernel;
  // The command line qemu would get, built now so a topology qemu cannot express fails before anything else.
  (void)qemu_command(request.topology, request.vm);
  request.timeout_s = args.timeout_s;

  const std::string verb = args.command.empty() ? "" : args.command.front();
  if (verb == "run") {
    carry_for_run(args, check_guest_run(), request);
  } else if (verb == "exec") {
    // Any program on the real multi-node kernel (numap's probes, numactl --hardware): its output
    // is forwarded, its exit code returned, and what it writes to $ALLOCMARK_LAB_OUT comes back.
    if (args.command.size() < 2) throw mx::ConfigError("lab: `exec` needs a program: -- exec PROGRAM ARGS...");
    request.program = resolve_program(args.command[1], "lab: exec");
    request.guest_args.assign(args.command.begin() + 2, args.command.end());
    request.allocmark_run = false;
  } else {
    throw mx::ConfigError("lab: the command for the guest must be `run ...` or `exec PROGRAM ARGS...` (after --), e.g. "
                          "`allocmark lab --topology configs/topologies/seed-8node.toml -- run -w size_mix -a glibc,numap`");
  }
  if (!args.under.empty()) {
    request.guest_prefix = mx::command_words(args.under, "--under");
    request.guest_prefix.front() = resolve_program(request.guest_prefix.front(), "--under");
    request.carry_elves.push_back(request.guest_prefix.front());
  }
  for (const auto& path : args.carry) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw mx::ConfigError("--carry: " + path + " does not exist");
    // A folder is carried whole; anything else must be a file to copy (a fifo would block the copy).
    if (!fs::is_directory(path, ec))
      if (std::string problem = units::input_file_problem(path); !problem.empty()) throw mx::ConfigError("--carry: " + problem);
    const std::string absolute = fs::absolute(path).lexically_normal().string();
    (fs::is_directory(path, ec) ? request.carry_folders : request.carry_elves).push_back(absolute);
    request.carry_extra.push_back(absolute);
  }
  request.out_dir = args.out_dir.empty() ? default_out_dir : args.out_dir;
  request.host_command = host_command;
  request.keep_work = args.keep_work;
  return request;
}

}  // namespace allocmark::lab
