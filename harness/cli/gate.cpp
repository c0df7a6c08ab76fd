// `allocmark gate --baseline FILE --results DIR`: a verdict per cell, phase and metric against a
// baseline (harness/gate/verdict.h has the rule; docs/gate.md its reasoning).
#include <cmath>
#include <iostream>

#include "harness/cli/common.h"
#include "harness/gate/verdict.h"

namespace allocmark::cli {

namespace {

double parse_tolerance(const std::string& text) {
  std::string t = text;
  bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !std::isfinite(v) || v < 0)
    throw matrix::ConfigError("--tolerance: '" + text + "' is not a non-negative number or percentage (e.g. 5%)");
  return percent ? v / 100 : v;
}

}  // namespace

Subcommand add_gate_command(CLI::App& app) {
  struct Flags {
    std::string baseline, results, tolerance = "5%", phase, format = "table";
    std::vector<std::string> metrics_raw;
    bool strict = false, allow_mismatch = false;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("gate", "judge a results folder against a baseline: exit 0 pass, 1 regressed, 2 not comparable");
  cmd->add_option("--baseline", f->baseline, "baseline file (from `allocmark baseline`)")->required();
  cmd->add_option("--results", f->results, "results folder to judge")->required();
  cmd->add_option("--metric", f->metrics_raw, "peak_rss, rss_over_live, end_rss, ops_per_s (comma separated; default peak_rss)");
  cmd->add_option("--tolerance", f->tolerance, "smallest relative move that can count, e.g. 5% (default 5%)");
  cmd->add_option("--phase", f->phase, "judge only this phase");
  cmd->add_option("--format", f->format, "table, markdown or json (default table)");
  cmd->add_flag("--strict", f->strict, "a change of library, version, environment or parameters makes a cell not comparable");
  cmd->add_flag("--allow-mismatch", f->allow_mismatch, "judge even when the machine differs (verdicts say so)");
  return {cmd, [f] {
            if (f->format != "table" && f->format != "markdown" && f->format != "json")
              throw matrix::ConfigError("--format: '" + f->format + "' (choose from table, markdown, json)");
            std::vector<std::string> metrics = f->metrics_raw.empty() ? std::vector<std::string>{"peak_rss"}
                                                                      : split_commas(f->metrics_raw, "--metric");
            for (const auto& m : metrics)
              if (!gate::find_gate_metric(m))
                throw matrix::ConfigError("--metric: unknown metric '" + m + "' (choose from peak_rss, rss_over_live, end_rss, ops_per_s)");
            gate::RuleSettings rule;
            rule.tolerance = parse_tolerance(f->tolerance);
            rule.strict = f->strict;
            rule.allow_mismatch = f->allow_mismatch;
            gate::RunSummary base = gate::read_baseline(f->baseline);
            gate::RunSummary now = gate::summarize_run(f->results);
            gate::GateResult result = gate::judge(base, now, metrics, f->phase, rule);
            std::cout << gate::render_gate(result, f->format);
            return result.exit_code;
          }};
}

}  // namespace allocmark::cli
