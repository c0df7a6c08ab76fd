#include "allocators/numap/tests/topology_support.h"

#include <stdexcept>

namespace numap::testing {

Topology from_shared(const allocmark::topology::Topology& shared) {
  if (shared.nodes.empty() || shared.nodes.size() > static_cast<std::size_t>(kMaxNodes))
    throw std::invalid_argument(shared.source + ": numap takes 1.." + std::to_string(kMaxNodes) + " nodes");
  Topology t;
  t.count = static_cast<int>(shared.nodes.size());
  for (int c = 0; c < kMaxCpus; ++c) t.cpu_node[c] = -1;
  for (int i = 0; i < t.count; ++i) {
    const auto& node = shared.nodes[static_cast<std::size_t>(i)];
    t.os_node[i] = node.id;
    t.capacity[i] = node.memory_bytes;
    for (int j = 0; j < t.count; ++j) t.distance[i][j] = static_cast<std::uint8_t>(shared.distance(i, j));
    for (int cpu : node.cpus)
      if (cpu >= 0 && cpu < kMaxCpus) t.cpu_node[cpu] = static_cast<std::int16_t>(i);
  }
  t.allowed = t.count >= 64 ? ~0ull : (1ull << t.count) - 1;
  return t;
}

Topology load_config(const std::string& name) {
  return from_shared(allocmark::topology::load_topology_file(std::string(NUMAP_SOURCE_DIR) + "/configs/topologies/" +
                                                             name + ".toml"));
}

}  // namespace numap::testing
