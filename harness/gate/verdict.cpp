#include "harness/gate/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "harness/gate/mann_whitney.h"
#include "harness/matrix/plan.h"
#include "harness/record/cell.h"
#include "harness/results/machine.h"
#include "harness/results/safe_text.h"
#include "workloads/workload.h"

namespace allocmark::gate {

using nlohmann::json;

namespace {

json under_test_changes(const json& before, const json& after) {
  json out = json::object();
  for (const auto& [k, v] : before.items())
    if (k != kAllocmarkCommit && after.value(k, json()) != v) out[k] = {v, after.value(k, json())};
  for (const auto& [k, v] : after.items())
    if (k != kAllocmarkCommit && !before.contains(k)) out[k] = {json(), v};
  return out;
}

// The changed parameters (of under_test_changes) that are digests of the workload's inputs, as
// "trace_sha256 A -> B; ...": "" when none. A cell whose inputs differ ran another workload.
std::string input_changes(const std::string& workload, const json& changed) {
  const workloads::WorkloadInfo* info = workloads::find_workload(workload);
  const char* params = record::setup_key(record::CellField::params);  // under_test's, as the setup's
  if (!info || !changed.contains(params)) return "";
  const json& before = changed[params][0], &after = changed[params][1];
  std::string out;
  for (const auto& spec : info->params) {
    if (!spec.input_digest) continue;
    const json b = before.is_object() ? before.value(spec.name, json()) : json();
    const json a = after.is_object() ? after.value(spec.name, json()) : json();
    // A digest's first 12 characters tell two inputs apart; the whole of each is under "Changed under test".
    auto shown = [](const json& d) { return d.is_string() ? d.get<std::string>().substr(0, 12) : d.dump(); };
    if (a != b) out += fmt::format("{}{} {} -> {}", out.empty() ? "" : "; ", spec.name, shown(b), shown(a));
  }
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
  const double scale = std::abs(v.before.median);
  if (v.before.n && v.after.n && scale > 0) v.change = (v.after.median - v.before.median) / scale;
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
  const double relative_mad = scale > 0 ? v.before.mad / scale : 0;
  if (relative_mad > rule.max_relative_mad) {
    v.verdict = "not comparable";
    v.reason = fmt::format("the baseline's spread is too wide to judge (MAD {:.1f}% of its median, limit {:.0f}%)",
                           100 * relative_mad, 100 * rule.max_relative_mad);
    return v;
  }
  v.band = std::max(rule.tolerance, rule.mad_factor * relative_mad);
  // A byte figure the baseline never had (no huge page before) has no relative change: any growth
  // past the absolute floor of one huge page is beyond every band.
  const bool from_zero = m.bytes() && scale == 0;
  const bool up = from_zero ? v.after.median > 0 : v.change > v.band, down = !from_zero && v.change < -v.band;
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
  // What fails the gate first (not comparable fails it too), then what a reviewer would want to know.
  static const std::map<std::string, int> order{{"regressed", 0}, {"missing", 1}, {"not comparable", 2}, {"improved", 3}, {"pass", 4}};
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
  for (const char* k : {"regressed", "missing", "not comparable", "improved", "pass"})
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
  // A cell that set its own THP mode (thp.how "prctl": the thp axis' never) ran under it whatever
  // the machine's: for it, the machine's THP mode is not a difference between the runs. Read from
  // the records, never from the name: a variant may be called anything.
  std::string difference_besides_thp;
  for (const auto& [k, v] : baseline.machine.items())
    if (now.machine.value(k, json()) != v) {
      const std::string change = k + " " + v.dump() + " -> " + now.machine.value(k, json()).dump();
      result.machine_difference += (result.machine_difference.empty() ? "" : "; ") + change;
      if (k != results::machine_key::thp_enabled) difference_besides_thp += (difference_besides_thp.empty() ? "" : "; ") + change;
    }
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
        if (const std::string inputs = input_changes(b.workload, v.changed); !inputs.empty()) {
          v.verdict = "not comparable";
          v.reason = "another input, so another workload: " + inputs;
        } else if (rule.strict && !v.changed.empty() && v.verdict != "not comparable") {
          v.verdict = "not comparable";
          v.reason = "--strict: what is under test changed";
        }
      }
      const bool own_mode = b.thp_how == record::kThpHowPrctl && it != by_id.end() && it->second->thp_how == record::kThpHowPrctl;
      const std::string& difference = own_mode ? difference_besides_thp : result.machine_difference;
      if (!difference.empty() && v.verdict != "missing") {
        if (!rule.allow_mismatch) {
          v.verdict = "not comparable";
          v.reason = "the machine differs: " + difference;
        } else {
          v.other_machine = true;
        }
      }
      result.verdicts.push_back(std::move(v));
    }
  }
  conclude(result);
  return result;
}

