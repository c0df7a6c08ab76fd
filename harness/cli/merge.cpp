// `allocmark merge DIR... -o OUT`: several results folders made one (harness/runner/merge.h says
// how and what it refuses); this file parses its flags and says what it did.
#include <fmt/format.h>

#include <iostream>

#include "harness/cli/common.h"
#include "harness/runner/merge.h"

namespace allocmark::cli {
namespace {

int merge(const std::vector<std::string>& dirs, const std::string& out) {
  const runner::MergeOutcome m = runner::merge_folders(dirs, out, command_line());
  if (m.repeated)
    std::cerr << fmt::format("allocmark: {} record{} appear{} in more than one folder; counted once\n", m.repeated,
                             m.repeated == 1 ? "" : "s", m.repeated == 1 ? "s" : "");
  if (!m.id_collisions.empty()) std::cerr << "allocmark: warning: " << m.id_collisions << "\n";
  std::cout << fmt::format("merged {} cells from {} folders ({} host{}) into {}\n", m.cells, m.folders, m.hosts,
                           m.hosts == 1 ? "" : "s", out);
  return kExitOk;
}

}  // namespace

Subcommand add_merge_command(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("merge", "combine results folders (other hosts, clusters) into one; hosts are never pooled");
  cmd->add_option("dirs", *dirs, "results folders")->required();
  cmd->add_option("-o,--out", *out, "the merged folder (must not exist)")->required();
  return {cmd, [dirs, out] { return merge(*dirs, *out); }};
}

}  // namespace allocmark::cli
