// `allocmark history add DB RESULTS --commit SHA`, `allocmark history show DB` and `allocmark history
// changes DB`: the results history (harness/history/store.h; docs/history.md). Adding reads the
// folder as `show` does; showing prints each series (a metric of a cell phase on a branch and
// testbed) newest commit first; changes runs history/changepoints.h over each series.
#include "harness/cli/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "harness/results/metric_table.h"
#include "harness/results/model.h"
#include "harness/results/reporters/text.h"
#include "harness/results/safe_text.h"

namespace allocmark::cli {

namespace {

namespace rs = allocmark::results;
using nlohmann::ordered_json;

struct AddFlags {
  std::string db, results;
  history::RunLabels labels;
};

struct ShowFlags {
  std::string db, format = "table", workload;
  std::vector<std::string> metrics;
};

struct ChangesFlags {
  std::string db, format = "table", workload, since, branch, testbed;
  std::vector<std::string> metrics;
};

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The metrics asked for, checked against those the history holds: a typo must not read as "no data".
std::vector<std::string> held_metrics(const std::string& db, const std::vector<std::string>& asked,
                                      const std::vector<history::SeriesKey>& keys) {
  std::set<std::string> held;
  for (const auto& k : keys) held.insert(k.metric);
  std::vector<std::string> out = split_commas(asked, "--metric");
  for (const auto& m : out)
    if (!held.contains(m))
      throw std::invalid_argument(fmt::format("--metric: '{}' is not in {} (there: {})", m, db, joined(held)));
  return out;
}

std::vector<std::string> chosen_metrics(const ShowFlags& f, const std::vector<history::SeriesKey>& keys) {
  std::set<std::string> held;
  for (const auto& k : keys) held.insert(k.metric);
  if (f.metrics.empty()) {
    if (f.format == "json") return {};
    // The terminal gets the gated metrics, as `gate` judges them; json gets every one.
    std::vector<std::string> out;
    for (auto m : rs::gated_metrics()) out.emplace_back(rs::metric_row(m).name);
    return out;
  }
  return held_metrics(f.db, f.metrics, keys);
}

// A filter's value must be one the history holds: a typo must not read as "nothing there".
void check_held(const std::string& db, const std::string& flag, const std::string& asked,
                const std::vector<history::SeriesKey>& keys, std::string (*field)(const history::SeriesKey&)) {
  if (asked.empty()) return;
  std::set<std::string> held;
  for (const auto& k : keys) held.insert(field(k));
  if (!held.contains(asked))
    throw std::invalid_argument(fmt::format("{}: no cell of {} has '{}' (there: {})", flag, db, asked, joined(held)));
}

std::string workload_of(const history::SeriesKey& k) { return k.cell.workload; }

std::vector<history::SeriesKey> chosen_series(const history::HistoryDb& db, const ShowFlags& f) {
  const std::vector<history::SeriesKey> all = db.series_keys();
  check_held(f.db, "--workload", f.workload, all, workload_of);
  return db.series_keys({chosen_metrics(f, all), f.workload});
}

std::string value_text(const std::string& metric, double value) {
  if (auto m = rs::metric_from_name(metric)) return rs::text::value_text(*m, value);
  return fmt::format("{:.4g}", value);  // a workload's own figure: no display rule of ours
}

std::string spread_text(const std::string& metric, const rs::Spread& s) {
  if (s.n < 2 || s.min == s.max) return "";
  return value_text(metric, s.min) + "-" + value_text(metric, s.max) + "  MAD " + value_text(metric, s.mad);
}

// The metric's column header says the unit its values are written in ("peak RSS MiB").
std::string series_heading(const history::SeriesKey& k) {
  const auto m = rs::metric_from_name(k.metric);
  return rs::terminal_line(fmt::format("{} {} t{}, phase {}, {}{} ({}; branch {}, testbed {})", k.cell.allocator,
                                       k.cell.workload, k.cell.threads, k.phase, k.metric,
                                       m ? " [" + rs::text::metric_header(*m) + "]" : std::string(), k.cell.cell_id,
                                       k.branch, k.testbed));
}

// A series' points newest first, each with its commit's place and time on the branch and testbed.
struct ShownPoint {
  const history::CommitInfo* commit;
  const history::SeriesPoint* point;
};

std::vector<ShownPoint> newest_first(const std::vector<history::CommitInfo>& commits,
                                     const std::vector<history::SeriesPoint>& points) {
  std::map<std::string, const history::CommitInfo*> by_sha;
  for (const auto& c : commits) by_sha[c.commit] = &c;
  std::vector<ShownPoint> out;
  for (auto p = points.rbegin(); p != points.rend(); ++p) out.push_back({by_sha.at(p->commit), &*p});
  return out;
}

std::string table_of(const history::HistoryDb& db, const std::vector<history::SeriesKey>& keys) {
  std::string out;
  for (const auto& k : keys) {
    const auto commits = db.commits(k.branch, k.testbed);
    const auto points = db.series(k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed);
    out += series_heading(k) + "\n";
    out += fmt::format("  {:<12} {:<20} {:>4}  {:>12}  {}\n", "commit", "time", "reps", "median", "spread (min-max)");
    for (const auto& [commit, point] : newest_first(commits, points)) {
      const rs::Spread s = rs::spread_of(point->values);
      out += fmt::format("  {:<12} {:<20} {:>4}  {:>12}  {}\n", rs::terminal_line(commit->commit.substr(0, 12)),
                         rs::terminal_line(commit->time), s.n, value_text(k.metric, s.median), spread_text(k.metric, s));
    }
    out += "\n";
  }
  return out;
}

ordered_json point_json(const ShownPoint& p) {
  const rs::Spread s = rs::spread_of(p.point->values);
  return {{"commit", p.commit->commit}, {"commit_index", p.commit->index}, {"time", p.commit->time}, {"n", s.n},
          {"median", s.median}, {"min", s.min}, {"max", s.max}, {"mad", s.mad}, {"values", p.point->values}};
}

// The params as the object they were added as; text a file from elsewhere holds instead stays text.
ordered_json params_json(const std::string& text) {
  ordered_json params = ordered_json::parse(text, nullptr, false);
  return params.is_discarded() ? ordered_json(text) : params;
}

// The shape docs/history.md documents ("history show --format json"); fields are only ever added.
std::string json_of(const history::HistoryDb& db, const std::vector<history::SeriesKey>& keys) {
  ordered_json series = ordered_json::array();
  for (const auto& k : keys) {
    ordered_json points = ordered_json::array();
    const auto commits = db.commits(k.branch, k.testbed);
    const auto found = db.series(k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed);
    for (const auto& p : newest_first(commits, found)) points.push_back(point_json(p));
    series.push_back({{"cell", k.cell.cell_id}, {"allocator", k.cell.allocator}, {"backend", k.cell.backend},
                      {"workload", k.cell.workload}, {"threads", k.cell.threads},
                      {"params", params_json(k.cell.params_json)},
                      {"params_digest", k.cell.params_digest}, {"phase", k.phase}, {"metric", k.metric},
                      {"branch", k.branch}, {"testbed", k.testbed}, {"points", std::move(points)}});
  }
  ordered_json out{{"history", db.path()}, {"schema_version", db.version()}, {"series", std::move(series)}};
  // A history from elsewhere may hold any bytes: invalid UTF-8 is replaced, never a failed dump.
  return out.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

// ---- history changes: find_change_points over every series, grouped by the commit they stepped at.

// One series' change; `at` is its first commit after on the series' branch and testbed.
struct FoundChange {
  const history::SeriesKey* key;
  history::ChangePoint point;
};

// The changes whose first commit after is one commit of one branch and testbed: the series that
// moved together.
struct ChangeGroup {
  std::string branch, testbed;
  history::CommitInfo at;
  std::vector<FoundChange> changes;
};

struct ChangesFound {
  std::vector<ChangeGroup> groups;  // newest first
  std::size_t judged = 0, too_short = 0, min_commits = 0;
};

std::string short_sha(const std::string& commit) { return rs::terminal_line(commit.substr(0, 12)); }

// REV as the history holds it (a unique prefix of a commit it has): its time, for commits of
// branches and testbeds that do not have it.
std::string since_time(const history::HistoryDb& db, const std::string& rev,
                       const std::map<std::pair<std::string, std::string>, std::vector<history::CommitInfo>>& axes) {
  std::map<std::string, std::string> matches;  // commit -> its earliest time
  for (const auto& [where, commits] : axes)
    for (const auto& c : commits)
      if (c.commit.starts_with(rev) && (!matches.contains(c.commit) || c.time < matches[c.commit]))
        matches[c.commit] = c.time;
  if (matches.empty())
    throw std::invalid_argument(fmt::format("--since: no commit of {} (on the series chosen) starts with '{}'", db.path(), rev));
  if (matches.size() > 1) {
    std::set<std::string> names;
    for (const auto& m : matches) names.insert(m.first);
    throw std::invalid_argument(fmt::format("--since: '{}' names {} commits of {} ({}); give more of it", rev,
                                            matches.size(), db.path(), joined(names)));
  }
  return matches.begin()->second;
}

// The first index of `commits` that --since keeps: REV's own when the axis has it, else the first
// commit made at or after REV's time.
std::size_t since_index(const std::vector<history::CommitInfo>& commits, const std::string& rev, const std::string& time) {
  for (const auto& c : commits)
    if (c.commit.starts_with(rev)) return c.index;
  for (const auto& c : commits)
    if (c.time >= time) return c.index;
  return commits.size();
}

// Newest first: by the time of the commit stepped at, then by its place on its axis.
void order_changes(std::vector<ChangeGroup>& groups) {
  std::stable_sort(groups.begin(), groups.end(), [](const ChangeGroup& a, const ChangeGroup& b) {
    return a.at.time != b.at.time ? a.at.time > b.at.time : a.at.index > b.at.index;
  });
  for (auto& g : groups)
    std::stable_sort(g.changes.begin(), g.changes.end(), [](const FoundChange& a, const FoundChange& b) {
      return std::fabs(a.point.relative_step) > std::fabs(b.point.relative_step);
    });
}

ChangesFound find_changes(const history::HistoryDb& db, const std::vector<history::SeriesKey>& keys,
                          const std::string& since) {
  const history::ChangePointOptions options;
  ChangesFound found;
  found.min_commits = history::min_commits(options);
  std::map<std::pair<std::string, std::string>, std::vector<history::CommitInfo>> axes;
  for (const auto& k : keys)
    if (!axes.contains({k.branch, k.testbed})) axes[{k.branch, k.testbed}] = db.commits(k.branch, k.testbed);
  const std::string rev_time = since.empty() ? "" : since_time(db, since, axes);
  std::map<std::tuple<std::string, std::string, std::size_t>, ChangeGroup> groups;
  for (const auto& k : keys) {
    const auto points = db.series(k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed);
    if (points.size() < found.min_commits) {
      ++found.too_short;
      continue;
    }
    ++found.judged;
    const auto& axis = axes.at({k.branch, k.testbed});
    const std::size_t from = since.empty() ? 0 : since_index(axis, since, rev_time);
    for (auto& cp : history::find_change_points(points, options)) {
      const auto at = std::find_if(axis.begin(), axis.end(), [&](const auto& c) { return c.commit == cp.to_commit; });
      if (at == axis.end() || at->index < from) continue;
      ChangeGroup& g = groups[{k.branch, k.testbed, at->index}];
      if (g.changes.empty()) g = {k.branch, k.testbed, *at, {}};
      g.changes.push_back({&k, std::move(cp)});
    }
  }
  for (auto& [where, g] : groups) found.groups.push_back(std::move(g));
  order_changes(found.groups);
  return found;
}

std::string percent(double step) { return std::isfinite(step) ? fmt::format("{:+.1f}%", 100 * step) : "n/a"; }

std::string change_line(const FoundChange& c) {
  const history::SeriesKey& k = *c.key;
  const history::ChangePoint& p = c.point;
  const auto m = rs::metric_from_name(k.metric);
  return fmt::format("  {}..{}  {} {} t{}, phase {}, {}: {} (95% CI {} to {}), p = {:.3f}; {} -> {}{}\n",
                     short_sha(p.from_commit), short_sha(p.to_commit), rs::terminal_line(k.cell.allocator),
                     rs::terminal_line(k.cell.workload), k.cell.threads, rs::terminal_line(k.phase),
                     rs::terminal_line(k.metric), percent(p.relative_step), percent(p.ci_low), percent(p.ci_high),
                     p.p_value, value_text(k.metric, p.before_median), value_text(k.metric, p.after_median),
                     m ? " [" + rs::text::metric_header(*m) + "]" : std::string());
}

std::string changes_table(const ChangesFound& found) {
  std::string out;
  std::size_t changes = 0;
  for (const auto& g : found.groups) {
    changes += g.changes.size();
    out += fmt::format("at {} ({}; branch {}, testbed {}): {} series stepped{}\n", short_sha(g.at.commit),
                       rs::terminal_line(g.at.time), rs::terminal_line(g.branch), rs::terminal_line(g.testbed),
                       g.changes.size(), g.changes.size() > 1 ? " together" : "");
    for (const auto& c : g.changes) out += change_line(c);
    out += "\n";
  }
  out += changes ? fmt::format("{} change{} at {} commit{} in {} series judged\n", changes, changes > 1 ? "s" : "",
                               found.groups.size(), found.groups.size() > 1 ? "s" : "", found.judged)
                 : fmt::format("no change in {} series judged\n", found.judged);
  if (found.too_short)
    out += fmt::format("{} series too short to judge (fewer than {} commits)\n", found.too_short, found.min_commits);
  return out;
}

ordered_json change_json(const FoundChange& c) {
  const history::SeriesKey& k = *c.key;
  const history::ChangePoint& p = c.point;
  // NaN (a step from a zero median) is written as null.
  auto number = [](double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(); };
  return {{"cell", k.cell.cell_id}, {"allocator", k.cell.allocator}, {"backend", k.cell.backend},
          {"workload", k.cell.workload}, {"threads", k.cell.threads}, {"params_digest", k.cell.params_digest},
          {"phase", k.phase}, {"metric", k.metric}, {"from_commit", p.from_commit}, {"to_commit", p.to_commit},
          {"before_median", p.before_median}, {"after_median", p.after_median},
          {"relative_step", number(p.relative_step)}, {"ci_low", number(p.ci_low)}, {"ci_high", number(p.ci_high)},
          {"p", p.p_value}};
}

// The shape docs/history.md documents ("history changes --format json"); fields are only ever added.
std::string changes_json(const history::HistoryDb& db, const ChangesFound& found, const std::vector<std::string>& metrics,
                         const std::string& since) {
  const history::ChangePointOptions o;
  ordered_json groups = ordered_json::array();
  for (const auto& g : found.groups) {
    ordered_json series = ordered_json::array();
    for (const auto& c : g.changes) series.push_back(change_json(c));
    groups.push_back({{"commit", g.at.commit}, {"commit_index", g.at.index}, {"time", g.at.time}, {"branch", g.branch},
                      {"testbed", g.testbed}, {"series", std::move(series)}});
  }
  ordered_json out{{"history", db.path()}, {"schema_version", db.version()}, {"metrics", metrics},
                   {"since", since.empty() ? ordered_json() : ordered_json(since)},
                   {"method", {{"name", "e-divisive means"}, {"alpha", o.alpha}, {"permutations", o.permutations},
                               {"min_segment", o.min_segment}, {"confidence", history::kConfidenceLevel}}},
                   {"series_judged", found.judged}, {"series_too_short", found.too_short},
                   {"min_commits", found.min_commits}, {"changes", std::move(groups)}};
  return out.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

std::string branch_of(const history::SeriesKey& k) { return k.branch; }
std::string testbed_of(const history::SeriesKey& k) { return k.testbed; }

int run_changes(const ChangesFlags& f) {
  if (f.format != "table" && f.format != "json")
    throw std::invalid_argument("--format: '" + f.format + "' (choose from table, json)");
  const history::HistoryDb db(f.db, history::HistoryDb::Mode::read);
  const std::vector<history::SeriesKey> all = db.series_keys();
  check_held(f.db, "--workload", f.workload, all, workload_of);
  check_held(f.db, "--branch", f.branch, all, branch_of);
  check_held(f.db, "--testbed", f.testbed, all, testbed_of);
  const std::vector<std::string> metrics =
      f.metrics.empty() ? std::vector<std::string>{std::string(rs::metric_row(rs::Metric::peak_rss_bytes).name)}
                        : held_metrics(f.db, f.metrics, all);
  std::vector<history::SeriesKey> keys = db.series_keys({metrics, f.workload});
  std::erase_if(keys, [&](const history::SeriesKey& k) {
    return (!f.branch.empty() && k.branch != f.branch) || (!f.testbed.empty() && k.testbed != f.testbed);
  });
  const ChangesFound found = find_changes(db, keys, f.since);
  std::cout << (f.format == "json" ? changes_json(db, found, metrics, f.since) : changes_table(found));
  return kExitOk;
}

int run_show(const ShowFlags& f) {
  if (f.format != "table" && f.format != "json")
    throw std::invalid_argument("--format: '" + f.format + "' (choose from table, json)");
  const history::HistoryDb db(f.db, history::HistoryDb::Mode::read);
  if (db.run_count() == 0) std::cerr << "allocmark history: " << rs::terminal_line(f.db) << " holds no runs yet\n";
  const std::vector<history::SeriesKey> keys = chosen_series(db, f);
  std::cout << (f.format == "json" ? json_of(db, keys) : table_of(db, keys));
  return kExitOk;
}

CLI::App* add_changes_command(CLI::App* history, ChangesFlags& f) {
  auto* cmd = history->add_subcommand("changes", "where each series stepped (change points), newest first, with the "
                                                 "series that moved together");
  cmd->add_option("db", f.db, "the history file")->required();
  cmd->add_option("--metric", f.metrics, "metrics, comma-separated (default peak_rss_bytes)")->allow_extra_args(false);
  cmd->add_option("--workload", f.workload, "only this workload");
  cmd->add_option("--since", f.since, "only changes whose first commit after is REV or later (a commit or its prefix)");
  cmd->add_option("--branch", f.branch, "only this branch");
  cmd->add_option("--testbed", f.testbed, "only this testbed");
  cmd->add_option("--format", f.format, "table (default) or json");
  return cmd;
}

}  // namespace

void add_history_label_flags(CLI::App* cmd, history::RunLabels& labels) {
  cmd->add_option("--commit", labels.commit, "the commit the results measured (7 to 40 hex digits)");
  cmd->add_option("--branch", labels.branch, "the branch it is on (default main)");
  cmd->add_option("--time", labels.time,
                  "when the commit was made, ISO 8601 (default: the commit's date in the current git repository, else now)");
  cmd->add_option("--testbed", labels.testbed, "the machine's name in the history (default: its host name)");
}

void add_to_history(const std::string& db_path, const std::string& results, const history::RunLabels& labels,
                    const std::string& who) {
  const history::FolderRun run = history::read_folder_run(results, labels);
  history::HistoryDb db(db_path, history::HistoryDb::Mode::write);
  const std::string where = fmt::format("{} at commit {} (branch {}, testbed {})", rs::terminal_line(results),
                                        rs::terminal_line(run.run.commit), rs::terminal_line(run.run.branch),
                                        rs::terminal_line(run.run.testbed));
  if (!db.add_run(run.run, run.cells)) {
    std::cerr << who << ": " << rs::terminal_line(db_path) << " already holds " << where << "; nothing added\n";
    return;
  }
  std::cerr << fmt::format("{}: added {} ({} cells, {} values{}) to {}\n", who, where, run.cells.size(), run.values,
                           run.cells_not_ok ? fmt::format("; {} cells not ok, without figures", run.cells_not_ok) : "",
                           rs::terminal_line(db_path));
}

Subcommand add_history_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("history", "the results history across commits (docs/history.md): add, show, changes");
  cmd->require_subcommand(1);
  auto add = std::make_shared<AddFlags>();
  auto* add_cmd = cmd->add_subcommand("add", "add a results folder's cells to a history file under a commit");
  add_cmd->add_option("db", add->db, "the history file (created when missing)")->required();
  add_cmd->add_option("results", add->results, "the results folder to add")->required();
  add_history_label_flags(add_cmd, add->labels);
  add_cmd->get_option("--commit")->required();
  auto show = std::make_shared<ShowFlags>();
  auto* show_cmd = cmd->add_subcommand("show", "each series of a history, newest commit first, with median and spread");
  show_cmd->add_option("db", show->db, "the history file")->required();
  show_cmd->add_option("--metric", show->metrics, "metrics, comma-separated (default: the gated ones in table, all in json)")
      ->allow_extra_args(false);
  show_cmd->add_option("--workload", show->workload, "only this workload");
  show_cmd->add_option("--format", show->format, "table (default) or json");
  auto changes = std::make_shared<ChangesFlags>();
  auto* changes_cmd = add_changes_command(cmd, *changes);
  return {cmd, [add_cmd, add, show, changes_cmd, changes] {
            if (add_cmd->parsed()) {
              add_to_history(add->db, add->results, add->labels, "allocmark history");
              return static_cast<int>(kExitOk);
            }
            return changes_cmd->parsed() ? run_changes(*changes) : run_show(*show);
          }};
}

}  // namespace allocmark::cli