namespace {

// The one segment of a verdict's cell and metric; nullptr for none or several.
const StableSegment* segment_of(const Verdict& v, const std::vector<StableSegment>& segments) {
  const StableSegment* found = nullptr;
  for (const auto& s : segments) {
    if (s.cell != v.cell || s.metric != v.metric) continue;
    if (found) return nullptr;
    found = &s;
  }
  return found;
}

}  // namespace

namespace {

// A creep as the verdict's note says it: how far, since when, against how much.
std::string creep_text(const CreepReading& c) {
  return fmt::format("cumulative {:+.1f}% since {} (the history's last stable segment, {} values; band {:.1f}%, p = {:.3f})",
                     100 * c.change, c.since_commit.substr(0, 12), c.values, 100 * c.band, c.p);
}

}  // namespace

void judge_creep(GateResult& result, const RunSummary& now, const std::vector<StableSegment>& segments,
                 const RuleSettings& rule) {
  std::map<std::string, const GateCell*> by_id;
  for (const auto& c : now.cells) by_id[c.id()] = &c;
  bool changed = false;
  for (auto& v : result.verdicts) {
    const StableSegment* segment = segment_of(v, segments);
    const auto cell = by_id.find(v.cell);
    if ((v.verdict != "pass" && !needs_confirmation(v)) || !segment || cell == by_id.end()) continue;
    GateCell before = *cell->second;
    before.values = {{v.metric, segment->values}};
    const Verdict judged = judge_metric(before, *cell->second, *find_gate_metric(v.metric), rule);
    v.creep = CreepReading{segment->since_commit, segment->values.size(), judged.verdict, judged.reason,
                           judged.change, judged.band, judged.p};
    // Only a pass is turned; what a flagged verdict's segment showed waits for a confirming rerun.
    if (v.verdict != "pass" || !v.creep->shows_creep()) continue;
    v.verdict = "regressed";
    v.by_creep = true;
    v.reason = creep_text(*v.creep);
    changed = true;
  }
  if (!changed) return;
  // What a confirming rerun appended to the one-line verdict (after the tally's parenthesis) stays.
  const std::size_t tally_end = result.summary.find(')');
  const std::string appended = tally_end == std::string::npos ? "" : result.summary.substr(tally_end + 1);
  conclude(result);
  result.summary += appended;
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

namespace {

// What the first reading flagged, for a note once the rerun has spoken.
std::string first_reading(const Verdict& v) {
  if (v.by_creep)
    return fmt::format("first run cumulative {:+.1f}% since {} (p = {:.3f})", 100 * v.creep->change,
                       v.creep->since_commit.substr(0, 12), v.creep->p);
  return fmt::format("first run {} {:+.1f}% (p = {:.3f})", v.verdict, 100 * v.change, v.p);
}

bool rerun_shows_creep(const Verdict* second) { return second && second->creep && second->creep->shows_creep(); }

// What the rerun's values showed against the same segment.
std::string rerun_creep_text(const Verdict* second) {
  if (!second) return "not rerun";
  if (!second->creep)
    return fmt::format("not judged against the segment (the rerun: {}{})", second->verdict,
                       second->reason.empty() ? "" : ", " + second->reason);
  const CreepReading& c = *second->creep;
  // A move inside the band is never tested: it has no p to show.
  return fmt::format("{:+.1f}% against the same segment ({}{}, n = {}{})", 100 * c.change, c.verdict,
                     c.p < 1 ? fmt::format(", p = {:.3f}", c.p) : "", second->after.n,
                     c.reason.empty() ? "" : "; " + c.reason);
}

// A creep regression stands only where the rerun's values show it against the same segment.
void confirm_creep(Verdict& v, const Verdict* second) {
  if (rerun_shows_creep(second)) {
    v.reason += "; creep confirmed by the rerun: " + rerun_creep_text(second);
    return;
  }
  v.reason = first_reading(v) + ", creep not confirmed by the rerun: " + rerun_creep_text(second);
  v.verdict = "pass";
  v.by_creep = false;
}

// A flag against the baseline stands where the rerun's verdict against the baseline (before any
// creep turned it) is the same. One it clears is a pass, judged for creep as every pass is: on
// both readings.
void confirm_flag(Verdict& v, const Verdict* second) {
  const std::string again = !second ? "" : second->by_creep ? "pass" : second->verdict;
  if (second && again == v.verdict) {
    v.reason = (v.reason.empty() ? "" : v.reason + "; ") +
               fmt::format("confirmed by the rerun: {:+.1f}% (p = {:.3f}, n = {})", 100 * second->change, second->p, second->after.n);
    return;
  }
  v.reason = first_reading(v) + ", not confirmed by the rerun: " +
             (second ? fmt::format("{} {:+.1f}%{}", again, 100 * second->change,
                                   second->reason.empty() || second->by_creep ? "" : " (" + second->reason + ")")
                     : std::string("not rerun"));
  v.verdict = "pass";
  if (!v.creep || !v.creep->shows_creep()) return;
  if (!rerun_shows_creep(second)) {
    v.reason += "; its " + creep_text(*v.creep) + " is not confirmed by the rerun either: " + rerun_creep_text(second);
    return;
  }
  v.verdict = "regressed";
  v.by_creep = true;
  v.reason += "; " + creep_text(*v.creep) + ", creep confirmed by the rerun: " + rerun_creep_text(second);
}

}  // namespace

GateResult confirm(const GateResult& first, const GateResult& rerun,
                   const std::map<std::string, std::string>& not_rerun) {
  std::map<std::pair<std::string, std::string>, const Verdict*> again;
  for (const auto& v : rerun.verdicts) again[{v.cell, v.metric}] = &v;
  GateResult out = first;
  for (auto& v : out.verdicts) {
    if (!needs_confirmation(v)) continue;
    auto it = again.find({v.cell, v.metric});
    const Verdict* second = it == again.end() ? nullptr : it->second;
    if (auto refused = not_rerun.find(v.cell_name()); refused != not_rerun.end()) {
      v.reason = first_reading(v) + "; --confirm did not rerun it: " + refused->second;
      v.verdict = "not comparable";
      continue;
    }
    if (v.by_creep) confirm_creep(v, second);
    else confirm_flag(v, second);
  }
  conclude(out);
  return out;
}

namespace {

// Verdict::changed as field diffs ("params live_mib 64 -> 80").
std::vector<FieldChange> under_test_diff(const Verdict& v) {
  json from = json::object(), to = json::object();
  for (const auto& [k, change] : v.changed.items()) {
    from[k] = change[0];
    to[k] = change[1];
  }
  return field_changes(from, to);
}

}  // namespace

json verdict_json(const Verdict& v, const std::string& before_name, const std::string& after_name) {
  json diff_lines = json::array();
  for (const auto& change : under_test_diff(v)) diff_lines.push_back(change.text());
  auto spread = [](const results::Spread& s) {
    return json{{"n", s.n}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"mad", s.mad}};
  };
  return json{{"cell", v.cell}, {"allocator", v.allocator}, {"workload", v.workload}, {"threads", v.threads},
              {"phase", v.phase}, {"metric", v.metric}, {"verdict", v.verdict}, {"reason", v.reason},
              {before_name, spread(v.before)}, {after_name, spread(v.after)}, {"change", v.change},
              {"band", v.band}, {"p", v.p}, {"changed_under_test", v.changed}, {"under_test_diff", diff_lines},
              {"judged_on_another_machine", v.other_machine}};
}

