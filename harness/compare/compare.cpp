#include "harness/compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace allocmark::compare {

using nlohmann::json;

namespace {

constexpr std::size_t kOverlayCells = 3;

std::string direction_of(const gate::Verdict& v) {
  if (v.verdict == "regressed") return "worse";
  if (v.verdict == "improved") return "better";
  if (v.verdict == "missing") return "only before";
  if (v.verdict == "not comparable") return "not comparable";
  return "same";
}

int rank(const Change& c) {
  static const std::map<std::string, int> order{{"worse", 0}, {"better", 0}, {"only before", 1}, {"only after", 1},
                                                {"not comparable", 2}, {"same", 3}};
  return order.at(c.direction);
}

}  // namespace

std::size_t Comparison::moved() const {
  return static_cast<std::size_t>(std::count_if(changes.begin(), changes.end(), [](const Change& c) { return c.moved(); }));
}

Comparison compare_runs(const std::string& before, const std::string& after, const std::vector<std::string>& metrics) {
  Comparison out{before, after, metrics, "", {}};
  gate::RunSummary first = gate::summarize_run(before), second = gate::summarize_run(after);
  gate::RuleSettings rule;
  rule.allow_mismatch = true;  // the difference is reported; whether it matters is the user's question
  gate::GateResult judged = gate::judge(first, second, metrics, "", rule);
  out.machine_difference = judged.machine_difference;
  for (auto& v : judged.verdicts) {
    if (v.verdict == "missing") v.reason = "not in the second run";
    Change c{v, direction_of(v)};
    const double scale = std::abs(v.before.median);
    if (scale > 0 && v.after.n && v.before.n) {
      c.low = (v.after.min - v.before.max) / scale;
      c.high = (v.after.max - v.before.min) / scale;
    }
    out.changes.push_back(std::move(c));
  }
  // Cells only the second run has: the gate does not ask about them, a comparison must show them.
  std::set<std::string> in_first;
  for (const auto& c : first.cells) in_first.insert(c.id());
  for (const auto& c : second.cells) {
    if (c.phase == results::kCellPhase || in_first.count(c.id())) continue;
    for (const auto& name : metrics) {
      if (!c.values.count(name)) continue;
      gate::Verdict v = gate::identify(c, name);
      v.verdict = "missing";
      v.reason = "not in the first run";
      v.after = results::spread_of(c.values.at(name));
      out.changes.push_back({v, "only after"});
    }
  }
  std::stable_sort(out.changes.begin(), out.changes.end(), [](const Change& x, const Change& y) {
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    return std::abs(x.judged.change) > std::abs(y.judged.change);
  });
  return out;
}

json comparison_json(const Comparison& c) {
  json out{{"before", c.before}, {"after", c.after}, {"metrics", c.metrics}, {"machine_difference", c.machine_difference},
           {"moved", c.moved()}, {"changes", json::array()}};
  for (const auto& ch : c.changes) {
    json j = gate::verdict_json(ch.judged, "before", "after");
    j.erase("verdict");
    j["direction"] = ch.direction;
    j["moved"] = ch.moved();
    j["change_low"] = ch.low;
    j["change_high"] = ch.high;
    out["changes"].push_back(std::move(j));
  }
  // The cells whose RSS moved most, for the overlay of both runs' RSS-over-time curves (changes
  // are sorted moved-first, largest first).
  out["overlay"] = json::array();
  std::set<std::string> picked;
  for (const auto& ch : c.changes) {
    const auto& v = ch.judged;
    if (!ch.moved() || v.metric == "ops_per_s" || out["overlay"].size() >= kOverlayCells) continue;
    if (!picked.insert(v.allocator + '\n' + v.workload + '\n' + std::to_string(v.threads)).second) continue;
    out["overlay"].push_back({{"allocator", v.allocator}, {"workload", v.workload}, {"threads", v.threads},
                              {"phase", v.phase}, {"metric", v.metric}, {"change", v.change}});
  }
  return out;
}

std::string render_comparison(const Comparison& c, const std::string& format) {
  if (format == "json") return comparison_json(c).dump(2) + "\n";
  const bool md = format == "markdown";
  gate::VerdictReport report;
  report.headings = {"change", "before", "after"};
  report.collapsed_name = "same";
  for (const auto& ch : c.changes) {
    report.verdicts.push_back(ch.judged);
    report.labels.push_back(ch.direction);
    report.collapsed.push_back(ch.direction == "same");
  }
  report.conclusion = fmt::format("compare: {} of {} cell-phase-metrics moved (the gate's rule: docs/gate.md)", c.moved(), c.changes.size());
  // The machine difference is said once, above the rows, not on every row.
  report.context = md ? std::vector<std::string>{fmt::format("Comparing {} (before) with {} (after)", c.before, c.after)}
                      : std::vector<std::string>{"before: " + c.before, "after:  " + c.after};
  if (!c.machine_difference.empty()) report.context.push_back("The machines differ: " + c.machine_difference);
  return gate::render_verdict_report(report, md);
}

}  // namespace allocmark::compare
