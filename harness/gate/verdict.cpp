#include "harness/gate/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "harness/gate/mann_whitney.h"

namespace allocmark::gate {

using nlohmann::json;

namespace {

json under_test_changes(const json& before, const json& after) {
  json out = json::object();
  for (const auto& [k, v] : before.items())
    if (k != "allocmark_commit" && after.value(k, json()) != v) out[k] = {v, after.value(k, json())};
  for (const auto& [k, v] : after.items())
    if (k != "allocmark_commit" && !before.contains(k)) out[k] = {json(), v};
  return out;
}

Verdict judge_metric(const GateCell& b, const GateCell& a, const GateMetric& m, const RuleSettings& rule) {
  Verdict v;
  v.cell = b.id();
  v.metric = m.name;
  std::vector<double> before = b.values.count(m.name) ? b.values.at(m.name) : std::vector<double>{};
  std::vector<double> after = a.values.count(m.name) ? a.values.at(m.name) : std::vector<double>{};
  v.before = results::spread_of(before);
  v.after = results::spread_of(after);
  if (before.size() < rule.min_reps || after.size() < rule.min_reps) {
    v.verdict = "not comparable";
    v.reason = fmt::format("fewer than {} repetitions (baseline {}, results {})", rule.min_reps, before.size(), after.size());
    return v;
  }
  if (smallest_reachable_p(before.size(), after.size()) > rule.alpha) {
    v.verdict = "not comparable";
    v.reason = fmt::format("the test cannot reach alpha {} with {} and {} repetitions", rule.alpha, before.size(), after.size());
    return v;
  }
  const double scale = std::abs(v.before.median);
  const double relative_mad = scale > 0 ? v.before.mad / scale : 0;
  if (relative_mad > rule.max_relative_mad) {
    v.verdict = "not comparable";
    v.reason = fmt::format("the baseline's spread is too wide to judge (MAD {:.1f}% of its median, limit {:.0f}%)",
                           100 * relative_mad, 100 * rule.max_relative_mad);
    return v;
  }
  v.band = std::max(rule.tolerance, rule.mad_factor * relative_mad);
  v.change = scale > 0 ? (v.after.median - v.before.median) / scale : 0;
  const bool up = v.change > v.band, down = v.change < -v.band;
  const bool big_enough = !m.bytes || std::abs(v.after.median - v.before.median) >= rule.bytes_floor;
  const bool worse = m.higher_is_worse ? up : down, better = m.higher_is_worse ? down : up;
  if ((worse || better) && big_enough) {
    const bool after_larger = up;
    v.p = after_larger ? mann_whitney_greater_p(before, after) : mann_whitney_greater_p(after, before);
    if (v.p <= rule.alpha + 1e-12) {
      v.verdict = worse ? "regressed" : "improved";
      return v;
    }
    v.verdict = "pass";
    v.reason = fmt::format("moved beyond the band but the repetitions overlap (p = {:.3f} > {})", v.p, rule.alpha);
    return v;
  }
  v.verdict = "pass";
  if ((worse || better) && !big_enough) v.reason = "moved by less than one huge page (2 MiB)";
  return v;
}

int rank(const std::string& verdict) {
  static const std::map<std::string, int> order{{"regressed", 0}, {"missing", 1}, {"improved", 2}, {"not comparable", 3}, {"pass", 4}};
  return order.at(verdict);
}

std::string format_value(double v, const std::string& metric) {
  if (metric == "peak_rss" || metric == "end_rss") return fmt::format("{:.1f} MiB", v / (1024.0 * 1024.0));
  if (metric == "ops_per_s") return v >= 1e6 ? fmt::format("{:.2f}M", v / 1e6) : fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.3f}", v);
}

std::string spread_text(const results::Spread& s, const std::string& metric) {
  if (s.n == 0) return "-";
  return fmt::format("{} [{}-{}] n={}", format_value(s.median, metric), format_value(s.min, metric), format_value(s.max, metric), s.n);
}

std::string detail(const Verdict& v) {
  std::string out = v.reason;
  for (const auto& [k, change] : v.changed.items())
    out += (out.empty() ? "" : "; ") + std::string("changed ") + k + ": " + change[0].dump() + " -> " + change[1].dump();
  return out;
}

}  // namespace