namespace {

// Text from records and baselines, made safe for the medium.
std::string shown_as(const std::string& text, bool markdown) {
  return markdown ? results::markdown_text(text) : results::terminal_line(text);
}

// Columns of a verdict table, each row's cells as shown.
std::vector<std::array<std::string, 9>> verdict_cells(const VerdictReport& r, const std::vector<std::size_t>& rows, bool markdown) {
  auto text = [markdown](const std::string& t) { return shown_as(t, markdown); };
  std::vector<std::array<std::string, 9>> out;
  for (std::size_t i : rows) {
    const Verdict& v = r.verdicts[i];
    std::string change = "-";
    if (v.before.n && v.after.n && v.before.median != 0)
      change = fmt::format("{:+.1f}%{}", 100 * v.change, v.judged() ? "" : " (not judged)");
    // A row that was not judged has no band or p-value to stand by, whatever was computed first.
    const std::string band = v.judged() && v.band > 0 ? fmt::format("{:.1f}%", 100 * v.band) : "-";
    const std::string p = v.judged() && v.p < 1 ? fmt::format("{:.3f}", v.p) : "-";
    out.push_back({r.labels[i], text(v.cell), v.metric, spread_text(v.before, v.metric), spread_text(v.after, v.metric), change,
                   band, p, text(v.reason)});
  }
  return out;
}

std::string verdict_table(const VerdictReport& r, const std::vector<std::size_t>& rows, bool markdown) {
  const auto& [label, before, after] = r.headings;
  const std::array<std::string, 9> head{label, "cell", "metric", before, after, "change", "band", "p", "notes"};
  const auto cells = verdict_cells(r, rows, markdown);
  std::string out;
  if (markdown) {
    auto line = [](const std::array<std::string, 9>& c) {
      std::string l = "|";
      for (const auto& x : c) l += " " + x + " |";
      return l + "\n";
    };
    out += line(head) + "|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& c : cells) out += line(c);
    return out;
  }
  // Columns as wide as their widest entry; text left-aligned, figures right-aligned, notes last.
  std::array<std::size_t, 9> width{};
  for (std::size_t k = 0; k < 9; ++k) {
    width[k] = head[k].size();
    for (const auto& c : cells) width[k] = std::max(width[k], c[k].size());
  }
  auto line = [&width](const std::array<std::string, 9>& c) {
    std::string l = fmt::format("{:<{}}  {:<{}}  {:<{}}", c[0], width[0], c[1], width[1], c[2], width[2]);
    for (std::size_t k = 3; k < 8; ++k) l += fmt::format("  {:>{}}", c[k], width[k]);
    if (!c[8].empty()) l += "  " + c[8];
    return l + "\n";
  };
  out += line(head);
  for (const auto& c : cells) out += line(c);
  return out;
}

// What changed under test, once per distinct change (its fields' diffs, each part made safe for
// the medium, the arrows allocmark's), with the cells it applies to in the order the rows name them.
std::vector<std::pair<std::string, std::vector<std::string>>> changes_by_cell(const std::vector<Verdict>& verdicts, bool markdown) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& v : verdicts) {
    std::string joined;
    for (const auto& c : under_test_diff(v))
      joined += (joined.empty() ? "" : "; ") + shown_as(c.field, markdown) + " " + shown_as(c.before, markdown) + " -> " +
                shown_as(c.after, markdown);
    if (joined.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == joined; });
    if (it == out.end()) it = out.insert(out.end(), {joined, {}});
    if (std::find(it->second.begin(), it->second.end(), v.cell_name()) == it->second.end()) it->second.push_back(v.cell_name());
  }
  return out;
}

}  // namespace

