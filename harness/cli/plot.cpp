// `allocmark plot DIR`: the charts of a results folder (docs/charts.md). The drawing is Python
// (plots/allocmark_plots.py, Debian's matplotlib under /usr/bin/python3) over summary.json and the
// timelines; this command checks the flags and runs the script through harness/report/charts.h
// (shared with `allocmark report`), returning its exit code.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "harness/cli/common.h"
#include "harness/report/charts.h"
#include "harness/results/folder_layout.h"

namespace allocmark::cli {

namespace {

const std::vector<std::string> kKinds{"peak_rss", "timeline", "throughput", "percall", "scaling", "variants", "versions", "contention", "placement"};

std::string kind_list() {
  std::string out;
  for (const auto& k : kKinds) out += (out.empty() ? "" : ", ") + k;
  return out;
}

struct PlotOptions {
  std::string dir;
  std::string out;
  std::string format = "png";
  std::vector<std::string> only;
  std::string baseline;
  bool log = false;
  std::string describe;
};

}  // namespace

Subcommand add_plot_command(CLI::App& app) {
  auto opts = std::make_shared<PlotOptions>();
  auto* plot = app.add_subcommand("plot", "draw the charts of a results folder (docs/charts.md)");
  plot->add_option("dir", opts->dir, "results folder")->required();
  plot->add_option("--out", opts->out, fmt::format("output folder (default DIR/{})", results::layout::kCharts));
  plot->add_option("--format", opts->format, "png (default) or svg");
  plot->add_option("--only", opts->only, "chart kinds, comma-separated: " + kind_list() + " (default all)")
      ->allow_extra_args(false);
  plot->add_option("--baseline", opts->baseline, "allocator throughput is normalised to (default glibc if present, else the first)");
  plot->add_flag("--log", opts->log, "log scale for the normalised throughput");
  plot->add_option("--describe", opts->describe,
                   "also write this JSON file: each chart's size, panels, warnings and caption, and why charts were skipped");
  return {plot, [opts, plot] {
            if (opts->format != "png" && opts->format != "svg")
              throw std::invalid_argument(fmt::format("--format: unknown format '{}' (choose from png, svg)", opts->format));
            auto kinds = split_commas(opts->only, "--only");
            for (const auto& k : kinds)
              if (std::find(kKinds.begin(), kKinds.end(), k) == kKinds.end())
                throw std::invalid_argument(fmt::format("--only: unknown chart kind '{}' (choose from {})", k, kind_list()));
            if (plot->count("--baseline") && opts->baseline.empty())
              throw std::invalid_argument("--baseline: empty allocator name");
            // Before the script runs: a file given as the folder is one line here, not a traceback there.
            if (!opts->out.empty()) check_output_folder(opts->out, "--out", {opts->dir});
            else if (std::filesystem::is_directory(opts->dir)) check_output_folder(results::layout::path_in(opts->dir, results::layout::kCharts),
                                                                            fmt::format("--out (default DIR/{})", results::layout::kCharts), {opts->dir});
            if (plot->count("--describe") && (opts->describe.empty() || std::filesystem::is_directory(opts->describe)))
              throw std::invalid_argument(fmt::format("--describe: '{}' is not a file name (the description is one JSON file)",
                                                      opts->describe));
            report::ChartRequest request{opts->dir, opts->out, opts->format, kinds, opts->baseline, opts->log, opts->describe};
            report::prepare_charts(request);
            print_writer_notice(opts->dir);
            return report::draw_charts(request);
          }};
}

}  // namespace allocmark::cli
