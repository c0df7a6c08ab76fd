// `allocmark compare BEFORE AFTER`: the same cells in two runs, per cell, phase and metric, with
// both runs' spreads and whether each moved by the gate's rule (harness/compare/compare.h).
#include <iostream>

#include "harness/cli/common.h"
#include "harness/compare/compare.h"

namespace allocmark::cli {

Subcommand add_compare_command(CLI::App& app) {
  struct Flags {
    std::string before, after, format = "table";
    std::vector<std::string> metrics_raw;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("compare", "compare two runs of the same cells: what moved, by how much, with both spreads");
  cmd->add_option("before", f->before, "the first results folder (e.g. before an allocator upgrade)")->required();
  cmd->add_option("after", f->after, "the second results folder")->required();
  cmd->add_option("--metric", f->metrics_raw, "peak_rss, rss_over_live, end_rss, ops_per_s (comma separated; default all four)");
  cmd->add_option("--format", f->format, "table, markdown or json (default table)");
  return {cmd, [f] {
            if (f->format != "table" && f->format != "markdown" && f->format != "json")
              throw matrix::ConfigError("--format: '" + f->format + "' (choose from table, markdown, json)");
            std::vector<std::string> all;
            for (const auto& m : gate::gate_metrics()) all.push_back(m.name);
            const std::vector<std::string> metrics = parse_gate_metrics(f->metrics_raw, all);
            std::cout << compare::render_comparison(compare::compare_runs(f->before, f->after, metrics), f->format);
            return static_cast<int>(kExitOk);
          }};
}

}  // namespace allocmark::cli
