// `allocmark show DIR`: a results folder as a table of medians and spreads.
#include <iostream>

#include "harness/cli/common.h"
#include "harness/results/results_dir.h"
#include "harness/results/show.h"

namespace allocmark::cli {

Subcommand add_show_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* show = app.add_subcommand("show", "summarise a results folder as a table");
  show->add_option("dir", *dir, "results folder")->required();
  return {show, [dir] {
            std::cout << results::render_table(results::load_records(*dir));
            return kExitOk;
          }};
}

}  // namespace allocmark::cli
