#include "harness/report/trend_page.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "harness/report/charts.h"
#include "harness/report/html.h"
#include "harness/report/run_report.h"
#include "harness/results/folder.h"
#include "harness/results/metric_table.h"
#include "harness/results/model.h"
#include "harness/results/reporters/text.h"

namespace allocmark::report {

using namespace allocmark::history;  // the page is over a history: its series, points and changes

namespace {

namespace rs = allocmark::results;
using nlohmann::ordered_json;

// How a metric is drawn: its values times `factor` in the unit `label` names (bytes as MiB).
struct Unit {
  double factor = 1;
  std::string label;
};

Unit unit_of(const std::string& metric) {
  const auto m = rs::metric_from_name(metric);
  if (!m) return {1, metric};  // a workload's own figure, in its own unit
  const std::string header = rs::text::metric_header(*m);
  switch (rs::metric_row(*m).display) {
    case rs::Display::mib: return {1.0 / (1024.0 * 1024.0), header};
    case rs::Display::percent: return {100, header + " (%)"};
    default: return {1, header};
  }
}

std::string percent(double step) { return std::isfinite(step) ? fmt::format("{:+.1f}%", 100 * step) : "n/a"; }
std::string short_sha(const std::string& commit) { return commit.substr(0, 12); }
std::string date_of(const std::string& time) { return time.substr(0, 10); }

std::string value_text(const std::string& metric, double value) {
  if (auto m = rs::metric_from_name(metric)) return rs::text::value_text(*m, value);
  return fmt::format("{:.4g}", value);
}

std::string cell_text(const SeriesKey& k) {
  return fmt::format("{} {} t{}", k.cell.allocator, k.cell.workload, k.cell.threads);
}

// One chart: the phases (panels) of one cell's metric on one branch and testbed.
struct Chart {
  std::vector<const SeriesKey*> panels;
  std::string newest_change;  // the time of its newest change, "" when none
};

// A series by what it is (the keys drawn may be another copy of those the changes were found in).
using SeriesId = std::tuple<std::string, std::string, std::string, std::string, std::string>;
SeriesId id_of(const SeriesKey& k) { return {k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed}; }

using ChangesOf = std::map<SeriesId, std::vector<const FoundChange*>>;

ChangesOf changes_by_series(const ChangesFound& found) {
  ChangesOf out;
  for (const auto& g : found.groups)
    for (const auto& c : g.changes) out[id_of(*c.key)].push_back(&c);
  return out;
}

// A series that is 0 at every commit (no huge pages, no lock waits) says nothing a chart could show.
bool all_zero(const HistoryDb& db, const SeriesKey& k) {
  for (const auto& p : db.series(k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed))
    for (double v : p.values)
      if (v != 0) return false;
  return true;
}

std::string change_time(const ChangesFound& found, const FoundChange* c) {
  for (const auto& g : found.groups)
    for (const auto& mine : g.changes)
      if (&mine == c) return g.at.time;
  return "";
}

// Charts in the order of the keys, those with the newest change first: what moved lately leads.
std::vector<Chart> charts_of(const TrendInput& in, const ChangesOf& changes) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::size_t> index;
  std::vector<Chart> charts;
  for (const auto& k : in.keys) {
    if (all_zero(*in.db, k)) continue;
    const auto id = std::make_tuple(k.cell.cell_id, k.metric, k.branch, k.testbed);
    if (!index.contains(id)) {
      index[id] = charts.size();
      charts.emplace_back();
    }
    Chart& chart = charts[index[id]];
    chart.panels.push_back(&k);
    if (auto it = changes.find(id_of(k)); it != changes.end())
      for (const FoundChange* c : it->second) chart.newest_change = std::max(chart.newest_change, change_time(*in.changes, c));
  }
  std::stable_sort(charts.begin(), charts.end(),
                   [](const Chart& a, const Chart& b) { return a.newest_change > b.newest_change; });
  return charts;
}

std::size_t place_of(const std::vector<CommitInfo>& axis, const std::string& commit) {
  for (const auto& c : axis)
    if (c.commit == commit) return c.index;
  return 0;
}

ordered_json panel_json(const HistoryDb& db, const SeriesKey& k, const std::vector<CommitInfo>& axis,
                        const std::vector<const FoundChange*>& changes, const Unit& unit) {
  ordered_json points = ordered_json::array(), marks = ordered_json::array();
  for (const auto& p : db.series(k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed)) {
    const rs::Spread s = rs::spread_of(p.values);
    points.push_back({{"x", place_of(axis, p.commit)}, {"median", s.median * unit.factor},
                      {"low", s.min * unit.factor}, {"high", s.max * unit.factor}, {"n", s.n}});
  }
  for (const FoundChange* c : changes) {
    const ChangePoint& p = c->point;
    marks.push_back({{"x_from", place_of(axis, p.from_commit)}, {"x_to", place_of(axis, p.to_commit)},
                     {"label", fmt::format("{} ({} to {})\n{}..{}", percent(p.relative_step), percent(p.ci_low),
                                           percent(p.ci_high), p.from_commit.substr(0, 7), p.to_commit.substr(0, 7))},
                     {"worse", rs::metric_from_name(k.metric) &&
                                   rs::metric_row(*rs::metric_from_name(k.metric)).better == rs::Better::higher
                                   ? p.relative_step < 0
                                   : p.relative_step > 0}});
  }
  return {{"title", "phase " + k.phase}, {"points", std::move(points)}, {"changes", std::move(marks)}};
}

ordered_json chart_json(const TrendInput& in, const Chart& chart, const ChangesOf& changes, std::size_t number) {
  const SeriesKey& k = *chart.panels.front();
  const std::vector<CommitInfo> axis = in.db->commits(k.branch, k.testbed);
  const Unit unit = unit_of(k.metric);
  ordered_json ticks = ordered_json::array(), panels = ordered_json::array();
  for (const auto& c : axis) ticks.push_back({{"x", c.index}, {"label", c.commit.substr(0, 7) + "\n" + date_of(c.time)}});
  for (const SeriesKey* panel : chart.panels) {
    auto it = changes.find(id_of(*panel));
    panels.push_back(panel_json(*in.db, *panel, axis, it == changes.end() ? std::vector<const FoundChange*>{} : it->second, unit));
  }
  return {{"file", fmt::format("trend-{:03}", number)},
          {"title", fmt::format("{}: {} (branch {}, testbed {})", cell_text(k), k.metric, k.branch, k.testbed)},
          {"ylabel", unit.label}, {"commits", axis.size()}, {"ticks", std::move(ticks)}, {"panels", std::move(panels)}};
}

}  // namespace

