// `allocmark history add DB RESULTS --commit SHA`, `allocmark history show DB` and `allocmark history
// changes DB`: the results history (harness/history/store.h; docs/history.md). Adding reads the
// folder as `show` does; showing prints each series (a metric of a cell phase on a branch and
// testbed) newest commit first; changes runs history/changepoints.h over each series.
#include "harness/cli/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "harness/history/bmf.h"
#include "harness/history/changes.h"
#include "harness/history/export.h"
#include "harness/history/import.h"
#include "harness/report/trend_page.h"
#include "harness/results/folder.h"
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

// How `history show`, `report` and `changes` choose series: one set of flags, read one way.
struct SeriesFilter {
  std::string db, workload, branch, testbed;
  std::vector<std::string> metrics;
};

// `history show` and `history report`; `out` is the page report writes.
struct ShowFlags : SeriesFilter {
  std::string format = "table", out;
};

struct ExportFlags {
  std::string db, format = "json";
  std::vector<std::string> metrics;
};

struct ImportFlags {
  std::string db, file;
};

struct ChangesFlags : SeriesFilter {
  std::string format = "table", since;
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
std::string branch_of(const history::SeriesKey& k) { return k.branch; }
std::string testbed_of(const history::SeriesKey& k) { return k.testbed; }

// The series of `metrics` the filter's workload, branch and testbed choose, each value checked.
std::vector<history::SeriesKey> filtered_series(const history::HistoryDb& db, const SeriesFilter& f,
                                                const std::vector<history::SeriesKey>& all,
                                                const std::vector<std::string>& metrics) {
  check_held(f.db, "--workload", f.workload, all, workload_of);
  check_held(f.db, "--branch", f.branch, all, branch_of);
  check_held(f.db, "--testbed", f.testbed, all, testbed_of);
  std::vector<history::SeriesKey> keys = db.series_keys({metrics, f.workload});
  std::erase_if(keys, [&](const history::SeriesKey& k) {
    return (!f.branch.empty() && k.branch != f.branch) || (!f.testbed.empty() && k.testbed != f.testbed);
  });
  return keys;
}

std::vector<history::SeriesKey> chosen_series(const history::HistoryDb& db, const ShowFlags& f) {
  const std::vector<history::SeriesKey> all = db.series_keys();
  return filtered_series(db, f, all, chosen_metrics(f, all));
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

// ---- history changes: history/changes.h over every series, grouped by the commit they stepped at.

using history::ChangeGroup;
using history::ChangesFound;
using history::FoundChange;

std::string short_sha(const std::string& commit) { return rs::terminal_line(commit.substr(0, 12)); }

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


int run_changes(const ChangesFlags& f) {
  if (f.format != "table" && f.format != "json")
    throw std::invalid_argument("--format: '" + f.format + "' (choose from table, json)");
  const history::HistoryDb db(f.db, history::HistoryDb::Mode::read);
  const std::vector<history::SeriesKey> all = db.series_keys();
  const std::vector<std::string> metrics =
      f.metrics.empty() ? std::vector<std::string>{std::string(rs::metric_row(rs::Metric::peak_rss_bytes).name)}
                        : held_metrics(f.db, f.metrics, all);
  const std::vector<history::SeriesKey> keys = filtered_series(db, f, all, metrics);
  const ChangesFound found = history::find_changes(db, keys, f.since);
  std::cout << (f.format == "json" ? changes_json(db, found, metrics, f.since) : changes_table(found));
  return kExitOk;
}

// Bencher Metric Format (history/bmf.h) is one run's figures: the newest commit of one branch and
// testbed.
std::string bmf_of(const history::HistoryDb& db, const std::vector<history::SeriesKey>& keys) {
  std::set<std::string> axes;
  for (const auto& k : keys) axes.insert(k.branch + ", testbed " + k.testbed);
  if (axes.size() > 1)
    throw std::invalid_argument(fmt::format("--format bmf: {} holds series on {} branches and testbeds (branch {}); BMF "
                                            "is one run's figures: choose one with --branch and --testbed",
                                            db.path(), axes.size(), joined(axes)));
  ordered_json out = ordered_json::object();
  if (keys.empty()) return history::bmf_text(out);
  const std::string newest = db.commits(keys.front().branch, keys.front().testbed).back().commit;
  for (const auto& k : keys) {
    const auto points = db.series(k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed);
    if (points.empty() || points.back().commit != newest) continue;  // the cell did not run at that commit
    history::add_bmf_measure(out, history::bmf_benchmark(k.cell.cell_id, k.phase), k.metric, points.back().values);
  }
  std::cerr << fmt::format("allocmark history: BMF of commit {} (branch {}, testbed {})\n", rs::terminal_line(newest),
                           rs::terminal_line(keys.front().branch), rs::terminal_line(keys.front().testbed));
  return history::bmf_text(out);
}

int run_show(const ShowFlags& f) {
  if (f.format != "table" && f.format != "json" && f.format != "bmf")
    throw std::invalid_argument("--format: '" + f.format + "' (choose from table, json, bmf)");
  const history::HistoryDb db(f.db, history::HistoryDb::Mode::read);
  if (db.run_count() == 0) std::cerr << "allocmark history: " << rs::terminal_line(f.db) << " holds no runs yet\n";
  const std::vector<history::SeriesKey> keys = chosen_series(db, f);
  std::cout << (f.format == "json" ? json_of(db, keys) : f.format == "bmf" ? bmf_of(db, keys) : table_of(db, keys));
  return kExitOk;
}

// Each commit's subject from the git repository in the current folder, where it has the commit.
std::map<std::string, std::string> subjects_of(const history::HistoryDb& db, const std::vector<history::SeriesKey>& keys) {
  std::set<std::string> commits;
  for (const auto& k : keys)
    for (const auto& c : db.commits(k.branch, k.testbed)) commits.insert(c.commit);
  std::map<std::string, std::string> subjects;
  for (const auto& c : commits) {
    // A history from elsewhere may hold any text as a commit: only hex ever reaches git's argv.
    if (!history::commit_problem(c, "").empty()) continue;
    if (std::string subject = history::commit_field(c, "%s"); !subject.empty()) subjects[c] = subject;
  }
  return subjects;
}

int run_report(const ShowFlags& f) {
  const history::HistoryDb db(f.db, history::HistoryDb::Mode::read);
  check_output_file(f.out, "-o");
  std::error_code ec;
  if (std::filesystem::equivalent(f.out, f.db, ec))
    throw std::invalid_argument(fmt::format("-o {}: is the history itself; name the page to write", f.out));
  const std::vector<history::SeriesKey> keys = chosen_series(db, f);
  if (keys.empty())
    throw std::invalid_argument(fmt::format("{}: no series to draw ({} runs; `allocmark history add` adds some)", f.db,
                                            db.run_count()));
  const history::ChangesFound found = history::find_changes(db, keys);
  const report::TrendPage page = report::build_trend_page({&db, keys, &found, subjects_of(db, keys)});
  rs::write_file_atomically(f.out, page.html);
  for (const auto& e : page.chart_errors) std::cerr << "allocmark history: warning: chart failed: " << e << "\n";
  std::cout << f.out << "\n";
  return page.chart_errors.empty() ? kExitOk : kExitCellsFailed;
}

int run_export(const ExportFlags& f) {
  if (f.format != "json" && f.format != "jsonl")
    throw std::invalid_argument("--format: '" + f.format + "' (choose from json, jsonl)");
  const history::HistoryDb db(f.db, history::HistoryDb::Mode::read);
  // A metric of the metric table is a name even where this history holds none of it yet (a new one).
  std::vector<std::string> metrics = split_commas(f.metrics, "--metric");
  for (const auto& m : metrics)
    if (!rs::metric_from_name(m)) (void)held_metrics(f.db, {m}, db.series_keys());
  if (f.format == "jsonl")
    std::cout << history::export_lines(db, metrics);
  else
    std::cout << history::export_json(db, metrics).dump(2, ' ', false, ordered_json::error_handler_t::replace) << "\n";
  return kExitOk;
}

// Reads the whole file and checks every run before the history is opened: bad input writes nothing.
int run_import(const ImportFlags& f) {
  std::error_code ec;
  if (std::filesystem::is_directory(f.file, ec)) throw std::invalid_argument(f.file + ": a folder, not an export");
  std::ifstream in(f.file, std::ios::binary);
  if (!in) throw std::invalid_argument(f.file + ": cannot read it (no such file?)");
  std::ostringstream text;
  text << in.rdbuf();
  const std::vector<history::ImportedRun> runs = history::read_export(text.str(), f.file);
  history::HistoryDb db(f.db, history::HistoryDb::Mode::write);
  const history::ImportCounts counts = history::import_runs(db, runs);
  std::cerr << fmt::format("allocmark history: imported {} run{} from {} into {}{}\n", counts.added,
                           counts.added == 1 ? "" : "s", rs::terminal_line(f.file), rs::terminal_line(f.db),
                           counts.held ? fmt::format(" ({} it held already)", counts.held) : "");
  return kExitOk;
}

void add_filter_flags(CLI::App* cmd, SeriesFilter& f, const std::string& metric_help) {
  cmd->add_option("db", f.db, "the history file")->required();
  cmd->add_option("--metric", f.metrics, metric_help)->allow_extra_args(false);
  cmd->add_option("--workload", f.workload, "only this workload");
  cmd->add_option("--branch", f.branch, "only this branch");
  cmd->add_option("--testbed", f.testbed, "only this testbed");
}

CLI::App* add_show_command(CLI::App* history, ShowFlags& f) {
  auto* cmd = history->add_subcommand("show", "each series of a history, newest commit first, with median and spread");
  add_filter_flags(cmd, f, "metrics, comma-separated (default: the gated ones in table and bmf, all in json)");
  cmd->add_option("--format", f.format, "table (default), json, or bmf (Bencher Metric Format: the newest commit's figures)");
  return cmd;
}

CLI::App* add_report_command(CLI::App* history, ShowFlags& f) {
  auto* cmd = history->add_subcommand("report", "the trend page: one self-contained HTML page of the series on a commit "
                                                "axis with their change points (docs/history.md)");
  add_filter_flags(cmd, f, "metrics, comma-separated (default: the gated ones)");
  cmd->add_option("-o,--out", f.out, "the HTML file to write")->required();
  return cmd;
}

CLI::App* add_export_command(CLI::App* history, ExportFlags& f) {
  auto* cmd = history->add_subcommand("export", "the whole history as one stable JSON document on stdout (docs/history.md)");
  cmd->add_option("db", f.db, "the history file")->required();
  cmd->add_option("--format", f.format, "json (default: one document) or jsonl (one run a line, each cell with its identity)");
  cmd->add_option("--metric", f.metrics, "only these metrics' values, comma-separated (default: every one)")
      ->allow_extra_args(false);
  return cmd;
}

CLI::App* add_import_command(CLI::App* history, ImportFlags& f) {
  auto* cmd = history->add_subcommand("import", "add the runs of a `history export` file (json or jsonl) to a history; "
                                                "runs it holds already are skipped (docs/history.md)");
  cmd->add_option("db", f.db, "the history file (created when missing)")->required();
  cmd->add_option("file", f.file, "what `history export` wrote")->required();
  return cmd;
}

CLI::App* add_changes_command(CLI::App* history, ChangesFlags& f) {
  auto* cmd = history->add_subcommand("changes", "where each series stepped (change points), newest first, with the "
                                                 "series that moved together");
  add_filter_flags(cmd, f, "metrics, comma-separated (default peak_rss_bytes)");
  cmd->add_option("--since", f.since, "only changes whose first commit after is REV or later (a commit or its prefix)");
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
  auto* cmd = app.add_subcommand("history", "the results history across commits (docs/history.md): add, show, changes, report, export, import");
  cmd->require_subcommand(1);
  auto add = std::make_shared<AddFlags>();
  auto* add_cmd = cmd->add_subcommand("add", "add a results folder's cells to a history file under a commit");
  add_cmd->add_option("db", add->db, "the history file (created when missing)")->required();
  add_cmd->add_option("results", add->results, "the results folder to add")->required();
  add_history_label_flags(add_cmd, add->labels);
  add_cmd->get_option("--commit")->required();
  auto show = std::make_shared<ShowFlags>(), report = std::make_shared<ShowFlags>();
  add_show_command(cmd, *show);
  auto changes = std::make_shared<ChangesFlags>();
  auto* changes_cmd = add_changes_command(cmd, *changes);
  auto* report_cmd = add_report_command(cmd, *report);
  auto exported = std::make_shared<ExportFlags>();
  auto* export_cmd = add_export_command(cmd, *exported);
  auto imported = std::make_shared<ImportFlags>();
  auto* import_cmd = add_import_command(cmd, *imported);
  return {cmd, [add_cmd, add, show, changes_cmd, changes, report_cmd, report, export_cmd, exported, import_cmd,
                imported] {
            if (add_cmd->parsed()) {
              add_to_history(add->db, add->results, add->labels, "allocmark history");
              return static_cast<int>(kExitOk);
            }
            if (report_cmd->parsed()) return run_report(*report);
            if (export_cmd->parsed()) return run_export(*exported);
            if (import_cmd->parsed()) return run_import(*imported);
            return changes_cmd->parsed() ? run_changes(*changes) : run_show(*show);
          }};
}

}  // namespace allocmark::cli
