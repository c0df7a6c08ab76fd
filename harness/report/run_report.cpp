#include "harness/report/run_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
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
#include "harness/matrix/plan.h"
#include "harness/record/cell.h"
#include "harness/settings/setting_keys.h"
#include "harness/report/versions_report.h"
#include "harness/results/folder.h"
#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/model.h"
#include "harness/results/recommendation.h"
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

// "KEY=value KEY=value" of an environment or parameter object.
std::string assignments(const json& object) {
  std::vector<std::string> items;
  if (object.is_object())
    for (const auto& [k, v] : object.items()) items.push_back(k + "=" + text_of(v));
  return items.empty() ? "-" : fmt::format("{}", fmt::join(items, " "));
}

json read_meta(const std::string& dir, std::vector<std::string>& warnings) {
  const rs::meta::Recorded meta = rs::meta::read(dir);
  if (meta.state == rs::meta::Recorded::State::missing)
    warnings.push_back(meta.path + " is missing: the machine and matrix are not recorded");
  else if (meta.state == rs::meta::Recorded::State::invalid)
    warnings.push_back(meta.path + " is not a JSON object: the machine and matrix are unknown");
  return meta.value;
}

// `key`'s array in `object`, empty when it has none.
const json& array_in(const json& object, const char* key) {
  static const json none = json::array();
  return object.is_object() && object.contains(key) && object[key].is_array() ? object[key] : none;
}

void machine_section(html::Document& doc, const json& meta) {
  namespace m = rs::meta;
  const json machine = meta.value(m::kMachine, json::object());
  if (machine.empty()) {
    doc.paragraph(fmt::format("Not recorded ({} has no machine).", rs::layout::kMeta), "warn");
  } else {
    std::vector<std::pair<std::string, std::string>> facts;
    auto add = [&](std::string term, std::string value) {
      if (!value.empty()) facts.emplace_back(std::move(term), std::move(value));
    };
    namespace k = rs::machine_key;
    add("host", field(machine, k::host));
    add("CPU", field(machine, k::cpu_model) + (field(machine, k::arch).empty() ? "" : " (" + field(machine, k::arch) + ")"));
    add("cores", fmt::format("{} usable of {} online", field(machine, k::cpus_usable), field(machine, k::cpus_online)));
    if (machine.contains(k::memory_bytes) && machine[k::memory_bytes].is_number())
      add("memory", gib(machine[k::memory_bytes].get<double>()));
    if (machine.contains(k::numa) && machine[k::numa].is_object()) add("NUMA nodes", field(machine[k::numa], rs::numa_key::kNodes));
    add("kernel", field(machine, k::kernel));
    add("transparent huge pages", fmt::format("enabled: {}, defrag: {}", field(machine, k::thp_enabled), field(machine, k::thp_defrag)));
    add("overcommit_memory", field(machine, k::overcommit_memory));
    if (!rs::page_reporting_notice(meta).empty()) {
      const json reporting = machine.value(k::free_page_reporting, json::object());
      const json block = reporting.is_object() ? reporting.value(rs::page_reporting_key::kBlockBytes, json()) : json();
      add("free page reporting",
          block.is_number_unsigned() ? fmt::format("active, blocks of {} KiB and up: see the note above", block.get<std::uint64_t>() / 1024)
                                     : "active: see the note above");
    }
    add("glibc", field(machine, k::glibc_version));
    add("page size", field(machine, k::page_size));
    if (meta.contains(m::kAllocmark))
      add("allocmark", field(meta[m::kAllocmark], m::identity::kVersion) + " (" + field(meta[m::kAllocmark], m::identity::kGitCommit) + ")");
    doc.facts(facts);
  }

  doc.heading(3, "Allocators");
  html::Table table{"allocator-table", {{"allocator"}, {"backend"}, {"version"}, {"library serving malloc"}, {"environment"}, {"preload check"}}, {}, false};
  for (const auto& entry : array_in(meta, m::kAllocators)) {
    const record::ResolvedAllocator a = record::allocator_of_meta(entry);
    std::string served = field(entry, m::served::kServedBy);
    if (served.empty()) served = a.library;
    table.rows.push_back({{a.name}, {a.backend}, {field(entry, m::served::kVersion)}, {served},
                          {assignments(json(a.env))}, {field(entry, m::served::kPreloadCheck)}});
  }
  if (table.rows.empty()) doc.paragraph(fmt::format("Not recorded ({} lists no allocators).", rs::layout::kMeta), "warn");
  else doc.table(table);
}

