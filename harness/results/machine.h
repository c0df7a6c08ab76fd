// What the results of a run depend on besides the allocator: kernel, CPU, NUMA layout, THP and
// overcommit modes, glibc. Read once per run by the driver, written to meta.json.
#pragma once

#include <nlohmann/json.hpp>

// The machine description's fields (meta.json `machine`, each entry of `machines`, a Slurm node's
// machines/HOST.json), one row each: X(key, role). The writer (machine_info, and the run for the
// THP mode it set) and every reader (machine_differences, the gate's fingerprint, the history's,
// the report, the Slurm gathering) take the keys from here. The role says what a field decides:
//   describes  shown, compared by nothing;
//   names      the host: two folders of different hosts are not one machine's, but a gate baseline
//              is made on one host and judges runs of another of its kind, so not fingerprinted;
//   decides    must match for figures to compare (machine_differences, the gate's fingerprint).
// The rows of names and decides in the order machine_differences reports them. `numa` is an object
// (numa_key), compared by its node count.
#define ALLOCMARK_MACHINE_FIELDS(X) \
  X(host, names)                    \
  X(cpu_model, decides)             \
  X(cpus_usable, decides)           \
  X(kernel, decides)                \
  X(thp_enabled, decides)           \
  X(overcommit_memory, decides)     \
  X(glibc_version, decides)         \
  X(arch, describes)                \
  X(cpus_online, describes)         \
  X(memory_bytes, describes)        \
  X(page_size, describes)           \
  X(thp_defrag, describes)          \
  X(thp_enabled_set_by_run, describes) /* only after `run --system-thp` */ \
  X(free_page_reporting, describes)  \
  X(numa, describes)

namespace allocmark::results {

enum class MachineRole { describes, names, decides };
struct MachineField {
  const char* key;
  MachineRole role;
};

// A field's key as a constant (machine_key::cpu_model is "cpu_model").
namespace machine_key {
#define ALLOCMARK_MACHINE_KEY(name, role) inline constexpr const char name[] = #name;
ALLOCMARK_MACHINE_FIELDS(ALLOCMARK_MACHINE_KEY)
#undef ALLOCMARK_MACHINE_KEY
}  // namespace machine_key

// Inside `free_page_reporting`.
namespace page_reporting_key {
inline constexpr const char kActive[] = "active";          // a virtio balloon reports free pages to the hypervisor
inline constexpr const char kBlockBytes[] = "block_bytes";  // the smallest block it reports (page_reporting_order)
}  // namespace page_reporting_key

// Inside `numa`.
namespace numa_key {
inline constexpr const char kNodes[] = "nodes";                      // the node count (1 without libnuma)
inline constexpr const char kDistances[] = "distances";              // node x node, numa_distance
inline constexpr const char kNodeMemoryBytes[] = "node_memory_bytes";  // per node
inline constexpr const char kNote[] = "note";                        // why there is no NUMA layout
}  // namespace numa_key

inline constexpr MachineField kMachineFields[] = {
#define ALLOCMARK_MACHINE_ROW(name, role) {machine_key::name, MachineRole::role},
    ALLOCMARK_MACHINE_FIELDS(ALLOCMARK_MACHINE_ROW)
#undef ALLOCMARK_MACHINE_ROW
};

nlohmann::json machine_info();

// This host's name (uname's nodename): machine_info's host and every record's, which readers
// match to find a record's machine, so both take it from here.
std::string host_name();

// What differs between two machine descriptions in what decides whether their cells are
// comparable (host, CPU model, usable CPUs, kernel, THP and overcommit modes, glibc, NUMA nodes);
// "" when nothing does.
std::string machine_differences(const nlohmann::json& recorded, const nlohmann::json& now);

// For a folder `allocmark lab` brought back from its virtual machine (meta.json `lab`): one line
// saying so, the topology and emulator, and what its figures are worth; "" for any other folder.
std::string lab_notice(const nlohmann::json& meta);

// A virtio balloon's free page reporting under the sysfs root `sysfs` ("/sys"): meta.json's
// machine.free_page_reporting ({"active": bool, "block_bytes" when active}).
nlohmann::json free_page_reporting(const std::string& sysfs, long page_size);

// For a folder any of whose machines hands free memory back to its hypervisor (free_page_reporting.active):
// one line saying what that does to the times of phases that fault memory in; "" otherwise.
std::string page_reporting_notice(const nlohmann::json& meta);

}  // namespace allocmark::results
