#include "harness/gate/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "harness/gate/mann_whitney.h"
#include "harness/results/safe_text.h"

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

// Whether a baseline phase has a figure of the metric to judge against: a ratio or rate whose every
// value is 0 (the throughput of a phase that did no operations) has none.
bool has_figure(const GateCell& cell, const GateMetric& m) {
  auto it = cell.values.find(m.name);
  if (it == cell.values.end()) return false;
  return m.bytes() || std::any_of(it->second.begin(), it->second.end(), [](double x) { return x != 0; });
}

Verdict judge_metric(const GateCell& b, const GateCell& a, const GateMetric& m, const RuleSettings& rule) {
  Verdict v = identify(b, m.name);
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
  const bool big_enough = !m.bytes() || std::abs(v.after.median - v.before.median) >= rule.bytes_floor;
  const bool higher_is_worse = m.row().better == results::Better::lower;
  const bool worse = higher_is_worse ? up : down, better = higher_is_worse ? down : up;
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

// The verdict tables' own precision (finer than show's): by the metric's display.
std::string format_value(double v, const std::string& metric) {
  const GateMetric* m = find_gate_metric(metric);
  const results::Display display = m ? m->row().display : results::Display::ratio;
  if (display == results::Display::mib) return fmt::format("{:.1f} MiB", v / (1024.0 * 1024.0));
  if (display == results::Display::si) return v >= 1e6 ? fmt::format("{:.2f}M", v / 1e6) : fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.3f}", v);
}

}  // namespace

std::string spread_text(const results::Spread& s, const std::string& metric) {
  if (s.n == 0) return "-";
  return fmt::format("{} [{}-{}] n={}", format_value(s.median, metric), format_value(s.min, metric), format_value(s.max, metric), s.n);
}

namespace {

std::string detail(const Verdict& v) {
  std::string out = v.reason;
  for (const auto& [k, change] : v.changed.items())
    out += (out.empty() ? "" : "; ") + std::string("changed ") + k + ": " + change[0].dump() + " -> " + change[1].dump();
  return out;
}

// Order (regressions first), exit code and the one-line verdict, from the verdicts.
void conclude(GateResult& result) {
  std::stable_sort(result.verdicts.begin(), result.verdicts.end(),
                   [](const Verdict& x, const Verdict& y) { return rank(x.verdict) < rank(y.verdict); });
  std::map<std::string, int> counts;
  for (const auto& v : result.verdicts) counts[v.verdict]++;
  // --allow-mismatch has already judged what only the machine kept apart; whatever is still not
  // comparable (too few repetitions, a noisy baseline, a cell --confirm could not rerun) was not
  // judged, and a gate must not pass on what it did not judge.
  result.exit_code = 0;
  if (counts["not comparable"]) result.exit_code = 2;
  else if (counts["regressed"] || counts["missing"]) result.exit_code = 1;
  std::string tally;
  for (const char* k : {"regressed", "missing", "improved", "not comparable", "pass"})
    if (counts[k]) tally += fmt::format("{}{} {}", tally.empty() ? "" : ", ", counts[k], k);
  result.summary = fmt::format("gate: {} ({})", result.exit_code == 0 ? "PASS" : result.exit_code == 1 ? "FAIL" : "NOT COMPARABLE",
                               tally.empty() ? "nothing to compare" : tally);
}

}  // namespace

Verdict identify(const GateCell& c, const std::string& metric) {
  Verdict v;
  v.cell = c.id();
  v.metric = metric;
  v.allocator = c.allocator;
  v.workload = c.workload;
  v.phase = c.phase;
  v.threads = c.threads;
  return v;
}

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
      if (!has_figure(b, m)) continue;
      Verdict v;
      if (it == by_id.end()) {
        v = identify(b, m.name);
        v.before = results::spread_of(b.values.at(m.name));
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
  conclude(result);
  return result;
}

void require_judgement(const GateResult& result, const RunSummary& baseline, const std::string& baseline_path,
                       const std::vector<std::string>& metrics, const std::string& phase) {
  if (!result.verdicts.empty()) return;
  std::set<std::string> phases, present;
  for (const auto& c : baseline.cells) {
    if (c.phase == results::kCellPhase) continue;
    phases.insert(c.phase);
    if (phase.empty() || c.phase == phase)
      for (const auto& m : gate_metrics())
        if (has_figure(c, m)) present.insert(m.name);
  }
  auto listed = [](const std::set<std::string>& names) {
    std::string out;
    std::size_t n = 0;
    for (const auto& name : names) {
      if (++n > 20) return out + fmt::format(", ... ({} in all)", names.size());
      out += (out.empty() ? "" : ", ") + results::terminal_line(name);
    }
    return out.empty() ? std::string("none") : out;
  };
  std::string joined;
  for (const auto& m : metrics) joined += (joined.empty() ? "" : ",") + m;
  if (!phase.empty() && !phases.count(phase))
    throw GateError(fmt::format("--phase {}: {} has no such phase (its phases: {}); the gate compared nothing",
                                phase, baseline_path, listed(phases)));
  throw GateError(fmt::format("--metric {}: {} has no value of it for any cell{} (it has: {}; a phase that did no "
                              "operations has no ops_per_s); the gate compared nothing",
                              joined, baseline_path, phase.empty() ? "" : " in phase " + phase, listed(present)));
}

