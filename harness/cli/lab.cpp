// `allocmark lab --topology FILE -- run ARGS...`: the run in a virtual machine booted with that NUMA
// topology (harness/lab/), so placement, per-node memory and fallback meet a real multi-node kernel
// on a machine that has one node. The guest's command is checked here with `run`'s own flags and
// plan before anything boots: a typo costs a second, not a boot.
#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "harness/cli/common.h"
#include "harness/cli/run.h"
#include "harness/lab/runner.h"
#include "harness/matrix/config.h"
#include "harness/matrix/program.h"
#include "harness/runner/process.h"
#include "workloads/workload.h"

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
  if (command.empty() || command.front() != "run")
    throw mx::ConfigError("lab: the command for the guest must be `run ...` (after --), e.g. "
                          "`allocmark lab --topology configs/topologies/seed-8node.toml -- run -w size_mix -a glibc,numap`");
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
  refuse(!flags.programs.empty(), "--program: a program's files are not carried into the guest (only the harness and allocators are)");
  return make_run_plan(flags, matrix_path);
}

int run_lab_command(const LabFlags& f) {
  namespace lab = allocmark::lab;
  lab::LabRequest request;
  request.topology = topology::load_topology_file(f.topology_file);
  request.topology_file = f.topology_file;
  if (f.memory_per_node) {
    try {
      request.vm.memory_per_node = workloads::parse_bytes(*f.memory_per_node);
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

  std::string matrix_path;
  mx::Plan plan = check_guest_run(f.command, matrix_path);
  request.guest_args = f.command;
  request.timeout_s = f.timeout_s;
  request.allocmark = fs::read_symlink("/proc/self/exe").string();
  request.carry_elves.push_back(worker_path());
  request.carry_elves.push_back(ALLOCMARK_PRELOAD_REPORT_LIBRARY);
  for (const auto& a : plan.allocators)
    if (!a.library.empty()) request.carry_elves.push_back(a.library);
  for (const auto& c : plan.cells)
    if (c.workload == "rocksdb") {
      request.carry_elves.push_back(ALLOCMARK_ROCKSDB_MODULE);
      break;
    }
  if (!matrix_path.empty()) request.carry_files.push_back(fs::absolute(matrix_path).string());
  request.carry_folders.push_back(mx::config_dir());
  if (const char* dir = std::getenv("ALLOCMARK_CONFIG_DIR"); dir && *dir) request.guest_env.emplace_back("ALLOCMARK_CONFIG_DIR", dir);
  if (!f.under.empty()) {
    request.guest_prefix = mx::command_words(f.under, "--under");
    std::string& program = request.guest_prefix.front();
    if (program.find('/') == std::string::npos) {
      auto found = runner::find_on_path(program);
      if (!found) throw mx::ConfigError("--under: " + program + " is not on PATH (numactl: apt-get install numactl)");
      program = *found;
    }
    if (::access(program.c_str(), X_OK) != 0) throw mx::ConfigError("--under: " + program + " is not an executable file");
    program = fs::absolute(program).string();
    request.carry_elves.push_back(program);
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
  if (outcome.guest_exit == kExitInterrupted) return kExitInterrupted;
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
  cmd->add_option("--under", f->under, "run the guest's allocmark under this command, e.g. 'numactl --cpunodebind=0 --membind=0' "
                                      "(carried with its libraries)");
  cmd->add_option("--carry", f->carry, "another file or folder for the guest, at the same path (binaries with their libraries; repeatable)");
  cmd->add_flag("--keep-work", f->keep_work, "keep the scratch folder (initramfs, consoles) and say where");
  cmd->add_option("command", f->command, "after --: the allocmark command for the guest, `run ARGS...`")->required();
  return {cmd, [f] { return run_lab_command(*f); }};
}

}  // namespace allocmark::cli
