// `allocmark lab`'s body: find qemu, a kernel and busybox, build the guest's initramfs with the
// harness and the allocators it needs, boot the topology, forward the command's output, and bring
// its results folder back marked as lab results.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/lab/vm.h"
#include "harness/topology/topology.h"

namespace allocmark::lab {

// The guest did not boot, did not finish in time, or its results did not come back intact. The
// message carries the tail of the guest's console. Exit code 3.
class LabFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the lab needs from the host, each found or a LabError naming its Debian package.
struct Prerequisites {
  std::string qemu;     // qemu-system-x86_64 (qemu-system-x86)
  std::string kernel;   // /boot/vmlinuz-* (linux-image-amd64)
  std::string busybox;  // busybox-static
};
// `kernel` given: that image; else the newest /boot/vmlinuz-*.
Prerequisites find_prerequisites(const std::string& kernel);

struct LabRequest {
  topology::Topology topology;
  std::string topology_file;
  VmOptions vm;  // kernel, qemu, accel, memory, THP; the logs and initrd are the lab's own
  bool accel_auto = false;  // try KVM, fall back to TCG when qemu cannot start it
  double timeout_s = 1200;
  // What runs in the guest: `program` (carried with its libraries) with `guest_args`. For
  // allocmark's `run` the lab adds `--out` and marks meta.json; any other program finds the folder
  // that comes back in $ALLOCMARK_LAB_OUT, and lab.json is written beside what it put there.
  std::string program;
  std::vector<std::string> guest_args;
  bool allocmark_run = true;
  std::vector<std::string> carry_elves;  // binaries and libraries, with their shared libraries
  std::vector<std::string> carry_files;  // other files (a matrix file)
  std::vector<std::string> carry_folders;
  std::vector<std::string> make_folders;  // empty folders the command needs (a program's cwd)
  std::vector<std::string> carry_extra;  // what --carry added (for meta.json)
  std::vector<std::pair<std::string, std::string>> guest_env;
  std::vector<std::string> guest_prefix;  // the command allocmark runs under (numactl ...), absolute argv[0]
  std::string out_dir;                   // where the results folder lands on the host
  std::string host_command;              // for meta.json
  bool keep_work = false;                // keep the initramfs and the consoles (for debugging the lab)
};

struct LabOutcome {
  int guest_exit = -1;   // the guest command's exit code
  bool results = false;  // a results folder came back (in out_dir)
  std::string accel;     // what actually ran
  bool stopped_by_timeout = false;  // the guest's deadline stopped the command; what it finished came back
};

// Boots, runs, brings back. Throws LabError (bad request, missing piece) before booting and
// LabFailed when the guest fails. SIGINT stops the guest; the outcome then has guest_exit 130.
// The guest stops its command a margin before timeout_s (guest_margin_s) and sends back what it
// finished (stopped_by_timeout); past timeout_s itself qemu is stopped and nothing comes back.
LabOutcome run_lab(const LabRequest& request);

}  // namespace allocmark::lab