GateResult judge(const RunSummary& baseline, const RunSummary& now, const std::vector<std::string>& metrics,
                 const std::string& phase, const RuleSettings& rule) {
  GateResult result;
  for (const auto& [k, v] : baseline.machine.items())
    if (now.machine.value(k, json()) != v)
      result.machine_difference += (result.machine_difference.empty() ? "" : "; ") + k + " " + v.dump() + " -> " +
                                   now.machine.value(k, json()).dump();
  std::map<std::string, const GateCell*> by_id;
  for (const auto& c : now.cells) by_id[c.id()] = &c;
  for (const auto& b : baseline.cells) {
    if (b.phase == results::kCellPhase) continue;
    if (!phase.empty() && b.phase != phase) continue;
    auto it = by_id.find(b.id());
    for (const auto& name : metrics) {
      const GateMetric& m = *find_gate_metric(name);
      if (!b.values.count(name)) continue;  // the baseline has no such figure for this phase
      Verdict v;
      if (it == by_id.end()) {
        v.cell = b.id();
        v.metric = name;
        v.before = results::spread_of(b.values.at(name));
        v.verdict = "missing";
        v.reason = "not in the results";
      } else {
        v = judge_metric(b, *it->second, m, rule);
        v.changed = under_test_changes(b.under_test, it->second->under_test);
        if (rule.strict && !v.changed.empty() && v.verdict != "not comparable") {
          v.verdict = "not comparable";
          v.reason = "--strict: what is under test changed";
        }
      }
      if (!result.machine_difference.empty() && v.verdict != "missing") {
        if (!rule.allow_mismatch) {
          v.verdict = "not comparable";
          v.reason = "the machine differs: " + result.machine_difference;
        } else {
          v.reason = (v.reason.empty() ? "" : v.reason + "; ") + "judged on another machine (--allow-mismatch)";
        }
      }
      result.verdicts.push_back(std::move(v));
    }
  }
  std::stable_sort(result.verdicts.begin(), result.verdicts.end(),
                   [](const Verdict& x, const Verdict& y) { return rank(x.verdict) < rank(y.verdict); });
  std::map<std::string, int> counts;
  for (const auto& v : result.verdicts) counts[v.verdict]++;
  if (counts["not comparable"] && !rule.allow_mismatch) result.exit_code = 2;
  else if (counts["regressed"] || counts["missing"]) result.exit_code = 1;
  std::string tally;
  for (const char* k : {"regressed", "missing", "improved", "not comparable", "pass"})
    if (counts[k]) tally += fmt::format("{}{} {}", tally.empty() ? "" : ", ", counts[k], k);
  result.summary = fmt::format("gate: {} ({})", result.exit_code == 0 ? "PASS" : result.exit_code == 1 ? "FAIL" : "NOT COMPARABLE",
                               tally.empty() ? "nothing to compare" : tally);
  return result;
}

std::string render_gate(const GateResult& r, const std::string& format) {
  if (format == "json") {
    json out{{"summary", r.summary}, {"exit_code", r.exit_code}, {"machine_difference", r.machine_difference}};
    out["verdicts"] = json::array();
    for (const auto& v : r.verdicts) {
      auto spread = [](const results::Spread& s) {
        return json{{"n", s.n}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"mad", s.mad}};
      };
      out["verdicts"].push_back({{"cell", v.cell}, {"metric", v.metric}, {"verdict", v.verdict}, {"reason", v.reason},
                                 {"baseline", spread(v.before)}, {"results", spread(v.after)}, {"change", v.change},
                                 {"band", v.band}, {"p", v.p}, {"changed_under_test", v.changed}});
    }
    return out.dump(2) + "\n";
  }
  const bool md = format == "markdown";
  std::string out = md ? "| verdict | cell | metric | baseline | results | change | band | p | notes |\n|---|---|---|---|---|---|---|---|---|\n"
                       : fmt::format("{:<15} {:<36} {:<14} {:>32} {:>32} {:>8} {:>6} {:>6}  {}\n", "verdict", "cell", "metric",
                                     "baseline", "results", "change", "band", "p", "notes");
  for (const auto& v : r.verdicts) {
    std::string change = v.after.n ? fmt::format("{:+.1f}%", 100 * v.change) : "-";
    std::string band = v.band > 0 ? fmt::format("{:.1f}%", 100 * v.band) : "-";
    std::string p = v.p < 1 ? fmt::format("{:.3f}", v.p) : "-";
    if (md)
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", v.verdict, v.cell, v.metric, spread_text(v.before, v.metric),
                         spread_text(v.after, v.metric), change, band, p, detail(v));
    else
      out += fmt::format("{:<15} {:<36} {:<14} {:>32} {:>32} {:>8} {:>6} {:>6}  {}\n", v.verdict, v.cell, v.metric,
                         spread_text(v.before, v.metric), spread_text(v.after, v.metric), change, band, p, detail(v));
  }
  return out + (md ? "\n**" + r.summary + "**\n" : "\n" + r.summary + "\n");
}

}  // namespace allocmark::gate
