#include "harness/lab/vm.h"

#include <fmt/format.h>

namespace allocmark::lab {

const char* accel_name(Accel a) { return a == Accel::kKvm ? "kvm" : "tcg"; }

std::uint64_t node_memory(const topology::Node& node, const VmOptions& options) {
  return options.memory_per_node.value_or(node.memory_bytes);
}

std::vector<std::string> cpu_ranges(const std::vector<int>& sorted_cpus) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < sorted_cpus.size();) {
    std::size_t j = i;
    while (j + 1 < sorted_cpus.size() && sorted_cpus[j + 1] == sorted_cpus[j] + 1) ++j;
    out.push_back(i == j ? std::to_string(sorted_cpus[i]) : fmt::format("{}-{}", sorted_cpus[i], sorted_cpus[j]));
    i = j + 1;
  }
  return out;
}

std::string kernel_command_line(const VmOptions& options) {
  // loglevel=4 keeps the kernel's chatter (and its interleaving with the command's output) off the
  // console while panics and oopses still show; panic=-1 with -no-reboot turns a panic into qemu
  // exiting instead of a hang until the timeout.
  std::string line = "console=ttyS0 loglevel=4 panic=-1 numa_balancing=disable";
  if (!options.thp.empty()) line += " transparent_hugepage=" + options.thp;
  if (!options.guest_arguments.empty()) line += " " + options.guest_arguments;
  return line;
}

std::vector<std::string> qemu_command(const topology::Topology& t, const VmOptions& options) {
  const std::string where = t.source.empty() ? t.name : t.source;
  // qemu numbers a guest's CPUs 0..smp-1 and its nodes by nodeid; a topology with gaps (offline
  // CPUs in a detected one) would boot as another topology than the file says, so it is refused.
  int cpus = 0;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    if (t.nodes[i].id != static_cast<int>(i))
      throw LabError(fmt::format("{}: the lab boots nodes numbered 0..{} without gaps, not node {}", where,
                                 t.nodes.size() - 1, t.nodes[i].id));
    cpus += static_cast<int>(t.nodes[i].cpus.size());
  }
  if (cpus == 0) throw LabError(where + ": no node has a CPU");
  for (int cpu = 0; cpu < cpus; ++cpu)
    if (t.node_index_of_cpu(cpu) < 0)
      throw LabError(fmt::format("{}: the lab boots CPUs numbered 0..{} without gaps; CPU {} is in no node", where, cpus - 1, cpu));

  constexpr std::uint64_t kMiB = 1 << 20;
  std::uint64_t total_mib = 0;
  for (const auto& n : t.nodes) {
    const std::uint64_t bytes = node_memory(n, options);
    if (bytes == 0 || bytes % kMiB != 0)
      throw LabError(fmt::format("{}: node {} memory of {} bytes: the lab needs whole MiB", where, n.id, bytes));
    total_mib += bytes / kMiB;
  }

  std::vector<std::string> argv{options.qemu,
                                "-accel", accel_name(options.accel),
                                "-cpu", options.accel == Accel::kKvm ? "host" : "max",
                                "-smp", std::to_string(cpus),
                                "-m", fmt::format("{}M", total_mib),
                                "-nodefaults", "-display", "none", "-monitor", "none", "-no-reboot",
                                "-kernel", options.kernel,
                                "-initrd", options.initrd,
                                "-append", kernel_command_line(options),
                                "-serial", "file:" + options.console_log,
                                "-serial", "file:" + options.data_log};
  for (const auto& n : t.nodes) {
    argv.push_back("-object");
    argv.push_back(fmt::format("memory-backend-ram,id=mem{},size={}M", n.id, node_memory(n, options) / kMiB));
    std::string node = fmt::format("node,nodeid={}", n.id);
    for (const auto& range : cpu_ranges(n.cpus)) node += ",cpus=" + range;
    node += fmt::format(",memdev=mem{}", n.id);
    argv.push_back("-numa");
    argv.push_back(node);
  }
  // Every ordered pair: qemu fills the reverse of a pair given once, but saying both keeps the
  // command a plain copy of the file's matrix (which validation already proved symmetric).
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    for (std::size_t j = 0; j < t.nodes.size(); ++j) {
      if (i == j) continue;
      argv.push_back("-numa");
      argv.push_back(fmt::format("dist,src={},dst={},val={}", t.nodes[i].id, t.nodes[j].id, t.distance(i, j)));
    }
  return argv;
}

}  // namespace allocmark::lab
