#include "harness/results/machine.h"

#include <gnu/libc-version.h>
#include <numa.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "harness/metrics/proc.h"
#include "harness/os/files.h"
#include "harness/results/meta.h"
#include "harness/topology/topology.h"

namespace allocmark::results {
namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string cpu_model() {
  std::istringstream in(os::read_text("/proc/cpuinfo"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "";
}

}  // namespace

// Free page reporting (a virtio balloon with VIRTIO_BALLOON_F_REPORTING, feature bit 5; the
// features file has one '0' or '1' per bit, lowest first): the guest hands blocks that stay free for
// about 2 s back to the hypervisor, whose next touch is a host fault as well as the guest's. The time
// of a phase that faults memory in then depends on what ran before it (docs/benchmarks.md, "Free
// page reporting"). Hyper-V's balloon reports free pages too and is not detected.
nlohmann::json free_page_reporting(const std::string& sysfs, long page_size) {
  namespace k = page_reporting_key;
  constexpr char kBalloon[] = "0x0005";
  constexpr std::size_t kReportingBit = 5;
  bool active = false;
  std::error_code ec;
  for (const auto& device : std::filesystem::directory_iterator(sysfs + "/bus/virtio/devices", ec)) {
    const std::string dir = device.path().string();
    const std::string features = trimmed(os::read_text(dir + "/features"));
    active |= trimmed(os::read_text(dir + "/device")) == kBalloon && features.size() > kReportingBit &&
              features[kReportingBit] == '1';
  }
  nlohmann::json j{{k::kActive, active}};
  // The smallest block it reports (page_reporting_order: -1 until a device registers; at most 10).
  const std::string order = trimmed(os::read_text(sysfs + "/module/page_reporting/parameters/page_reporting_order"));
  if (active && (order.size() == 1 || order == "10") && order.find_first_not_of("0123456789") == std::string::npos)
    j[k::kBlockBytes] = static_cast<std::uint64_t>(page_size) << std::stoi(order);
  return j;
}

std::string host_name() {
  utsname u{};
  uname(&u);
  return u.nodename;
}

nlohmann::json machine_info() {
  namespace key = machine_key;
  nlohmann::json j;
  utsname u{};
  uname(&u);
  j[key::host] = host_name();
  j[key::kernel] = std::string(u.sysname) + " " + u.release + " " + u.version;
  j[key::arch] = u.machine;
  j[key::cpu_model] = cpu_model();
  j[key::cpus_online] = sysconf(_SC_NPROCESSORS_ONLN);
  // The CPUs this process may run on (taskset, cpusets), which is what the workers get.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  j[key::cpus_usable] = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
  j[key::memory_bytes] = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  j[key::page_size] = sysconf(_SC_PAGESIZE);
  j[key::thp_enabled] = metrics::thp_enabled_mode();
  j[key::thp_defrag] = metrics::thp_defrag_mode();
  j[key::overcommit_memory] = trimmed(os::read_text("/proc/sys/vm/overcommit_memory"));
  j[key::glibc_version] = gnu_get_libc_version();
  j[key::free_page_reporting] = free_page_reporting("/sys", sysconf(_SC_PAGESIZE));
  nlohmann::json numa;
  if (numa_available() >= 0) {
    int nodes = numa_max_node() + 1;
    numa[numa_key::kNodes] = nodes;
    for (int a = 0; a < nodes; ++a) {
      nlohmann::json row = nlohmann::json::array();
      for (int b = 0; b < nodes; ++b) row.push_back(numa_distance(a, b));
      numa[numa_key::kDistances].push_back(row);
      long long free_bytes = 0;
      numa[numa_key::kNodeMemoryBytes].push_back(numa_node_size64(a, &free_bytes));
    }
  } else {
    numa[numa_key::kNodes] = 1;
    numa[numa_key::kNote] = "libnuma: NUMA not available on this kernel";
  }
  j[key::numa] = numa;
  return j;
}

std::string machine_differences(const nlohmann::json& recorded, const nlohmann::json& now) {
  std::string out;
  for (const auto& [field, role] : kMachineFields) {
    if (role == MachineRole::describes) continue;
    nlohmann::json a = recorded.value(field, nlohmann::json()), b = now.value(field, nlohmann::json());
    if (a != b) out += (out.empty() ? "" : "; ") + std::string(field) + " " + a.dump() + " recorded, " + b.dump() + " now";
  }
  auto nodes = [](const nlohmann::json& m) { return m.contains(machine_key::numa) ? m[machine_key::numa].value(numa_key::kNodes, 1) : 1; };
  if (nodes(recorded) != nodes(now))
    out += (out.empty() ? "" : "; ") + std::string("NUMA nodes ") + std::to_string(nodes(recorded)) + " recorded, " +
           std::to_string(nodes(now)) + " now";
  return out;
}

std::string lab_notice(const nlohmann::json& recorded) {
  namespace k = meta::lab_entry;
  namespace topo = topology::json_key;
  if (!recorded.is_object() || !recorded.contains(meta::kLab) || !recorded[meta::kLab].is_object()) return "";
  const nlohmann::json& lab = recorded[meta::kLab];
  auto text = [](const nlohmann::json& in, const char* key, const char* otherwise) {
    return in.contains(key) && in[key].is_string() ? in[key].get<std::string>() : std::string(otherwise);
  };
  std::string name = "?";
  std::size_t nodes = 0;
  if (lab.contains(k::kTopology) && lab[k::kTopology].is_object()) {
    const nlohmann::json& t = lab[k::kTopology];
    name = t.value(topo::kName, "?");
    if (t.contains(topo::kNodes) && t[topo::kNodes].is_array()) nodes = t[topo::kNodes].size();
  }
  return "lab results from a virtual machine (topology " + name + ", " + std::to_string(nodes) + " nodes, " +
         text(lab, k::kAccel, "?") + "): " + text(lab, k::kNote, "timings under emulation are meaningless");
}

std::string page_reporting_notice(const nlohmann::json& meta) {
  namespace k = page_reporting_key;
  // Any machine the cells ran on (Slurm's batch nodes and merged folders' hosts are in `machines`).
  bool active = false;
  for (const auto& [host, machine] : meta::machines(meta)) {
    if (!machine.is_object() || !machine.contains(machine_key::free_page_reporting)) continue;
    const nlohmann::json& reporting = machine[machine_key::free_page_reporting];
    active |= reporting.is_object() && reporting.contains(k::kActive) && reporting[k::kActive] == true;
  }
  if (!active) return "";
  return "the machine these cells ran on hands memory that stays free for about 2 s back to its hypervisor "
         "(free page reporting), "
         "and a later first touch of it is a host fault as well: the times of phases that fault memory in depend "
         "on what ran just before them (up to 3x seen), so compare them across allocators with care "
         "(docs/benchmarks.md, \"Free page reporting\")";
}

}  // namespace allocmark::results
