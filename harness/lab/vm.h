// The lab's virtual machine: the qemu command line that gives a guest kernel a topology's nodes,
// CPUs, memory and distances. Pure (no file is read, nothing is started), so it is unit-tested
// against the topology files themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/topology/topology.h"

namespace allocmark::lab {

// A topology or setting the lab cannot boot, or a missing prerequisite (qemu, kernel, busybox):
// the message names the problem and, for a missing piece, the Debian package. Exit code 2.
class LabError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The emulators: "tcg" is software emulation (works everywhere, timings meaningless), "kvm" the
// hardware's (fast, but needs a working /dev/kvm; nested setups often fail at start).
enum class Accel { kTcg, kKvm };
const char* accel_name(Accel a);

struct VmOptions {
  std::string qemu = "qemu-system-x86_64";
  std::string kernel;  // bzImage, e.g. /boot/vmlinuz-6.1.0-57-amd64
  std::string initrd;  // the initramfs cpio
  Accel accel = Accel::kTcg;
  std::optional<std::uint64_t> memory_per_node;  // replaces every node's `memory`
  std::string console_log;                       // ttyS0: the kernel's console and the command's output
  std::string data_log;                          // ttyS1: the results coming back (lab/init_script.h)
  std::string thp;                               // "" (the kernel's default), always, madvise or never
  std::string guest_arguments;                   // more kernel command line words for /init (its deadline)
};

// Memory a node gets in the guest: the override, else the topology's.
std::uint64_t node_memory(const topology::Node& node, const VmOptions& options);

// The guest kernel's command line: consoles, no reboot loop on panic, NUMA balancing off from
// the start (move_pages must see pages where the allocator put them), the THP mode if given.
std::string kernel_command_line(const VmOptions& options);

// argv for qemu: one memory backend and `-numa node` per node, `-numa dist` for every ordered
// pair of distinct nodes, -smp for every CPU and -m for the sum. Throws LabError for what qemu
// cannot express (CPU or node numbers with gaps, memory not in whole MiB).
std::vector<std::string> qemu_command(const topology::Topology& t, const VmOptions& options);

// "0-2,5" -> {"0-2", "5"}: qemu takes one `cpus=` per contiguous range.
std::vector<std::string> cpu_ranges(const std::vector<int>& sorted_cpus);

}  // namespace allocmark::lab
