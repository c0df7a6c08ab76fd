// `allocmark compare BEFORE AFTER`: the same cells in two runs, per cell, phase and metric, with
// both runs' spreads and whether each moved by the gate's rule (harness/compare/compare.h). What it
// produces is the comparison on stdout; --report and --charts write extras, so it has no -o of its
// own (-o names what a command produces: run's folder, baseline's and report's file).
#include <filesystem>
#include <iostream>

#include "harness/cli/common.h"
#include "harness/compare/compare.h"
#include "harness/report/charts.h"
#include "harness/report/compare_report.h"
#include "harness/results/results_dir.h"

namespace allocmark::cli {

Subcommand add_compare_command(CLI::App& app) {
  struct Flags {
    std::string before, after, format = "table", charts, chart_format = "png", html, html_by_old_flag;
    std::vector<std::string> metrics_raw;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("compare", "compare two runs of the same cells and print what moved, by how much, with both "
                                            "spreads (--format); --report writes it as an HTML page, --charts as charts");
  cmd->add_option("before", f->before, "the first results folder (e.g. before an allocator upgrade)")->required();
  cmd->add_option("after", f->after, "the second results folder")->required();
  cmd->add_option("--metric", f->metrics_raw,
                  results::metric_names(results::gated_metrics()) + " (comma separated; default all of them)");
  cmd->add_option("--format", f->format,
                  "how stdout gives the comparison: table (a terminal; the summary line last), markdown (a pull-request "
                  "comment: the summary line first, unmoved figures folded) or json (default table)");
  cmd->add_option("--report", f->html,
                  "also write the comparison as a self-contained HTML page, this file (table, chart 7, RSS overlays)");
  // Before --report, -o named the page: kept, with a note, since scripts pass it. Hidden from the
  // help, so the two are checked against each other below rather than by CLI11's excludes(),
  // which would print an empty "Excludes:" beside --report.
  cmd->add_option("-o,--out", f->html_by_old_flag, "the same as --report (the old name)")->group("");
  cmd->add_option("--charts", f->charts, "also draw chart 7 into this folder (compare.json, compare-*.png; docs/charts.md)");
  cmd->add_option("--chart-format", f->chart_format, "png (default) or svg");
  return {cmd, [f] {
            if (f->format != "table" && f->format != "markdown" && f->format != "json")
              throw matrix::ConfigError("--format: '" + f->format + "' (choose from table, markdown, json)");
            std::vector<std::string> all;
            for (const auto& m : gate::gate_metrics()) all.push_back(m.name);
            const std::vector<std::string> metrics = parse_gate_metrics(f->metrics_raw, all);
            if (f->chart_format != "png" && f->chart_format != "svg")
              throw matrix::ConfigError("--chart-format: '" + f->chart_format + "' (choose from png, svg)");
            if (!f->html_by_old_flag.empty() && !f->html.empty())
              throw matrix::ConfigError("-o and --report: both name the HTML page; give it once, as --report");
            if (!f->html_by_old_flag.empty()) {
              std::cerr << "allocmark: note: compare -o: now called --report (the old name still works)\n";
              f->html = f->html_by_old_flag;
            }
            if (!f->html.empty()) check_output_file(f->html, f->html_by_old_flag.empty() ? "--report" : "-o", {f->before, f->after});
            if (!f->charts.empty()) check_output_folder(f->charts, "--charts", {f->before, f->after});
            for (const auto& dir : {f->before, f->after}) print_writer_notice(dir);
            const compare::Comparison comparison = compare::compare_runs(f->before, f->after, metrics);
            print_time_notes({f->before, f->after});
            std::cout << compare::render_comparison(comparison, f->format);
            if (f->charts.empty() && f->html.empty()) return static_cast<int>(kExitOk);
            for (const auto& dir : {f->before, f->after}) report::ensure_summaries(dir);
            if (!f->html.empty()) {
              report::CompareReport page = report::build_compare_report(comparison);
              results::write_file_atomically(f->html, page.html);
              for (const auto& e : page.chart_errors) std::cerr << "allocmark: warning: chart failed: " << e << "\n";
              std::cerr << "allocmark: wrote " << f->html << "\n";
              if (f->charts.empty()) return page.chart_errors.empty() ? static_cast<int>(kExitOk) : static_cast<int>(kExitCellsFailed);
            }
            std::filesystem::create_directories(f->charts);
            const std::string json_path = f->charts + "/compare.json";
            results::write_file_atomically(json_path, compare::comparison_json(comparison).dump(2) + "\n");
            std::cout.flush();
            // The chart lines go to stderr so that --format json on stdout stays one document.
            return report::run_plots_script("compare_plots.py", {json_path, "--out", f->charts, "--format", f->chart_format, "--quiet"});
          }};
}

}  // namespace allocmark::cli