void matrix_section(html::Document& doc, const json& meta) {
  namespace m = rs::meta;
  namespace key = matrix::matrix_key;
  std::vector<std::string> commands;
  for (const auto& r : array_in(meta, m::kRuns)) {
    const std::string started = when(r.is_object() ? r.value(m::run_entry::kStarted, json()) : json());
    commands.push_back(fmt::format("[{}{}] {}", field(r, m::run_entry::kMode), started.empty() ? "" : ", " + started,
                                   field(r, m::run_entry::kCommand)));
  }
  if (commands.empty()) doc.paragraph(fmt::format("Command: not recorded in {} (older folder).", rs::layout::kMeta), "note");
  else doc.code(fmt::format("{}", fmt::join(commands, "\n")));

  const json matrix = meta.value(m::kMatrix, json::object());
  if (matrix.empty()) {
    doc.paragraph("Matrix: not recorded.", "warn");
    return;
  }
  std::vector<std::pair<std::string, std::string>> facts;
  if (!field(meta, m::kMatrixFile).empty()) facts.emplace_back("matrix file", field(meta, m::kMatrixFile));
  std::vector<std::string> allocators, threads;
  for (const auto& a : array_in(matrix, key::kAllocators)) allocators.push_back(record::allocator_of_meta(a).name);
  for (const auto& t : array_in(matrix, key::kThreads)) threads.push_back(text_of(t));
  facts.emplace_back("allocators", fmt::format("{}", fmt::join(allocators, ", ")));
  for (const auto& entry : array_in(matrix, key::kWorkloads)) {
    const record::Cell w = record::workload_of_meta(entry);
    facts.emplace_back("workload " + w.workload, assignments(json(w.params)));
  }
  facts.emplace_back("threads", fmt::format("{}", fmt::join(threads, ", ")));
  namespace setting = matrix::setting_key;
  facts.emplace_back("repetitions", field(matrix, setting::reps));
  facts.emplace_back("size", field(matrix, setting::size));
  facts.emplace_back("cells", field(matrix, key::kCells));
  facts.emplace_back("timeout per cell", field(matrix, setting::timeout_s) + " s");
  facts.emplace_back("RSS sampling", field(matrix, setting::sample_ms) + " ms");
  facts.emplace_back("thread placement", rs::meta::placement_text(matrix));
  doc.facts(facts);
}

// One unit per column: the text reporters switch nanoseconds to us/ms past 10^4, which on a page
// puts "1407" and "45.1us" under one header; here a latency stays in the header's ns.
std::string page_value(rs::Metric m, double v) {
  return rs::metric_row(m).display == rs::Display::nanoseconds ? fmt::format("{:.0f}", v) : rs::text::value_text(m, v);
}

html::TableCell spread_cell(rs::Metric m, const rs::Spread& s) {
  if (s.n == 0) return {"-", std::nullopt, "", ""};
  std::string detail;
  if (s.n > 1 && s.min != s.max) detail = fmt::format("[{}-{}]", page_value(m, s.min), page_value(m, s.max));
  return {page_value(m, s.median), s.median, detail, ""};
}