GateResult confirm(const GateResult& first, const GateResult& rerun,
                   const std::map<std::string, std::string>& not_rerun) {
  std::map<std::pair<std::string, std::string>, const Verdict*> again;
  for (const auto& v : rerun.verdicts) again[{v.cell, v.metric}] = &v;
  GateResult out = first;
  for (auto& v : out.verdicts) {
    if (!needs_confirmation(v)) continue;
    auto it = again.find({v.cell, v.metric});
    const Verdict* second = it == again.end() ? nullptr : it->second;
    const std::string first_run = fmt::format("first run {} {:+.1f}% (p = {:.3f})", v.verdict, 100 * v.change, v.p);
    if (auto refused = not_rerun.find(v.cell_name()); refused != not_rerun.end()) {
      v.verdict = "not comparable";
      v.reason = first_run + "; --confirm did not rerun it: " + refused->second;
      continue;
    }
    if (second && second->verdict == v.verdict) {
      v.reason = (v.reason.empty() ? "" : v.reason + "; ") +
                 fmt::format("confirmed by the rerun: {:+.1f}% (p = {:.3f}, n = {})", 100 * second->change, second->p, second->after.n);
      continue;
    }
    v.verdict = "pass";
    v.reason = first_run + ", not confirmed by the rerun: " +
               (second ? fmt::format("{} {:+.1f}%{}", second->verdict, 100 * second->change,
                                     second->reason.empty() ? "" : " (" + second->reason + ")")
                       : std::string("not rerun"));
  }
  conclude(out);
  return out;
}

json verdict_json(const Verdict& v, const std::string& before_name, const std::string& after_name) {
  auto spread = [](const results::Spread& s) {
    return json{{"n", s.n}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"mad", s.mad}};
  };
  return json{{"cell", v.cell}, {"allocator", v.allocator}, {"workload", v.workload}, {"threads", v.threads},
              {"phase", v.phase}, {"metric", v.metric}, {"verdict", v.verdict}, {"reason", v.reason},
              {before_name, spread(v.before)}, {after_name, spread(v.after)}, {"change", v.change},
              {"band", v.band}, {"p", v.p}, {"changed_under_test", v.changed}};
}

std::string render_verdict_rows(const std::vector<Verdict>& verdicts, const std::vector<std::string>& labels,
                                const std::array<std::string, 3>& headings, bool markdown) {
  const auto& [label, before, after] = headings;
  std::string out = markdown ? fmt::format("| {} | cell | metric | {} | {} | change | band | p | notes |\n|---|---|---|---|---|---|---|---|---|\n",
                                           label, before, after)
                             : fmt::format("{:<15} {:<36} {:<14} {:>32} {:>32} {:>8} {:>6} {:>6}  {}\n", label, "cell", "metric",
                                           before, after, "change", "band", "p", "notes");
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    const Verdict& v = verdicts[i];
    std::string change = v.after.n && v.before.n ? fmt::format("{:+.1f}%", 100 * v.change) : "-";
    std::string band = v.band > 0 ? fmt::format("{:.1f}%", 100 * v.band) : "-";
    std::string p = v.p < 1 ? fmt::format("{:.3f}", v.p) : "-";
    auto text = [&](const std::string& t) {
      return markdown ? results::markdown_text(t) : results::terminal_line(t);
    };
    if (markdown)
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", labels[i], text(v.cell), v.metric,
                         spread_text(v.before, v.metric), spread_text(v.after, v.metric), change, band, p, text(detail(v)));
    else
      out += fmt::format("{:<15} {:<36} {:<14} {:>32} {:>32} {:>8} {:>6} {:>6}  {}\n", labels[i], text(v.cell), v.metric,
                         spread_text(v.before, v.metric), spread_text(v.after, v.metric), change, band, p, text(detail(v)));
  }
  return out;
}

std::string render_gate(const GateResult& r, const std::string& format) {
  if (format == "json") {
    json out{{"summary", r.summary}, {"exit_code", r.exit_code}, {"machine_difference", r.machine_difference}};
    out["verdicts"] = json::array();
    for (const auto& v : r.verdicts) out["verdicts"].push_back(verdict_json(v, "baseline", "results"));
    return out.dump(2) + "\n";
  }
  const bool md = format == "markdown";
  std::vector<std::string> labels;
  for (const auto& v : r.verdicts) labels.push_back(v.verdict);
  std::string out = render_verdict_rows(r.verdicts, labels, {"verdict", "baseline", "results"}, md);
  return out + (md ? "\n**" + results::markdown_text(r.summary) + "**\n" : "\n" + results::terminal_line(r.summary) + "\n");
}

}  // namespace allocmark::gate
