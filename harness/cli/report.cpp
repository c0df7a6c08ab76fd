// `allocmark report DIR [-o FILE.html]`: one self-contained HTML page of a results folder
// (harness/report/run_report.h; docs/report.md), written atomically; prints its path.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "harness/cli/common.h"
#include "harness/report/run_report.h"
#include "harness/results/results_dir.h"
#include "harness/results/folder_layout.h"

namespace allocmark::cli {

namespace {

namespace fs = std::filesystem;

struct ReportOptions {
  std::string dir;
  std::string out;
};

}  // namespace

Subcommand add_report_command(CLI::App& app) {
  auto opts = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report", "one self-contained HTML report of a results folder (docs/report.md)");
  cmd->add_option("dir", opts->dir, "results folder")->required();
  cmd->add_option("-o,--out", opts->out, fmt::format("the HTML file to write (default DIR/{})", results::layout::kReport));
  return {cmd, [opts] {
            if (!fs::is_directory(opts->dir))
              throw std::invalid_argument(fmt::format("{}: no such folder", opts->dir));
            namespace lay = results::layout;
            results::check_readable_file(lay::path_in(opts->dir, lay::kResults));
            if (!fs::is_regular_file(lay::path_in(opts->dir, lay::kResults)))
              throw std::invalid_argument(fmt::format("{}: no {} (not a results folder)", opts->dir, lay::kResults));
            std::string out = opts->out.empty() ? lay::path_in(opts->dir, lay::kReport) : opts->out;
            check_output_file(out, "-o", {opts->dir});
            print_writer_notice(opts->dir);  // the page says it too, at the top
            report::RunReport report = report::build_run_report(opts->dir, out);
            results::write_file_atomically(out, report.html);
            for (const auto& e : report.chart_errors) std::cerr << "allocmark: warning: chart failed: " << e << "\n";
            std::cout << out << "\n";
            // A chart that failed to draw is said on the page; the exit code says it too.
            return report.chart_errors.empty() ? kExitOk : kExitCellsFailed;
          }};
}

}  // namespace allocmark::cli