std::string status_text(const rs::Group& g) {
  std::vector<std::string> parts;
  for (const auto& [status, n] : g.statuses) parts.push_back(fmt::format("{} {}", n, status));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string certainty_css(rs::Certainty c) {
  return c == rs::Certainty::clear ? "good" : c == rs::Certainty::within_noise ? "warn" : "note";
}

// One row per ranked figure: who leads, by how much, how sure, and everyone else against the leader.
void ranking_rows(html::Table& table, const rs::ScopeRecommendation& s, const std::vector<rs::Ranking>& rankings, bool by_host) {
  for (const auto& r : rankings) {
    std::vector<html::TableCell> row{{s.workload}, {std::to_string(s.threads), s.threads}};
    if (by_host) row.push_back({s.host});
    row.push_back({r.what});
    if (!r.not_ranked.empty()) {
      row.insert(row.end(), {{"-"}, {"-"}, {"not ranked", std::nullopt, "", "note"}, {r.not_ranked, std::nullopt, "", "note"}});
      table.rows.push_back(std::move(row));
      continue;
    }
    const rs::Standing& lead = r.standings[0];
    row.push_back({lead.allocator, std::nullopt, rs::text::figure_value(r, lead.spread.median)});
    if (r.standings.size() > 1) row.push_back({fmt::format("{:.1f}%", 100 * r.margin()), r.margin()});
    else row.push_back({"-"});
    row.push_back({std::string(rs::certainty_name(r.certainty)), std::nullopt, "", certainty_css(r.certainty)});
    std::vector<std::string> others;
    for (std::size_t i = 1; i < r.standings.size(); ++i)
      others.push_back(r.standings[i].allocator + " " + rs::text::relative_text(r.standings[i].relative));
    std::string others_text = others.empty() ? "-" : fmt::format("{}", fmt::join(others, " · "));
    if (!r.mostly_huge_pages.empty()) others_text += " (" + rs::text::huge_pages_text(r) + ")";
    row.push_back({others_text});
    table.rows.push_back(std::move(row));
  }
}

html::Table ranking_table(std::string id, bool by_host, const std::string& figure_header) {
  html::Table table{std::move(id), {{"workload"}, {"threads", true}}, {}, false, "answer"};
  if (by_host) table.columns.push_back({"host"});
  table.columns.insert(table.columns.end(),
                       {{figure_header}, {"leader", false, "the best median over ok repetitions, with its value"},
                        {"lead", true, "how much worse the runner-up's median is than the leader's"},
                        {"how sure", false, "clear: every repetition of the leader beats every one of the runner-up; "
                                            "within noise: their ranges overlap; one repetition: no spread"},
                        {"the others", false, "each allocator's median against the leader's: +N% is N% worse"}});
  return table;
}

void recommendation_section(html::Document& doc, const rs::Model& model) {
  doc.heading(2, "Recommendation", "recommendation");
  const rs::Recommendation rec = rs::recommend(model);
  bool by_host = std::any_of(rec.scopes.begin(), rec.scopes.end(), [](const auto& s) { return !s.host.empty(); });
  std::size_t reps = 0;
  for (const auto& s : rec.scopes) reps = std::max(reps, s.repetitions);
  if (reps == 0) {
    doc.paragraph("No recommendation: no cell finished ok.", "bad");
    return;
  }
  if (reps < 2)
    doc.paragraph("One repetition per cell: no spread to judge by, so no lead below is known to be more than noise "
                  "(run with --reps 3).", "warn");
  if (!rec.across.empty()) {
    std::vector<std::pair<std::string, std::string>> facts;
    for (const auto& a : rec.across) {
      const auto& lead = a.standings[0];
      std::vector<std::string> others;
      for (std::size_t i = 1; i < a.standings.size(); ++i)
        others.push_back(fmt::format("{} x{:.2f}", a.standings[i].allocator, a.standings[i].relative));
      facts.emplace_back(a.what + " across the run",
                         fmt::format("{} x{:.2f}, best in {} of {} ({} clearly): {}; then {}", lead.allocator, lead.relative,
                                     lead.best, a.scopes, lead.clearly_best, rs::text::lead_text(a.certainty, a.margin()),
                                     fmt::join(others, ", ")));
    }
    doc.facts(facts);
  }
  html::Table table = ranking_table("recommendation-table", by_host, "figure");
  for (const auto& s : rec.scopes) ranking_rows(table, s, s.headline, by_host);
  doc.table(table);
  doc.paragraph(
      "Medians over ok repetitions of whole cells: peak RSS the highest phase peak, held RSS at the point its row "
      "names: +100 ms, RSS 100 ms after the last phase with the worker idle (the return curve, below), where "
      "every cell of the scope has one, else the last phase's end RSS; RSS-idle/live (peak RSS - idle baseline) / peak live bytes. Time is, per cell, the geometric mean over "
      "the phases that do work (or percall's benchmarks) of its time against the best median, so x1.00 is the best "
      "everywhere (a leader at x1.40 is behind in some phases: see them below); idle phases and whole-cell rates, which the workload's schedule fixes, are left out. Across the "
      "run: each allocator's geometric mean of its standing over the workloads and thread counts it ran.",
      "note");
  html::Table details = ranking_table("time-table", by_host, "phase or benchmark");
  for (const auto& s : rec.scopes) ranking_rows(details, s, s.details, by_host);
  if (!details.rows.empty()) {
    doc.open_details(fmt::format("Time, phase by phase and benchmark by benchmark ({} rows)", details.rows.size()), "time");
    doc.paragraph("ops/s of each phase that does work; percall's ns per operation of each benchmark (lower is better).", "note");
    doc.table(details);
    doc.close_details();
  }
}

void advice_section(html::Document& doc, const rs::Advice& advice) {
  doc.heading(2, "Advice for " + advice.workload, "advice");
  if (!advice.any) {
    doc.paragraph("No recommendation: no allocator ran the program successfully.", "bad");
  } else {
    // advise's lines as printed, but the choice stands out: the comparisons as bullets, then the
    // choice in bold, its reasons (indented on the terminal) under it, the setting to copy.
    const std::vector<std::string> lines = rs::advice_lines(advice);
    std::vector<std::string> before, reasons;
    std::string choice, setting;
    for (const auto& l : lines) {
      if (l.starts_with("=> ")) choice = l.substr(3);
      else if (choice.empty()) before.push_back(l);
      else if (l.starts_with("setting: ")) setting = l;
      else reasons.push_back(l.substr(l.find_first_not_of(' ')));
    }
    doc.bullets(before);
    if (!choice.empty()) doc.paragraph(choice, "choice");
    if (!reasons.empty()) doc.bullets(reasons);
    if (!setting.empty()) doc.code(setting);
  }
  html::Table table{"advice-table", {{"allocator"}, {"ok", false, "repetitions that finished ok, of all"},
                                     {rs::text::metric_header(rs::Metric::peak_rss_bytes), true, "median [min-max] over ok repetitions, whole run"},
                                     {rs::text::metric_header(rs::Metric::end_rss_bytes), true, "median [min-max] over ok repetitions, at the end"},
                                     {rs::text::metric_header(rs::Metric::wall_s), true, "median [min-max] over ok repetitions"},
                                     {"setting", false, "what runs the program this way"}},
                    {}, true, "answer"};
  for (const auto& c : advice.candidates) {
    std::vector<html::TableCell> row{{c.allocator}, {fmt::format("{}/{}", c.ok, c.cells)}};
    if (c.ok) {
      row.push_back(spread_cell(rs::Metric::peak_rss_bytes, c.peak_rss_bytes));
      row.push_back(spread_cell(rs::Metric::end_rss_bytes, c.end_rss_bytes));
      row.push_back(spread_cell(rs::Metric::wall_s, c.wall_s));
    } else {
      row.insert(row.end(), {{"-"}, {"-"}, {"-"}});
    }
    row.push_back({c.setting.empty() ? "(none)" : c.setting});
    table.rows.push_back(std::move(row));
  }
  doc.table(table);
  if (!advice.failed.empty()) doc.bullets(advice.failed, "bad");
}

// The return curve: RSS at the last phase's end, then 10 ms, 100 ms and the settle's end after it,
// the worker idle, per workload x threads x allocator (medians over ok repetitions).
const std::vector<rs::Metric> kReturnCurve{rs::Metric::end_rss_bytes, rs::Metric::rss_after_10ms_bytes,
                                           rs::Metric::rss_after_100ms_bytes, rs::Metric::rss_settled_bytes};

void return_curve_section(html::Document& doc, const rs::Model& model) {
  doc.heading(2, "Return curve: memory given back after the last phase", "return-curve");
  rs::Grouping grouping = model.group({rs::Dimension::workload, rs::Dimension::threads, rs::Dimension::allocator});
  // Seven columns of medians with ranges: headers wrap and ranges go under their medians so that
  // it fits a 900 px window rather than scrolling in its box.
  html::Table table{"return-curve-table", {}, {}, true, "answer stacked"};
  for (rs::Dimension d : grouping.dimensions)
    table.columns.push_back({std::string(rs::dimension_name(d)), d == rs::Dimension::threads});
  const char* points[] = {"at the end", "+10 ms", "+100 ms", "settled"};
  for (std::size_t i = 0; i < kReturnCurve.size(); ++i)
    table.columns.push_back({std::string("RSS ") + points[i] + " MiB", true, "median [min-max] over ok repetitions"});
  for (const auto& g : grouping.groups) {
    if (g.metric(rs::Metric::rss_after_10ms_bytes).n == 0) continue;
    std::vector<html::TableCell> row;
    for (const auto& v : g.values) row.push_back({rs::value_label(v), v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt});
    for (rs::Metric m : kReturnCurve) row.push_back(spread_cell(m, g.metric(m)));
    table.rows.push_back(std::move(row));
  }
  if (table.rows.empty()) {
    doc.paragraph("No return curve: the cells ran without a settle (settle_ms = 0), are programs, or were recorded "
                  "before 2026-12-06.", "note");
    return;
  }
  doc.paragraph("RSS of the worker at its last phase's end and while it then waits idle (no allocation, its threads "
                "parked): 10 ms, 100 ms and the settle's end (settle_ms) after it. An allocator that gives memory back "
                "off the free path (a decay thread, a delayed purge) drops here; one that purges only when it is called "
                "again does not. Held RSS in the recommendation is the +100 ms point (docs/report.md).", "note");
  doc.table(table);
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
  rs::Grouping grouping = model.group(rs::default_dimensions());
  html::Table table{"phase-table", {}, {}, true};
  for (rs::Dimension d : grouping.dimensions)
    table.columns.push_back({std::string(rs::dimension_name(d)), d == rs::Dimension::threads});
  table.columns.push_back({"n", true, "cells (repetitions) in the group, any status"});
  table.columns.push_back({"status"});
  for (rs::Metric m : kPhaseMetrics)
    table.columns.push_back({rs::text::metric_header(m), true, "median [min-max] over ok repetitions"});
  for (const auto& g : grouping.groups) {
    std::vector<html::TableCell> row;
    for (const auto& v : g.values) {
      html::TableCell c{rs::value_label(v)};
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
    html::TableCell log_cell{"-"};
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
                            model.cells().size(), fmt::join(counts, ", "), when(json(now))),
                "note");
  if (std::string notice = rs::lab_notice(meta); !notice.empty())
    doc.paragraph("These are " + notice + ".", "warn");
  if (std::string notice = rs::page_reporting_notice(meta); !notice.empty())
    doc.paragraph("Times: " + notice + ".", "warn");
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
  if (advice) anchors.emplace_back("advice", "Advice");
  const std::vector<VersionSeries> versions = version_series(model);
  anchors.emplace_back("recommendation", "Recommendation");
  if (!versions.empty()) anchors.emplace_back("versions", "Versions");
  anchors.insert(anchors.end(), {{"return-curve", "Return curve"}, {"charts", "Charts"}, {"machine", "Machine"},
                                 {"matrix", "Matrix and command"}, {"phases", "Every group and phase"},
                                 {"failures", "Cells that did not finish ok"}});
  if (!warnings.empty()) anchors.emplace_back("warnings", "Warnings");
  doc.contents(anchors);
  // The answer the reader came for first; what it rests on (machine, matrix, every phase) after
  // the charts, folded away until asked for.
  if (advice) advice_section(doc, *advice);
  recommendation_section(doc, model);
  versions_section(doc, model, versions);
  return_curve_section(doc, model);
  charts_section(doc, dir, report);
  doc.open_details("Machine and allocators", "machine");
  machine_section(doc, meta);
  doc.close_details();
  doc.open_details("Matrix and command", "matrix");
  matrix_section(doc, meta);
  doc.close_details();
  doc.open_details("Every group and phase", "phases");
  phase_section(doc, model);
  doc.close_details();
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
