// `allocmark lab --topology FILE -- run ARGS...`: the run in a virtual machine booted with that NUMA
// topology (harness/lab/), so placement, per-node memory and fallback meet a real multi-node kernel
// on a machine that has one node. The guest's command is checked here with `run`'s own flags and
// plan before anything boots: a typo costs a second, not a boot. What the guest needs carried is
// the lab's decision (lab/request.h); this file parses and prints.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "harness/cli/common.h"
#include "harness/cli/run.h"
#include "harness/lab/guest.h"
#include "harness/lab/request.h"
#include "harness/lab/runner.h"
#include "harness/matrix/config.h"
#include "harness/os/files.h"
#include "harness/results/folder_layout.h"

namespace allocmark::cli {
namespace {

namespace fs = std::filesystem;
namespace mx = allocmark::matrix;

using LabFlags = allocmark::lab::LabArgs;

// The guest's `run` flags, parsed and checked as `allocmark run` would, minus what the lab owns.
mx::Plan check_guest_run(const std::vector<std::string>& command, const std::string& guest_thp, std::string& matrix_path) {
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
  refuse(!flags.system_thp.empty(), "--system-thp: the guest's mode is the lab's own --thp");
  refuse(flags.dry_run, "--dry-run: check the matrix with `allocmark run --dry-run` here, nothing needs a guest");
  refuse(flags.executor != "local" || !flags.slurm_opts.empty() || flags.cells_per_task || flags.no_wait,
         "--executor slurm and its flags: the guest runs cells itself");
  // The guest's mode is the lab's --thp (the guest kernel's default when not named, which is not known here).
  return make_run_plan(flags, matrix_path, guest_thp,
                       guest_thp.empty() ? "the lab's guest (its kernel's default: name it with lab --thp MODE)"
                                         : "the lab's guest (lab --thp " + guest_thp + ")");
}

int run_lab_command(const LabFlags& f) {
  namespace lab = allocmark::lab;
  const lab::LabRequest request = lab::lab_request(
      f,
      [&] {
        lab::GuestRun run;
        run.plan = check_guest_run(f.command, f.thp, run.matrix_path);
        run.driver = os::self_exe_path();
        run.worker = worker_path();
        return run;
      },
      default_out_dir("lab-"), command_line());

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
