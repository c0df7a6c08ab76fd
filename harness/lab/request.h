// What a lab guest needs, decided from the checked command: `run`'s plan says which binaries,
// libraries, programs and files go into the initramfs; `exec` names one program; `--under` and
// `--carry` add theirs. The CLI parses flags and prints outcomes; this is the lab's side of it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/lab/runner.h"
#include "harness/matrix/plan.h"

namespace allocmark::lab {

// The flags of `allocmark lab` as given, before anything was looked up.
struct LabArgs {
  std::string topology_file;
  std::optional<std::string> memory_per_node;  // "256M"
  double timeout_s = 1200;
  std::string accel = "tcg";  // tcg, kvm or auto
  std::string thp;            // always, madvise, never or "" (the kernel's)
  std::string kernel;
  std::string out_dir;
  bool keep_work = false;
  std::string under;               // the command the guest's command runs under, as one string
  std::vector<std::string> carry;  // more files and folders for the guest
  std::vector<std::string> command;  // `run ARGS...` or `exec PROGRAM ARGS...`
};

// The host's side of a `run` in the guest: its plan (checked as `allocmark run` checks it), the
// matrix file it read ("" for flags only), and the binaries that run cells here.
struct GuestRun {
  matrix::Plan plan;
  std::string matrix_path;
  std::string driver;  // allocmark itself
  std::string worker;  // allocmark-worker
};

// The whole request: topology, VM options, what runs and everything it needs carried.
// `args.command`'s first word is `run` (checked by `check_guest_run`, which parses the guest's
// flags as `allocmark run` would, after the topology and VM options were) or `exec`. Throws
// matrix::ConfigError or LabError naming the flag or file that is wrong (exit 2), before anything
// is built or booted.
LabRequest lab_request(const LabArgs& args, const std::function<GuestRun()>& check_guest_run,
                       const std::string& default_out_dir, const std::string& host_command);

// A program named for the guest (--under's, exec's): looked up on PATH as the shell would, absolute.
std::string resolve_program(const std::string& word, const std::string& flag);

}  // namespace allocmark::lab
