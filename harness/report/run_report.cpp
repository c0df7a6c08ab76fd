#include "harness/report/run_report.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "harness/report/charts.h"
#include "harness/report/html.h"
#include "harness/report/verdict.h"
#include "harness/results/folder.h"
#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/model.h"
#include "harness/results/reporters/text.h"

namespace allocmark::report {

namespace {

namespace fs = std::filesystem;
namespace rs = allocmark::results;
using nlohmann::json;

// The metrics of the per-phase table: the memory figures, throughput and time, where threads waited.
const std::vector<rs::Metric> kPhaseMetrics{rs::Metric::peak_rss_bytes, rs::Metric::end_rss_bytes,
                                            rs::Metric::rss_above_idle_over_live, rs::Metric::ops_per_s,
                                            rs::Metric::wall_s, rs::Metric::lock_wait_s,
                                            rs::Metric::alloc_p99_ns, rs::Metric::alloc_p999_ns,
                                            rs::Metric::vol_ctx_switches_per_mop, rs::Metric::runqueue_wait_share};

std::string text_of(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump();
}
std::string field(const json& object, const char* name) {
  if (!object.is_object()) return "";
  auto it = object.find(name);
  return it == object.end() ? "" : text_of(*it);
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

std::string when(const json& started) {
  if (!started.is_number_integer()) return "";
  std::time_t t = started.get<std::time_t>();
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

std::string joined(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : separator) + i;
  return out;
}

// "KEY=value KEY=value" of an environment or parameter object.
std::string assignments(const json& object) {
  std::vector<std::string> items;
  if (object.is_object())
    for (const auto& [k, v] : object.items()) items.push_back(k + "=" + text_of(v));
  return items.empty() ? "-" : joined(items, " ");
}

json read_meta(const std::string& dir, std::vector<std::string>& warnings) {
  const rs::meta::Recorded meta = rs::meta::read(dir);
  if (meta.state == rs::meta::Recorded::State::missing)
    warnings.push_back(meta.path + " is missing: the machine and matrix are not recorded");
  else if (meta.state == rs::meta::Recorded::State::invalid)
    warnings.push_back(meta.path + " is not a JSON object: the machine and matrix are unknown");
  return meta.value;
}

void machine_section(html::Document& doc, const json& meta) {
  doc.heading(2, "Machine", "machine");
  const json machine = meta.value("machine", json::object());
  if (machine.empty()) {
    doc.paragraph(fmt::format("Not recorded ({} has no machine).", rs::layout::kMeta), "warn");
  } else {
    std::vector<std::pair<std::string, std::string>> facts;
    auto add = [&](std::string term, std::string value) {
      if (!value.empty()) facts.emplace_back(std::move(term), std::move(value));
    };
    add("host", field(machine, "host"));
    add("CPU", field(machine, "cpu_model") + (field(machine, "arch").empty() ? "" : " (" + field(machine, "arch") + ")"));
    add("cores", fmt::format("{} usable of {} online", field(machine, "cpus_usable"), field(machine, "cpus_online")));
    if (machine.contains("memory_bytes") && machine["memory_bytes"].is_number())
      add("memory", gib(machine["memory_bytes"].get<double>()));
    if (machine.contains("numa") && machine["numa"].is_object()) add("NUMA nodes", field(machine["numa"], "nodes"));
    add("kernel", field(machine, "kernel"));
    add("transparent huge pages", fmt::format("enabled: {}, defrag: {}", field(machine, "thp_enabled"), field(machine, "thp_defrag")));
    add("overcommit_memory", field(machine, "overcommit_memory"));
    add("glibc", field(machine, "glibc_version"));
    add("page size", field(machine, "page_size"));
    if (meta.contains("allocmark"))
      add("allocmark", field(meta["allocmark"], "version") + " (" + field(meta["allocmark"], "git_commit") + ")");
    doc.facts(facts);
  }

  doc.heading(3, "Allocators");
  html::Table table{"allocator-table", {{"allocator"}, {"backend"}, {"version"}, {"library serving malloc"}, {"environment"}, {"preload check"}}, {}, false};
  if (meta.contains("allocators") && meta["allocators"].is_array())
    for (const auto& a : meta["allocators"]) {
      std::string served = field(a, "served_by");
      if (served.empty()) served = field(a, "library");
      table.rows.push_back({{field(a, "name")}, {field(a, "backend")}, {field(a, "version")}, {served},
                            {assignments(a.value("env", json::object()))}, {field(a, "preload_check")}});
    }
  if (table.rows.empty()) doc.paragraph(fmt::format("Not recorded ({} lists no allocators).", rs::layout::kMeta), "warn");
  else doc.table(table);
}

void matrix_section(html::Document& doc, const json& meta) {
  doc.heading(2, "Matrix and command", "matrix");
  std::vector<std::string> commands;
  if (meta.contains("runs") && meta["runs"].is_array())
    for (const auto& r : meta["runs"])
      commands.push_back(fmt::format("[{}{}] {}", field(r, "mode"), when(r.value("started", json())).empty() ? "" : ", " + when(r["started"]),
                                     field(r, "command")));
  if (commands.empty()) doc.paragraph(fmt::format("Command: not recorded in {} (older folder).", rs::layout::kMeta), "note");
  else doc.code(joined(commands, "\n"));

  const json matrix = meta.value("matrix", json::object());
  if (matrix.empty()) {
    doc.paragraph("Matrix: not recorded.", "warn");
    return;
  }
  std::vector<std::pair<std::string, std::string>> facts;
  if (!field(meta, "matrix_file").empty()) facts.emplace_back("matrix file", field(meta, "matrix_file"));
  std::vector<std::string> allocators, workloads, threads;
  if (matrix.contains("allocators") && matrix["allocators"].is_array())
    for (const auto& a : matrix["allocators"]) allocators.push_back(field(a, "name"));
  if (matrix.contains("threads") && matrix["threads"].is_array())
    for (const auto& t : matrix["threads"]) threads.push_back(text_of(t));
  facts.emplace_back("allocators", joined(allocators));
  if (matrix.contains("workloads") && matrix["workloads"].is_array())
    for (const auto& w : matrix["workloads"])
      facts.emplace_back("workload " + field(w, "name"), assignments(w.value("params", json::object())));
  facts.emplace_back("threads", joined(threads));
  facts.emplace_back("repetitions", field(matrix, "reps"));
  facts.emplace_back("size", field(matrix, "size"));
  facts.emplace_back("cells", field(matrix, "cells"));
  facts.emplace_back("timeout per cell", field(matrix, "timeout_s") + " s");
  facts.emplace_back("RSS sampling", field(matrix, "sample_ms") + " ms");
  facts.emplace_back("thread placement", rs::meta::placement_text(matrix));
  doc.facts(facts);
}

html::Cell spread_cell(rs::Metric m, const rs::Spread& s) {
  if (s.n == 0) return {"-", std::nullopt, "", ""};
  std::string detail;
  if (s.n > 1 && s.min != s.max) detail = fmt::format("[{}-{}]", rs::text::value_text(m, s.min), rs::text::value_text(m, s.max));
  return {rs::text::value_text(m, s.median), s.median, detail, ""};
}

std::string status_text(const rs::Group& g) {
  std::vector<std::string> parts;
  for (const auto& [status, n] : g.statuses) parts.push_back(fmt::format("{} {}", n, status));
  return joined(parts);
}

void verdict_section(html::Document& doc, const rs::Model& model) {
  doc.heading(2, "Verdict", "verdict");
  auto grouping = model.group({rs::Dimension::workload, rs::Dimension::threads, rs::Dimension::allocator});
  auto rows = verdicts(grouping);
  bool by_host = std::any_of(rows.begin(), rows.end(), [](const Verdict& v) { return !v.host.empty(); });
  html::Table table{"verdict-table", {}, {}, false};
  table.columns = {{"workload"}, {"threads", true}};
  if (by_host) table.columns.push_back({"host"});
  table.columns.insert(table.columns.end(),
                       {{"figure"}, {"leader"}, {"leader's median", true, "median [min-max] over ok repetitions, n = repetitions"},
                        {"runner-up"}, {"runner-up's median", true, "median [min-max] over ok repetitions, n = repetitions"},
                        {"lead", true, "runner-up / leader for memory, leader / runner-up for ops/s: how many times better"},
                        {"is the lead real?"}});
  std::vector<std::string> without_figures;
  for (const auto& v : rows) {
    if (v.contenders == 0) {
      // Said once per workload and thread count below the table, not as three empty rows.
      std::string where = fmt::format("{} at {} thread{}{}", v.workload, v.threads, v.threads == 1 ? "" : "s",
                                      v.host.empty() ? "" : " on " + v.host);
      if (without_figures.empty() || without_figures.back() != where) without_figures.push_back(where);
      continue;
    }
    std::vector<html::Cell> row{{v.workload}, {std::to_string(v.threads), v.threads}};
    if (by_host) row.push_back({v.host});
    row.push_back({rs::text::metric_header(v.metric) + (v.lower_is_better ? " (lower is better)" : " (higher is better)")});
    auto contender = [&](const std::optional<Contender>& c) {
      if (!c) return std::pair<html::Cell, html::Cell>{{"-"}, {"-"}};
      html::Cell value = spread_cell(v.metric, c->spread);
      value.detail = (value.detail.empty() ? "" : value.detail + " ") + fmt::format("n={}", c->spread.n);
      return std::pair<html::Cell, html::Cell>{{c->allocator}, value};
    };
    auto [leader, leader_value] = contender(v.leader);
    auto [runner, runner_value] = contender(v.runner_up);
    row.insert(row.end(), {leader, leader_value, runner, runner_value});
    if (v.lead) row.push_back({fmt::format("x{:.2f}", *v.lead), *v.lead});
    else row.push_back({"-"});
    std::string css = v.noise == Noise::separated ? "good" : v.noise == Noise::overlapping ? "warn" : "note";
    std::string noise(noise_text(v.noise));
    if (v.noise == Noise::no_contest && v.contenders == 1) noise = "only " + v.leader->allocator + " has this figure";
    row.push_back({noise, std::nullopt, "", css});
    table.rows.push_back(std::move(row));
  }
  if (table.rows.empty()) {
    doc.paragraph("No verdict: no cell finished ok.", "bad");
    return;
  }
  doc.paragraph(
      "Per workload and thread count, over whole cells (peak RSS and peak live bytes are the maxima over the "
      "phases, ops/s is total operations over total phase time), ok repetitions only. The lead compares the "
      "two best medians; the last column says whether the repetitions' ranges separate them.", "note");
  doc.table(table);
  if (!without_figures.empty())
    doc.paragraph("Not in the verdict (no ok cell has the figure): " + joined(without_figures, "; ") + ".", "bad");
}

void recommendation_section(html::Document& doc, const rs::Advice& advice) {
  doc.heading(2, "Recommendation", "recommendation");
  if (!advice.any) {
    doc.paragraph("No recommendation: no allocator ran the program successfully.", "bad");
  } else {
    std::vector<std::pair<std::string, std::string>> picks;
    for (const auto& line : rs::pick_lines(advice)) picks.emplace_back(line.what, line.text);
    doc.facts(picks);
  }
  html::Table table{"advice-table", {{"allocator"}, {"ok", false, "repetitions that finished ok, of all"},
                                     {rs::text::metric_header(rs::Metric::peak_rss_bytes), true, "median [min-max] over ok repetitions, whole run"},
                                     {rs::text::metric_header(rs::Metric::wall_s), true, "median [min-max] over ok repetitions"},
                                     {"trade-off", true, "peak RSS and wall time as ratios to the best medians, summed: lower is better"}},
                    {}, true};
  for (const auto& c : advice.candidates) {
    std::vector<html::Cell> row{{c.allocator}, {fmt::format("{}/{}", c.ok, c.cells)}};
    if (c.ok) {
      row.push_back(spread_cell(rs::Metric::peak_rss_bytes, c.peak_rss_bytes));
      row.push_back(spread_cell(rs::Metric::wall_s, c.wall_s));
      row.push_back({fmt::format("{:.3f}", c.tradeoff), c.tradeoff});
    } else {
      row.insert(row.end(), {{"-"}, {"-"}, {"-", std::nullopt, "", "bad"}});
    }
    table.rows.push_back(std::move(row));
  }
  doc.paragraph(fmt::format("{} under {} allocators (allocmark advise).", advice.workload, advice.candidates.size()), "note");
  doc.table(table);
  if (!advice.failed.empty()) doc.bullets(advice.failed, "bad");
}

void charts_section(html::Document& doc, const std::string& dir, RunReport& report) {
  doc.heading(2, "Charts", "charts");
  TemporaryFolder tmp;
  ChartRequest request;
  request.dir = dir;
  request.out = tmp.path();
  prepare_charts(request);
  DrawnCharts drawn = draw_charts_captured(request);
  report.charts = embed_charts(doc, drawn, "docs/charts.md says what it shows and how to read it", report.chart_errors);
  if (drawn.files.empty()) doc.paragraph("No chart: this run has no data a chart can draw (reasons above).", "warn");
}

void phase_section(html::Document& doc, const rs::Model& model) {
  doc.heading(2, "Every group and phase", "phases");
  rs::Grouping grouping = model.group(rs::default_dimensions());
  html::Table table{"phase-table", {}, {}, true};
  for (rs::Dimension d : grouping.dimensions)
    table.columns.push_back({std::string(rs::dimension_name(d)), d == rs::Dimension::threads});
  table.columns.push_back({"n", true, "cells (repetitions) in the group, any status"});
  table.columns.push_back({"status"});
  for (rs::Metric m : kPhaseMetrics)
    table.columns.push_back({rs::text::metric_header(m), true, "median [min-max] over ok repetitions"});
  for (const auto& g : grouping.groups) {
    std::vector<html::Cell> row;
    for (const auto& v : g.values) {
      html::Cell c{rs::value_label(v)};
      if (v.is_number()) c.sort_key = v.get<double>();
      row.push_back(c);
    }
    row.push_back({std::to_string(g.cells), static_cast<double>(g.cells)});
    bool all_ok = g.statuses.size() == 1 && g.statuses.count("ok");
    row.push_back({status_text(g), std::nullopt, "", all_ok ? "" : "bad"});
    for (rs::Metric m : kPhaseMetrics) row.push_back(spread_cell(m, g.metric(m)));
    table.rows.push_back(std::move(row));
  }
  std::string notes;
  for (rs::Metric m : kPhaseMetrics)
    if (auto note = rs::text::metric_note(m); !note.empty()) notes += note + "; ";
  doc.paragraph(fmt::format("One row per group (workload x threads x allocator) and phase, as {}; a cell "
                            "that did not finish ok is one \"{}\" row with no figures. {}median [min-max] over "
                            "repetitions. Click a column header to sort.",
                            rs::layout::kSummaryJson, rs::kCellPhase, notes),
                "note");
  doc.table(table);
}

void failures_section(html::Document& doc, const std::string& dir, const std::string& page, const rs::Model& model) {
  const fs::path page_dir = fs::absolute(page).lexically_normal().parent_path();
  doc.heading(2, "Cells that did not finish ok", "failures");
  html::Table table{"failure-table", {{"workload"}, {"threads", true}, {"allocator"}, {"repetition", true}, {"attempt", true},
                                 {"status"}, {"reason"}, {"log"}}, {}, false};
  for (const auto& cell : model.cells()) {
    if (cell.ok()) continue;
    const auto& id = model.identity(cell);
    const std::string log = rs::layout::cell_files(cell.key, cell.attempt).log;
    const fs::path log_path = fs::absolute(fs::path(dir) / log).lexically_normal();
    std::error_code ec;
    html::Cell log_cell{"-"};
    if (fs::is_regular_file(fs::symlink_status(log_path, ec))) {
      log_cell.text = log;
      log_cell.href = html::path_href(log_path.lexically_relative(page_dir).string());
    }
    table.rows.push_back({{id.workload}, {std::to_string(cell.threads), cell.threads}, {id.allocator},
                          {std::to_string(cell.rep), cell.rep}, {std::to_string(cell.attempt), cell.attempt},
                          {cell.status, std::nullopt, "", "bad"}, {cell.error.value_or("(no reason recorded)")}, log_cell});
  }
  if (table.rows.empty()) {
    doc.paragraph("None: every cell finished ok.", "good");
    return;
  }
  doc.table(table);
}

}  // namespace

RunReport build_run_report(const std::string& dir, const std::string& page, const rs::Advice* advice) {
  rs::Model model = rs::Model::load({dir});
  std::vector<std::string> warnings = model.warnings();
  json meta = read_meta(dir, warnings);

  RunReport report;
  std::string name = fs::path(dir).lexically_normal().filename().string();
  if (name.empty() || name == ".") name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  html::Document doc("allocmark report: " + name);
  doc.heading(1, "allocmark report: " + name);
  // Said before anything else: every figure below may change when the run writing the folder ends.
  for (const auto& notice : model.writer_notices()) doc.paragraph(notice, "banner");

  std::map<std::string, std::size_t> statuses;
  for (const auto& cell : model.cells()) statuses[cell.status]++;
  std::vector<std::string> counts;
  for (const auto& [status, n] : statuses) counts.push_back(fmt::format("{} {}", n, status));
  std::time_t now = std::time(nullptr);
  doc.paragraph(fmt::format("Results folder {} ({} cells: {}), reported {}.", fs::absolute(dir).lexically_normal().string(),
                            model.cells().size(), joined(counts), when(json(now))),
                "note");
  if (std::string notice = rs::lab_notice(meta); !notice.empty())
    doc.paragraph("These are " + notice + ".", "warn");
  bool any_ok = statuses.count("ok") > 0;
  if (!any_ok)
    doc.paragraph(fmt::format("Every cell failed: no figures to compare. The {} cells and their reasons are listed "
                              "under \"Cells that did not finish ok\".", model.cells().size()),
                  "bad");
  else if (statuses.size() > 1)
    doc.paragraph(fmt::format("{} cells did not finish ok; their reasons are at the end. Figures are over ok cells only.",
                              model.cells().size() - statuses["ok"]),
                  "warn");

  std::vector<std::pair<std::string, std::string>> anchors;
  if (advice) anchors.emplace_back("recommendation", "Recommendation");
  anchors.insert(anchors.end(), {{"machine", "Machine"}, {"matrix", "Matrix and command"}, {"verdict", "Verdict"},
                                 {"charts", "Charts"}, {"phases", "Every group and phase"},
                                 {"failures", "Cells that did not finish ok"}});
  if (!warnings.empty()) anchors.emplace_back("warnings", "Warnings");
  doc.contents(anchors);
  // The answer the reader came for first; the machine and matrix say what it rests on.
  if (advice) recommendation_section(doc, *advice);
  machine_section(doc, meta);
  matrix_section(doc, meta);
  verdict_section(doc, model);
  charts_section(doc, dir, report);
  phase_section(doc, model);
  failures_section(doc, dir, page, model);
  if (!warnings.empty()) {
    doc.heading(2, "Warnings from reading the folder", "warnings");
    doc.bullets(warnings, "warn");
  }
  report.html = doc.str();
  return report;
}

std::size_t embed_charts(html::Document& doc, const DrawnCharts& drawn, const std::string& caption,
                         std::vector<std::string>& errors) {
  for (const auto& file : drawn.files) {
    fs::path path(file);
    std::string name = path.filename().string();
    doc.figure("image/png", read_file(file), name, name + " (" + caption + ")", "chart-" + path.stem().string());
  }
  if (!drawn.skipped.empty()) {
    doc.heading(3, "Charts not drawn");
    doc.bullets(drawn.skipped, "skipped");
  }
  errors = drawn.errors;
  if (drawn.exit_code != 0 && drawn.errors.empty())
    errors.push_back(fmt::format("the plotting script exited with status {}", drawn.exit_code));
  if (!errors.empty()) {
    doc.heading(3, "Charts that failed to draw");
    doc.bullets(errors, "bad");
  }
  return drawn.files.size();
}

}  // namespace allocmark::report
