// NUMA topology as the harness, the lab and numap's tests see it: nodes, their CPUs, memory and
// the distance matrix. One format on disk (configs/topologies/*.toml, read by load_topology_file)
// and one in results (to_json, kept in meta.json), so a topology a run detected can be written as
// a file and booted in the lab, and a lab run's meta.json shows the topology it was given.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace allocmark::topology {

// A malformed topology file or value; the message names the file, line and column. The CLI turns
// it into exit code 2.
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The kernel's distance to a node itself (LOCAL_DISTANCE in include/linux/topology.h); the ACPI
// SLIT gives remote distances in 11..254.
inline constexpr int kLocalDistance = 10;
inline constexpr int kMaxDistance = 254;
inline constexpr int kMaxNodes = 64;  // numap's limit (allocators/numap/topology.h)

struct Node {
  int id = 0;                  // the kernel's node number
  std::vector<int> cpus;       // ascending; empty for a memory-only node
  std::uint64_t memory_bytes = 0;
  std::vector<int> distances;  // to every node, in the order of Topology::nodes
};

struct Topology {
  std::string name;         // the file's `name`, or "detected"
  std::string description;  // free text from the file
  std::string source;       // "configs/topologies/seed-8node.toml" or "sysfs:/sys"
  std::vector<Node> nodes;  // ascending id

  int distance(int from_index, int to_index) const { return nodes.at(from_index).distances.at(to_index); }
  // Index in `nodes` of the node holding `cpu`, -1 if none does.
  int node_index_of_cpu(int cpu) const;
  // Index in `nodes` of the kernel node `id`, -1 if absent.
  int index_of_node(int id) const;
  int cpu_count() const;
};

// Reads and validates a topology file. Every problem (unknown key, missing field, a CPU in two
// nodes, asymmetric or missing distances, a non-local self distance, bad sizes) is a
// TopologyError naming path:line:column. A path that is not a readable regular file (a fifo, a
// folder, a missing file: units::input_file_problem) is a TopologyError "WHAT: ..." before it is read.
Topology load_topology_file(const std::string& path, const std::string& what = "topology file");

// Validates a topology however it was built; `where` prefixes messages. Throws TopologyError.
void validate(const Topology& t, const std::string& where);

// The running kernel's topology from <root>/devices/system/node (root "/sys" normally; tests pass
// a fake tree). A kernel without NUMA (no node directory) gives one node 0 holding every online
// CPU and MemTotal from /proc/meminfo.
Topology detect(const std::string& sysfs_root = "/sys");

// Its JSON (meta.json's `topology`, the lab entry's), whose keys a reader of it names by these.
namespace json_key {
inline constexpr const char* kName = "name";
inline constexpr const char* kSource = "source";
inline constexpr const char* kNodes = "nodes";  // one object a node: id, cpus, memory_bytes, distances
}  // namespace json_key
nlohmann::json to_json(const Topology& t);
// The file format, so a detected topology can be saved and booted in the lab.
std::string to_toml(const Topology& t);

// Kernel CPU/node lists ("0-3,8,10-11"); parse throws std::invalid_argument naming the bad item.
std::vector<int> parse_list(std::string_view text);
std::string format_list(const std::vector<int>& sorted_ids);

}  // namespace allocmark::topology
