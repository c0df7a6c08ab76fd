// `allocmark history add DB RESULTS --commit SHA` and `allocmark history show DB`: the results
// history (harness/history/store.h; docs/history.md). Adding reads the folder as `show` does;
// showing prints each series (a metric of a cell phase on a branch and testbed) newest commit first.
#include "harness/cli/history.h"

#include <fmt/format.h>

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

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The metrics asked for, checked against those the history holds: a typo must not read as "no data".
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
  std::vector<std::string> out = split_commas(f.metrics, "--metric");
  for (const auto& m : out)
    if (!held.contains(m))
      throw std::invalid_argument(fmt::format("--metric: '{}' is not in {} (there: {})", m, f.db, joined(held)));
  return out;
}

std::vector<history::SeriesKey> chosen_series(const history::HistoryDb& db, const ShowFlags& f) {
  const std::vector<history::SeriesKey> all = db.series_keys();
  if (!f.workload.empty()) {
    std::set<std::string> workloads;
    for (const auto& k : all) workloads.insert(k.cell.workload);
    if (!workloads.contains(f.workload))
      throw std::invalid_argument(
          fmt::format("--workload: no cell of {} has '{}' (there: {})", f.db, f.workload, joined(workloads)));
  }
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

int run_show(const ShowFlags& f) {
  if (f.format != "table" && f.format != "json")
    throw std::invalid_argument("--format: '" + f.format + "' (choose from table, json)");
  const history::HistoryDb db(f.db, history::HistoryDb::Mode::read);
  if (db.run_count() == 0) std::cerr << "allocmark history: " << rs::terminal_line(f.db) << " holds no runs yet\n";
  const std::vector<history::SeriesKey> keys = chosen_series(db, f);
  std::cout << (f.format == "json" ? json_of(db, keys) : table_of(db, keys));
  return kExitOk;
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
  auto* cmd = app.add_subcommand("history", "the results history across commits (docs/history.md): add, show");
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
  return {cmd, [add_cmd, add, show] {
            if (add_cmd->parsed()) {
              add_to_history(add->db, add->results, add->labels, "allocmark history");
              return static_cast<int>(kExitOk);
            }
            return run_show(*show);
          }};
}

}  // namespace allocmark::cli