ordered_json trend_json(const TrendInput& in) {
  const ChangesOf changes = changes_by_series(*in.changes);
  ordered_json charts = ordered_json::array();
  const std::vector<Chart> order = charts_of(in, changes);
  for (std::size_t i = 0; i < order.size(); ++i) charts.push_back(chart_json(in, order[i], changes, i));
  return {{"history", in.db->path()}, {"charts", std::move(charts)}};
}

namespace {

std::string subject_of(const TrendInput& in, const std::string& commit) {
  auto it = in.subjects.find(commit);
  return it == in.subjects.end() ? "" : it->second;
}

html::TableCell step_cell(const SeriesKey& k, const ChangePoint& p) {
  const auto m = rs::metric_from_name(k.metric);
  const bool worse = m && rs::metric_row(*m).better == rs::Better::higher ? p.relative_step < 0 : p.relative_step > 0;
  return html::TableCell(percent(p.relative_step), p.relative_step, {}, worse ? "bad" : "good");
}

std::string unit_text(const std::string& metric) {
  const auto m = rs::metric_from_name(metric);
  return m ? " (" + rs::text::metric_header(*m) + ")" : "";
}

// One row per series that stepped. Few columns, and all but the step's wrap: at 900 px the table
// fits its window, so the step is never scrolled out of sight.
std::vector<html::TableCell> change_row(const TrendInput& in, const ChangeGroup& g, const FoundChange& c) {
  const ChangePoint& p = c.point;
  const SeriesKey& k = *c.key;
  const std::string subject = subject_of(in, g.at.commit);
  return {step_cell(k, p), html::TableCell(fmt::format("{} to {}, p {:.3f}", percent(p.ci_low), percent(p.ci_high), p.p_value)),
          html::TableCell(fmt::format("{}, phase {}, {} ({}, {})", cell_text(k), k.phase, k.metric, g.branch, g.testbed)),
          html::TableCell(p.from_commit.substr(0, 7) + ".." + p.to_commit.substr(0, 7)),
          html::TableCell(fmt::format("{} {}{}", short_sha(g.at.commit), date_of(g.at.time), subject.empty() ? "" : " " + subject)),
          html::TableCell(value_text(k.metric, p.before_median) + " -> " + value_text(k.metric, p.after_median) +
                          unit_text(k.metric))};
}

void changes_section(html::Document& doc, const TrendInput& in) {
  const ChangesFound& found = *in.changes;
  doc.heading(2, "Changes, newest first", "changes");
  html::Table t{"changes-table",
                {{"step", true, "median of the commits' medians after the step over the one before, each side to the "
                                "neighbouring change"},
                 {"95% CI, p", false, "bootstrap interval of the step; permutation test's p"},
                 {"series"},
                 {"range", false, "the last commit before the step .. the first after it, on the series' own commits"},
                 {"first commit after"},
                 {"before -> after", false, "the medians on either side"}},
                {}, false, "answer"};
  for (const auto& g : found.groups)
    for (const auto& c : g.changes) t.rows.push_back(change_row(in, g, c));
  if (t.rows.empty())
    doc.paragraph(fmt::format("No change point in {} series judged.", found.judged), "good");
  else
    doc.table(t);
  doc.paragraph(fmt::format("E-divisive means over per-commit medians with a permutation test (docs/history.md, "
                            "docs/validation.md); the series that stepped at one commit moved together.{}",
                            found.too_short ? fmt::format(" {} series too short to judge (fewer than {} commits).",
                                                          found.too_short, found.min_commits)
                                            : ""),
                "note");
}

std::size_t charts_section(html::Document& doc, const TrendInput& in, std::vector<std::string>& errors) {
  doc.heading(2, "Series", "series");
  doc.paragraph("Each series on its commit axis: commits evenly spaced, oldest left, labelled by short sha and date; "
                "the line is the median of the commit's repetitions, the band their min-max; a shaded span marks a "
                "change point's commit range with its size and 95% CI. Series with the newest change come first.",
                "note");
  std::size_t zero = 0;
  for (const auto& k : in.keys) zero += all_zero(*in.db, k) ? 1 : 0;
  if (zero)
    doc.paragraph(fmt::format("{} series {} 0 at every commit, not drawn (allocmark history show lists {}).", zero,
                              zero == 1 ? "is" : "are", zero == 1 ? "it" : "them"),
                  "note");
  report::TemporaryFolder tmp;
  const std::string json_path = tmp.path() + "/trend.json";
  rs::write_file_atomically(json_path, trend_json(in).dump() + "\n");
  const std::string out = tmp.path() + "/charts";
  const report::DrawnCharts drawn = report::run_plots_script_captured("history_plots.py", {json_path, "--out", out}, out);
  return report::embed_charts(doc, drawn, "docs/history.md, the trend page", errors);
}

void commits_section(html::Document& doc, const TrendInput& in) {
  doc.heading(2, "Commits, newest first", "commits");
  std::set<std::pair<std::string, std::string>> axes;
  for (const auto& k : in.keys) axes.insert({k.branch, k.testbed});
  html::Table t{"commits-table", {{"commit"}, {"time"}, {"branch"}, {"testbed"}, {"subject"}, {"series that stepped", true}},
                {}, false, "answer"};
  for (const auto& [branch, testbed] : axes) {
    const auto commits = in.db->commits(branch, testbed);
    for (auto c = commits.rbegin(); c != commits.rend(); ++c) {
      std::size_t stepped = 0;
      for (const auto& g : in.changes->groups)
        if (g.branch == branch && g.testbed == testbed && g.at.commit == c->commit) stepped += g.changes.size();
      t.rows.push_back({html::TableCell(short_sha(c->commit)), html::TableCell(c->time), html::TableCell(branch),
                        html::TableCell(testbed), html::TableCell(subject_of(in, c->commit)),
                        html::TableCell(stepped ? std::to_string(stepped) : "", static_cast<double>(stepped), {},
                                        stepped ? "warn" : "")});
    }
  }
  doc.table(t);
}

}  // namespace

TrendPage build_trend_page(const TrendInput& in) {
  TrendPage page;
  std::size_t changes = 0;
  for (const auto& g : in.changes->groups) changes += g.changes.size();
  html::Document doc(fmt::format("allocmark history: {}", in.db->path()));
  doc.heading(1, fmt::format("Trend of {}", in.db->path()));
  doc.paragraph(fmt::format("{} series judged, {} change{} at {} commit{}.", in.changes->judged, changes,
                            changes == 1 ? "" : "s", in.changes->groups.size(), in.changes->groups.size() == 1 ? "" : "s"),
                changes ? "warn" : "");
  doc.contents({{"changes", "Changes"}, {"series", "Series"}, {"commits", "Commits"}});
  changes_section(doc, in);
  page.charts = charts_section(doc, in, page.chart_errors);
  commits_section(doc, in);
  page.html = doc.str();
  return page;
}

}  // namespace allocmark::report
