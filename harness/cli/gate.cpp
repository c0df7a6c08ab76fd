// `allocmark gate --baseline FILE --results DIR`: a verdict per cell, phase and metric against a
// baseline (harness/gate/verdict.h has the rule; docs/gate.md its reasoning).
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <set>
#include <tuple>

#include "harness/cli/common.h"
#include "harness/gate/verdict.h"
#include "harness/results/model.h"

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

std::map<std::string, std::string> string_map(const nlohmann::json& object) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : object.items()) out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return out;
}

// The cells behind the flagged verdicts, exactly as the results folder ran them (allocator,
// library, environment, parameters, repetitions, measurement settings), ordered repetition by
// repetition across cells so that a drift of the machine during the rerun touches every flagged
// cell alike instead of one cell's repetitions in a row.
matrix::Plan confirmation_plan(const std::string& results_dir, const std::vector<gate::Verdict>& flagged) {
  std::set<std::tuple<std::string, std::string, int>> wanted;
  for (const auto& v : flagged) wanted.insert({v.allocator, v.workload, v.threads});
  results::Model model = results::Model::load({results_dir});
  std::ifstream meta_in(results_dir + "/meta.json");
  const nlohmann::json meta = nlohmann::json::parse(meta_in, nullptr, false);
  if (meta.is_discarded() || !meta.is_object() || !meta.contains("matrix"))
    throw gate::GateError(results_dir + "/meta.json: missing or without the matrix; cannot rerun its cells");
  const nlohmann::json& recorded = meta["matrix"];
  matrix::Plan plan;
  plan.settings.size = recorded.value("size", plan.settings.size);
  plan.settings.reps = recorded.value("reps", plan.settings.reps);
  plan.settings.timeout_s = recorded.value("timeout_s", plan.settings.timeout_s);
  plan.settings.sample_ms = recorded.value("sample_ms", plan.settings.sample_ms);
  plan.settings.max_timeline_points = recorded.value("max_timeline_points", plan.settings.max_timeline_points);
  plan.settings.pin = matrix::recorded_pin(recorded);
  plan.settings.latency_every = recorded.value("latency_every", 0);  // runs from before call timing timed nothing
  plan.settings.node_figures = recorded.value("node_figures", true);
  std::map<int, std::vector<matrix::Cell>> by_rep;
  std::set<std::string> keys, allocators;
  for (const auto& c : model.cells()) {
    const auto& id = model.identity(c);
    if (!wanted.count({id.allocator, id.workload, c.threads}) || !keys.insert(c.key).second) continue;
    matrix::Cell cell;
    cell.allocator = {id.allocator, id.backend, id.preload, string_map(id.env), "", false};
    cell.workload = id.workload;
    cell.threads = c.threads;
    cell.rep = c.rep;
    cell.params = string_map(id.params);
    if (allocators.insert(id.allocator + '\n' + id.preload + '\n' + id.env.dump()).second) plan.allocators.push_back(cell.allocator);
    by_rep[c.rep].push_back(std::move(cell));
  }
  for (auto& [rep, cells] : by_rep)
    for (auto& c : cells) plan.cells.push_back(std::move(c));
  return plan;
}

std::string default_confirm_dir(std::string results_dir) {
  while (results_dir.size() > 1 && results_dir.back() == '/') results_dir.pop_back();
  return results_dir + "-confirm";
}

}  // namespace

std::vector<std::string> parse_gate_metrics(const std::vector<std::string>& raw, const std::vector<std::string>& fallback) {
  if (raw.empty()) return fallback;
  std::vector<std::string> metrics = split_commas(raw, "--metric");
  for (const auto& m : metrics)
    if (!gate::find_gate_metric(m))
      throw matrix::ConfigError("--metric: unknown metric '" + m + "' (choose from peak_rss, rss_over_live, end_rss, ops_per_s)");
  return metrics;
}

Subcommand add_gate_command(CLI::App& app) {
  struct Flags {
    std::string baseline, results, tolerance = "5%", phase, format = "table", confirm_out;
    std::vector<std::string> metrics_raw;
    bool strict = false, allow_mismatch = false, confirm = false;
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
  cmd->add_flag("--confirm", f->confirm,
                "rerun only the cells flagged regressed or improved, interleaved, and keep the verdicts the rerun flags again");
  cmd->add_option("--confirm-out", f->confirm_out, "results folder of the confirming rerun (default RESULTS-confirm; must not hold results)");
  cmd->add_flag("--allow-mismatch", f->allow_mismatch, "judge even when the machine differs (verdicts say so)");
  return {cmd, [f] {
            if (f->format != "table" && f->format != "markdown" && f->format != "json")
              throw matrix::ConfigError("--format: '" + f->format + "' (choose from table, markdown, json)");
            const std::vector<std::string> metrics = parse_gate_metrics(f->metrics_raw, {"peak_rss"});
            if (!f->confirm_out.empty() && !f->confirm) throw matrix::ConfigError("--confirm-out: needs --confirm");
            gate::RuleSettings rule;
            rule.tolerance = parse_tolerance(f->tolerance);
            rule.strict = f->strict;
            rule.allow_mismatch = f->allow_mismatch;
            gate::RunSummary base = gate::read_baseline(f->baseline);
            gate::RunSummary now = gate::summarize_run(f->results);
            gate::GateResult result = gate::judge(base, now, metrics, f->phase, rule);
            if (f->confirm) {
              std::vector<gate::Verdict> flagged;
              for (const auto& v : result.verdicts)
                if (gate::needs_confirmation(v)) flagged.push_back(v);
              if (!flagged.empty()) {
                const std::string out = f->confirm_out.empty() ? default_confirm_dir(f->results) : f->confirm_out;
                matrix::Plan plan = confirmation_plan(f->results, flagged);
                std::cerr << fmt::format("allocmark gate: {} verdicts flagged; confirming with a rerun of their cells ({} runs, interleaved) into {}\n",
                                         flagged.size(), plan.cells.size(), out);
                runner::MatrixRunReport rerun = run_in_new_folder(plan, out, command_line(), "gate --confirm");
                if (rerun.interrupted) {
                  std::cerr << "allocmark gate: interrupted during the confirming rerun; no verdict\n";
                  return static_cast<int>(kExitInterrupted);
                }
                result = gate::confirm(result, gate::judge(base, gate::summarize_run(out), metrics, f->phase, rule), rule);
                result.summary += fmt::format(" after a confirming rerun of {} flagged verdicts ({})", flagged.size(), out);
              }
            }
            std::cout << gate::render_gate(result, f->format);
            return result.exit_code;
          }};
}

}  // namespace allocmark::cli
