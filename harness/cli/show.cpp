// `allocmark show DIR...`: results folders grouped and summarised by the results model, written
// by one of its reporters (table, csv, json, markdown). Reader warnings go to stderr.
#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <stdexcept>

#include "harness/cli/common.h"
#include "harness/history/bmf.h"
#include "harness/history/ingest.h"
#include "harness/results/model.h"
#include "harness/results/reporters/reporter.h"

namespace allocmark::cli {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Every name of `items` (comma-separated) through `lookup`; an unknown one is a usage error
// naming the flag and the valid choices.
template <class T, class Lookup>
std::vector<T> parse_names(const std::vector<std::string>& items, const std::string& flag, const std::string& what,
                           const std::vector<std::string>& choices, Lookup lookup) {
  std::vector<T> out;
  for (const auto& name : split_commas(items, flag)) {
    auto value = lookup(name);
    if (!value)
      throw std::invalid_argument(fmt::format("{}: unknown {} '{}' (choose from {})", flag, what, name, joined(choices)));
    if (std::find(out.begin(), out.end(), *value) != out.end())
      throw std::invalid_argument(fmt::format("{}: '{}' is listed twice", flag, name));
    out.push_back(*value);
  }
  return out;
}

struct ShowOptions {
  std::vector<std::string> dirs;
  std::string format = "table";
  std::vector<std::string> by;
  std::vector<std::string> metrics;
  std::vector<std::string> workload_metrics;
  std::vector<std::string> workloads, allocators, threads;
};

// Bencher Metric Format of the ok cells the filter keeps (history/bmf.h): the gated metrics unless
// --metric names others.
std::string bmf_of(const allocmark::results::Model& model, const allocmark::results::ReportOptions& report) {
  namespace rs = allocmark::results;
  std::vector<history::CellRun> cells = history::model_cells(model).cells;
  auto in = [](const auto& list, const auto& v) { return list.empty() || std::find(list.begin(), list.end(), v) != list.end(); };
  std::erase_if(cells, [&](const history::CellRun& c) {
    return !in(report.filter.workloads, c.cell.workload) || !in(report.filter.allocators, c.cell.allocator) ||
           !in(report.filter.threads, c.cell.threads);
  });
  std::vector<std::string> names;
  for (rs::Metric m : report.metrics.empty() ? rs::gated_metrics() : report.metrics)
    names.emplace_back(rs::metric_row(m).name);
  return history::bmf_text(history::bmf_of_cells(cells, names));
}

}  // namespace

Subcommand add_show_command(CLI::App& app) {
  namespace rs = allocmark::results;
  auto opts = std::make_shared<ShowOptions>();
  std::vector<std::string> dimension_names, metric_names;
  for (auto d : rs::all_dimensions()) dimension_names.emplace_back(rs::dimension_name(d));
  for (const auto& m : rs::metric_table()) metric_names.emplace_back(m.name);

  auto* show = app.add_subcommand("show", "summarise results folders: medians and min-max spreads per group");
  show->add_option("dirs", opts->dirs, "results folders (several are read as one: groups never mix hosts)")->required();
  show->add_option("--format", opts->format,
                   "table (default), csv, json, markdown or bmf (Bencher Metric Format: a benchmark per cell and phase)");
  show->add_option("--by", opts->by, "group by, comma-separated: " + joined(dimension_names) +
                                         " (default workload,threads,allocator,phase)")
      ->allow_extra_args(false);  // one comma-separated list per flag: what follows is a folder
  show->add_option("--metric", opts->metrics, "metrics, comma-separated: " + joined(metric_names) +
                                                  " (default: peak RSS, RSS-idle/live and ops/s in table and markdown; all in csv and json)")
      ->allow_extra_args(false);
  show->add_option("--workload-metric", opts->workload_metrics,
                   "workload metrics (a phase's workload_metrics, e.g. percall's ns_per_op.malloc_free_64), "
                   "comma-separated names or prefixes ending in * (ns_per_op.*); groupings by phase only "
                   "(default: none in table and markdown, all in csv and json)")
      ->allow_extra_args(false);
  show->add_option("--workload", opts->workloads, "only these workloads, comma-separated")->allow_extra_args(false);
  show->add_option("--allocator", opts->allocators, "only these allocators (or variants: jemalloc:bg), comma-separated")
      ->allow_extra_args(false);
  show->add_option("--threads", opts->threads, "only these thread counts, comma-separated")->allow_extra_args(false);
  return {show, [opts, dimension_names, metric_names] {
            const bool bmf = opts->format == "bmf";
            if (bmf && (!opts->by.empty() || !opts->workload_metrics.empty()))
              throw std::invalid_argument("--format bmf: a benchmark per cell and phase; without --by and --workload-metric");
            if (!bmf && !rs::make_reporter(opts->format))
              throw std::invalid_argument(fmt::format("--format: unknown format '{}' (choose from {}, bmf)", opts->format,
                                                      joined(rs::reporter_formats())));
            rs::ReportOptions report;
            if (!opts->by.empty())
              report.by = parse_names<rs::Dimension>(opts->by, "--by", "dimension", dimension_names,
                                                     rs::dimension_from_name);
            report.metrics = parse_names<rs::Metric>(opts->metrics, "--metric", "metric", metric_names,
                                                     // show never took the gate's old names: they stay unknown here.
                                                     [](const std::string& name) {
                                                       bool old_name = false;
                                                       auto m = rs::metric_from_name(name, &old_name);
                                                       return old_name ? std::nullopt : m;
                                                     });
            report.workload_metrics = split_commas(opts->workload_metrics, "--workload-metric");
            report.filter.workloads = split_commas(opts->workloads, "--workload");
            report.filter.allocators = split_commas(opts->allocators, "--allocator");
            for (const auto& t : split_commas(opts->threads, "--threads")) {
              int n = 0;
              auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
              if (ec != std::errc() || end != t.data() + t.size() || n < 1)
                throw std::invalid_argument(fmt::format("--threads: '{}' is not a thread count (expected a whole number >= 1)", t));
              report.filter.threads.push_back(n);
            }
            rs::Model model = rs::Model::load(opts->dirs);
            print_reading_notes(model);
            if (std::string problem = model.unknown_filter_value(report.filter); !problem.empty())
              throw std::invalid_argument(problem);
            print_time_notes(opts->dirs);
            if (bmf) {
              std::cout << bmf_of(model, report);
              return kExitOk;
            }
            std::vector<std::string> notes;
            std::string text = rs::render_report(model, opts->format, report, &notes);
            for (const auto& n : notes) std::cerr << "allocmark show: warning: " << n << "\n";
            std::cout << text;
            return kExitOk;
          }};
}

}  // namespace allocmark::cli
