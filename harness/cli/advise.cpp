// `allocmark advise -- COMMAND ARGS`: runs the command as a program cell under every installed
// allocator and the standard variants (through `run`), then says what to run it with
// (results/advice.h: the backends ranked, variants only where they beat their own backend, the
// default kept unless something is better beyond noise, the setting to apply), and writes the run's
// HTML report (harness/report/run_report.h) with that advice on top.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "harness/matrix/plan.h"
#include "harness/cli/common.h"
#include "harness/cli/run.h"
#include "harness/matrix/config.h"
#include "harness/matrix/program.h"
#include "harness/report/run_report.h"
#include "harness/results/advice.h"
#include "harness/results/folder_layout.h"
#include "harness/results/results_dir.h"
#include "harness/results/safe_text.h"

namespace allocmark::cli {
namespace {

// The backends' plain configurations plus the variants a production service would try first
// (configs/variants.toml): glibc with fewer arenas and trimming, jemalloc's background purging,
// tcmalloc's release, mimalloc's eager commit. Backends that are not installed are skipped.
const std::vector<std::string> kStandardAllocators{"glibc",      "glibc:arena2",     "glibc:trim",
                                                   "jemalloc",   "jemalloc:bg",      "tcmalloc",
                                                   "tcmalloc:release", "mimalloc",   "mimalloc:eager", "numap"};

struct AdviseFlags {
  std::vector<std::string> command, allocators;
  SettingTexts settings;  // --reps, --timeout
  std::string out_dir;
  std::string report;  // the HTML file; default OUT/report.html
  bool no_report = false;
};

std::string program_name(const std::string& exe) {
  std::string name = std::filesystem::path(exe).filename().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return name.empty() ? "program" : name;
}

// The recommendation is already printed: a report that fails (charts, a full disk) is a warning,
// never a lost answer or a changed exit code.
void write_report(const std::string& dir, const results::Advice& advice, const std::string& path) {
  try {
    report::RunReport page = report::build_run_report(dir, path, &advice);
    results::write_file_atomically(path, page.html);
    for (const auto& e : page.chart_errors) std::cerr << "allocmark: warning: report chart failed: " << e << "\n";
    std::cout << "\nreport: " << path << "\n";
  } catch (const std::exception& e) {
    std::cerr << "allocmark: warning: the report was not written (" << e.what() << "); the recommendation above stands\n";
  }
}

int advise(const AdviseFlags& a) {
  if (a.command.empty()) throw matrix::ConfigError("advise: no command given (allocmark advise -- COMMAND ARGS)");
  RunFlags f;
  f.programs = {program_name(a.command[0]) + "=" + matrix::join_command_words(a.command)};
  if (!a.allocators.empty()) {
    f.allocators_raw = a.allocators;
  } else {
    const matrix::MatrixFile variants = load_variants();
    for (const auto& name : kStandardAllocators) {
      try {
        matrix::resolve_allocator(name, variants.allocator_defs, "advise");
        f.allocators_raw.push_back(name);
      } catch (const matrix::ConfigError&) {
        // not installed here: compared among the others
      }
    }
  }
  f.settings = a.settings;
  f.out_dir = a.out_dir.empty() ? default_out_dir("advise-") : a.out_dir;
  f.out_given = true;
  f.command_line = command_line();
  f.print_recommendation = false;  // advise's own, below, ranks backends first and names the setting
  // A report path that cannot be written is bad input: said before any program runs.
  const std::string report_path =
      a.no_report ? "" : a.report.empty() ? results::layout::path_in(f.out_dir, results::layout::kReport) : a.report;
  if (!a.report.empty()) check_output_file(a.report, "--report", {f.out_dir});
  int code = run_command(f);
  if (code != kExitOk && code != kExitCellsFailed) return code;
  results::Advice advice = results::advise(results::Model::load({f.out_dir}));
  // The candidates' names and errors come from the records: shown, never obeyed by the terminal.
  std::cout << "\n" << results::terminal_text(results::render_advice(advice));
  if (!report_path.empty()) write_report(f.out_dir, advice, report_path);
  return advice.any ? kExitOk : kExitCellsFailed;
}

}  // namespace

Subcommand add_advise_command(CLI::App& app) {
  auto a = std::make_shared<AdviseFlags>();
  auto* cmd = app.add_subcommand("advise", "run your program under every installed allocator and variant, then recommend one");
  add_setting_flags(cmd, a->settings, {"reps", "timeout_s"});
  cmd->add_option("--allocators,-a", a->allocators, "allocators or variants to compare, comma separated (default: the standard set)");
  cmd->add_option("--out,-o", a->out_dir, "results folder (default results/advise-<date-time>)");
  auto* report = cmd->add_option("--report", a->report, fmt::format("the HTML report to write (default OUT/{})", results::layout::kReport));
  cmd->add_flag("--no-report", a->no_report, "print the recommendation only, write no HTML report")->excludes(report);
  cmd->add_option("command", a->command, "the program and its arguments, after --")->required();
  return {cmd, [a] { return advise(*a); }};
}

}  // namespace allocmark::cli
