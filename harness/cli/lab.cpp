// `allocmark lab --topology FILE -- run ARGS...`: the run in a virtual machine booted with that NUMA
// topology (harness/lab/), so placement, per-node memory and fallback meet a real multi-node kernel
// on a machine that has one node. The guest's command is checked here with `run`'s own flags and
// plan before anything boots: a typo costs a second, not a boot.
#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "harness/cli/common.h"
#include "harness/cli/run.h"
#include "harness/lab/guest.h"
#include "harness/lab/runner.h"
#include "harness/matrix/config.h"
#include "harness/matrix/program.h"
#include "harness/results/folder_layout.h"
#include "harness/runner/process.h"
#include "units/units.h"

namespace allocmark::cli {
namespace {

namespace fs = std::filesystem;
namespace mx = allocmark::matrix;

struct LabFlags {
  std::string topology_file;
  std::optional<std::string> memory_per_node;
  double timeout_s = 1200;
  std::string accel = "tcg";
  std::string thp;
  std::string kernel;
  std::string out_dir;
  bool keep_work = false;
  std::string under;
  std::vector<std::string> carry;
  std::vector<std::string> command;
};

// The guest's `run` flags, parsed and checked as `allocmark run` would, minus what the lab owns.
mx::Plan check_guest_run(const std::vector<std::string>& command, std::string& matrix_path) {
  CLI::App parser{"allocmark run (in the lab's guest)", "run"};
  RunFlags flags;
  add_run_flags(&parser, flags);
  std::vector<std::string> reversed(command.rbegin(), command.rend() - 1);  // CLI11 takes them last first
  try {
    parser.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw mx::ConfigError(std::string("lab: the guest's command: ") + e.what());
  }
  auto refuse = [](bool given, const std::string& what) {
    if (given) throw mx::ConfigError("lab: the guest's command: " + what);
  };
  refuse(flags.out_given, "--out belongs to lab (the results folder it brings back), not to the command run in the guest");
  refuse(flags.resume || flags.extend || flags.retry_failed || flags.discard_corrupt,
         "--resume, --extend, --retry-failed and --discard-corrupt-lines: the guest starts from an empty folder");
  refuse(flags.dry_run, "--dry-run: check the matrix with `allocmark run --dry-run` here, nothing needs a guest");
  refuse(flags.executor != "local" || !flags.slurm_opts.empty() || flags.cells_per_task || flags.no_wait,
         "--executor slurm and its flags: the guest runs cells itself");
  return make_run_plan(flags, matrix_path);
}

// A program named for the guest (--under's, exec's): looked up on PATH as the shell would, absolute.
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
void carry_programs(const mx::Plan& plan, allocmark::lab::LabRequest& request) {
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

int run_lab_command(const LabFlags& f) {
  namespace lab = allocmark::lab;
  lab::LabRequest request;
  request.topology = topology::load_topology_file(f.topology_file);
  request.topology_file = f.topology_file;
  if (f.memory_per_node) {
    try {
      request.vm.memory_per_node = units::parse_bytes(*f.memory_per_node);
    } catch (const std::exception& e) {
      throw mx::ConfigError("--memory-per-node: " + std::string(e.what()));
    }
  }
  if (!(f.timeout_s > 0)) throw mx::ConfigError(fmt::format("--timeout: must be positive, not {}", f.timeout_s));
  request.vm.accel = f.accel == "kvm" ? lab::Accel::kKvm : lab::Accel::kTcg;
  request.accel_auto = f.accel == "auto";
  request.vm.thp = f.thp;
  request.vm.kernel = f.kernel;
  // The command line qemu would get, built now so a topology qemu cannot express fails before anything else.
  (void)lab::qemu_command(request.topology, request.vm);

  request.timeout_s = f.timeout_s;
  const std::string verb = f.command.front();
  if (verb == "run") {
    std::string matrix_path;
    mx::Plan plan = check_guest_run(f.command, matrix_path);
    request.program = fs::read_symlink("/proc/self/exe").string();
    request.guest_args = f.command;
    request.carry_elves.push_back(worker_path());
    request.carry_elves.push_back(ALLOCMARK_PRELOAD_REPORT_LIBRARY);
    for (const auto& a : plan.allocators)
      if (!a.library.empty()) request.carry_elves.push_back(a.library);
    for (const auto& c : plan.cells)
      if (c.workload == "rocksdb") {
        request.carry_elves.push_back(ALLOCMARK_ROCKSDB_MODULE);
        break;
      }
    carry_programs(plan, request);
    if (!matrix_path.empty()) request.carry_files.push_back(fs::absolute(matrix_path).string());
    request.carry_folders.push_back(mx::config_dir());
    if (const char* dir = std::getenv("ALLOCMARK_CONFIG_DIR"); dir && *dir) request.guest_env.emplace_back("ALLOCMARK_CONFIG_DIR", dir);
  } else if (verb == "exec") {
    // Any program on the real multi-node kernel (numap's probes, numactl --hardware): its output
    // is forwarded, its exit code returned, and what it writes to $ALLOCMARK_LAB_OUT comes back.
    if (f.command.size() < 2) throw mx::ConfigError("lab: `exec` needs a program: -- exec PROGRAM ARGS...");
    request.program = resolve_program(f.command[1], "lab: exec");
    request.guest_args.assign(f.command.begin() + 2, f.command.end());
    request.allocmark_run = false;
  } else {
    throw mx::ConfigError("lab: the command for the guest must be `run ...` or `exec PROGRAM ARGS...` (after --), e.g. "
                          "`allocmark lab --topology configs/topologies/seed-8node.toml -- run -w size_mix -a glibc,numap`");
  }
  if (!f.under.empty()) {
    request.guest_prefix = mx::command_words(f.under, "--under");
    request.guest_prefix.front() = resolve_program(request.guest_prefix.front(), "--under");
    request.carry_elves.push_back(request.guest_prefix.front());
  }
  for (const auto& path : f.carry) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw mx::ConfigError("--carry: " + path + " does not exist");
    const std::string absolute = fs::absolute(path).lexically_normal().string();
    (fs::is_directory(path, ec) ? request.carry_folders : request.carry_elves).push_back(absolute);
    request.carry_extra.push_back(absolute);
  }
  request.out_dir = f.out_dir.empty() ? default_out_dir("lab-") : f.out_dir;
  request.host_command = command_line();
  request.keep_work = f.keep_work;

  lab::LabOutcome outcome;
  try {
    outcome = lab::run_lab(request);
  } catch (const lab::LabFailed& e) {
    std::cerr << "allocmark lab: error: " << e.what() << "\n";
    return kExitStopped;
  }
  if (outcome.stopped_by_timeout) {
    // Not complete, so 3 as for any stopped run; but what finished is kept and said so.
    if (outcome.results)
      std::cerr << fmt::format("allocmark lab: the command did not finish within --timeout {} s: the guest stopped it {:.0f} s "
                               "before and sent back what it finished to {} (lab.stopped_by_timeout in {}; the guest's "
                               "--resume hint does not apply here: rerun with a longer --timeout or fewer cells)\n",
                               f.timeout_s, lab::guest_margin_s(f.timeout_s), request.out_dir,
                               request.allocmark_run ? results::layout::kMeta : "lab.json");
    else
      std::cerr << fmt::format("allocmark lab: the command did not finish within --timeout {} s and left no results folder\n", f.timeout_s);
    return kExitStopped;
  }
  if (outcome.guest_exit == kExitInterrupted) return kExitInterrupted;
  if (!request.allocmark_run) {
    if (outcome.results)
      std::cerr << fmt::format("allocmark lab: the program exited {}; what it wrote to $ALLOCMARK_LAB_OUT is in {} (with lab.json)\n",
                               outcome.guest_exit, request.out_dir);
    return outcome.guest_exit < 0 ? kExitStopped : outcome.guest_exit;
  }
  if (!outcome.results) {
    std::cerr << fmt::format("allocmark lab: the command exited {} in the guest and wrote no results folder\n", outcome.guest_exit);
    return outcome.guest_exit > 0 ? outcome.guest_exit : kExitStopped;
  }
  std::cerr << fmt::format("allocmark lab: results in {} (lab results, {} nodes, {}: timings under emulation are meaningless; "
                           "placement, per-node RSS, capacities and fallback are the real kernel's)\n",
                           request.out_dir, request.topology.nodes.size(), outcome.accel);
  return outcome.guest_exit < 0 ? kExitStopped : outcome.guest_exit;
}

}  // namespace

Subcommand add_lab_command(CLI::App& app) {
  auto f = std::make_shared<LabFlags>();
  auto* cmd = app.add_subcommand("lab", "run an allocmark command in a virtual machine booted with a NUMA topology (docs/lab.md)");
  cmd->add_option("--topology", f->topology_file, "topology file (configs/topologies/*.toml)")->required();
  cmd->add_option("--memory-per-node", f->memory_per_node, "memory of every node, e.g. 256M (default: the file's `memory`)");
  cmd->add_option("--timeout", f->timeout_s, "seconds for boot, command and results together before the guest is stopped (default 1200)");
  cmd->add_option("--accel", f->accel, "tcg (software emulation, default), kvm, or auto (kvm, else tcg)")
      ->check(CLI::IsMember({"tcg", "kvm", "auto"}));
  cmd->add_option("--thp", f->thp, "the guest's transparent huge page mode: always, madvise or never (default: the kernel's)")
      ->check(CLI::IsMember({"always", "madvise", "never"}));
  cmd->add_option("--kernel", f->kernel, "kernel image to boot (default: the newest /boot/vmlinuz-*, Debian's linux-image-amd64)");
  cmd->add_option("--out,-o", f->out_dir, "where the results folder comes back (default results/lab-<date-time>)");
  cmd->add_option("--under", f->under, "run the guest's command (allocmark, or exec's program) under this one, e.g. 'numactl --cpunodebind=0 --membind=0' "
                                      "(carried with its libraries)");
  cmd->add_option("--carry", f->carry, "another file or folder for the guest, at the same path (binaries with their libraries; repeatable)");
  cmd->add_flag("--keep-work", f->keep_work, "keep the scratch folder (initramfs, consoles) and say where");
  cmd->add_option("command", f->command,
                  "after --: `run ARGS...` (allocmark run in the guest) or `exec PROGRAM ARGS...` (any carried program)")
      ->required();
  return {cmd, [f] { return run_lab_command(*f); }};
}

}  // namespace allocmark::cli
