// `allocmark topology [FILE]`: the running kernel's NUMA topology in the topology file format
// (configs/topologies/*.toml), so a machine's layout can be saved and booted in the lab; with FILE,
// the file validated and printed back as the harness reads it. A malformed file exits 2 with the
// TopologyError (file:line:column).
#include <fmt/format.h>

#include <iostream>

#include "harness/cli/common.h"
#include "harness/results/folder_layout.h"
#include "harness/topology/topology.h"

namespace allocmark::cli {

Subcommand add_topology_command(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("topology", "print this machine's NUMA topology as a topology file (or check and print FILE)");
  cmd->add_option("file", *file, "a topology file (configs/topologies/*.toml) to validate and print");
  cmd->add_flag("--json", *as_json, fmt::format("print it as {} keeps it instead", results::layout::kMeta));
  return {cmd, [file, as_json] {
            const topology::Topology t = file->empty() ? topology::detect() : topology::load_topology_file(*file, "topology");
            if (*as_json)
              std::cout << topology::to_json(t).dump(2) << "\n";
            else
              std::cout << topology::to_toml(t);
            return kExitOk;
          }};
}

}  // namespace allocmark::cli