std::string render_verdict_report(const VerdictReport& r, bool markdown) {
  auto text = [markdown](const std::string& t) { return shown_as(t, markdown); };
  std::vector<std::size_t> shown, folded;
  for (std::size_t i = 0; i < r.verdicts.size(); ++i) (markdown && r.collapsed[i] ? folded : shown).push_back(i);
  std::string changes;
  for (const auto& [change, cells] : changes_by_cell(r.verdicts, markdown)) {
    std::string names;
    for (const auto& c : cells) names += (names.empty() ? "" : ", ") + text(c);
    changes += (markdown ? "- " : "  ") + names + ": " + change + "\n";
  }
  const std::string changes_heading = "Changed under test (what the cells ran: library, version, environment, parameters):";
  if (!markdown) {
    std::string out;
    for (const auto& line : r.context) out += text(line) + "\n";
    out += verdict_table(r, shown, false);
    if (!changes.empty()) out += "\n" + changes_heading + "\n" + changes;
    return out + "\n" + text(r.conclusion) + "\n";
  }
  std::string out = "**" + text(r.conclusion) + "**\n\n";
  for (const auto& line : r.context) out += text(line) + "\n\n";
  if (!changes.empty()) out += changes_heading + "\n\n" + changes + "\n";
  if (!shown.empty()) out += verdict_table(r, shown, true) + "\n";
  if (!folded.empty())
    out += fmt::format("<details><summary>{} {}</summary>\n\n{}\n</details>\n", folded.size(), r.collapsed_name,
                       verdict_table(r, folded, true));
  return out;
}

std::string render_gate(const GateResult& r, const std::string& format) {
  if (format == "json") {
    json out{{"summary", r.summary}, {"exit_code", r.exit_code}, {"machine_difference", r.machine_difference}};
    out["verdicts"] = json::array();
    for (const auto& v : r.verdicts) {
      json one = verdict_json(v, "baseline", "results");
      // --history's reading against the segment (null where none was judged), beside the verdict it turned.
      one["creep"] = v.creep ? json{{"since_commit", v.creep->since_commit}, {"segment_values", v.creep->values},
                                    {"verdict", v.creep->verdict}, {"reason", v.creep->reason}, {"change", v.creep->change},
                                    {"band", v.creep->band}, {"p", v.creep->p}}
                             : json();
      one["regressed_by_creep"] = v.by_creep;
      out["verdicts"].push_back(std::move(one));
    }
    return out.dump(2) + "\n";
  }
  VerdictReport report{r.verdicts, {}, {}, {"verdict", "baseline", "results"}, "pass", r.summary, {}};
  for (const auto& v : r.verdicts) {
    report.labels.push_back(v.verdict);
    report.collapsed.push_back(v.verdict == "pass");
  }
  const bool judged_anyway = std::any_of(r.verdicts.begin(), r.verdicts.end(), [](const Verdict& v) { return v.other_machine; });
  if (!r.machine_difference.empty())
    report.context.push_back("The machines differ: " + r.machine_difference +
                             (judged_anyway ? " (judged anyway: --allow-mismatch)" : ""));
  return render_verdict_report(report, format == "markdown");
}

}  // namespace allocmark::gate
