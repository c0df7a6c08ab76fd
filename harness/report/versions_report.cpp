#include "harness/report/versions_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "allocators/releases/releases.h"
#include "harness/matrix/plan.h"
#include "harness/results/reporters/text.h"

namespace allocmark::report {

namespace {

namespace rs = allocmark::results;
namespace rel = allocmark::allocators::releases;

// The figures compared across versions: the memory seed 004 asks about, and the time it costs
// (neither a latency, so the text reporters' units fit a column).
const std::vector<rs::Metric> kVersionMetrics{rs::Metric::peak_rss_bytes, rs::Metric::ops_per_s};

// The median, and against the previous version's: "+12.3%", flagged when no repetition of one
// overlaps the other's range (the change is more than the spread).
html::TableCell version_cell(rs::Metric m, const rs::Spread& s, const rs::Spread* before) {
  if (s.n == 0) return {"-"};
  html::TableCell cell{rs::text::value_text(m, s.median), s.median};
  if (!before || before->n == 0 || before->median == 0) return cell;
  const double change = s.median / before->median - 1;
  cell.detail = fmt::format("{:+.1f}%", 100 * change);
  const bool apart = s.min > before->max || s.max < before->min;
  if (apart && std::abs(change) >= 0.01) {
    const bool better = (rs::metric_row(m).better == rs::Better::higher) == (change > 0);
    cell.css_class = better ? "good" : "bad";
  }
  return cell;
}

void series_table(html::Document& doc, const VersionSeries& series, rs::Metric m, const rs::Grouping& grouping) {
  // (workload, threads, phase) rows in first-appearance order, one column per version.
  std::vector<std::vector<nlohmann::json>> rows;
  std::map<std::pair<std::string, std::string>, const rs::Group*> at;  // (row key, allocator)
  for (const auto& g : grouping.groups) {
    const std::string allocator = rs::value_label(g.values[2]);
    if (std::find(series.allocators.begin(), series.allocators.end(), allocator) == series.allocators.end()) continue;
    if (rs::value_label(g.values[3]) == rs::kCellPhase) continue;
    std::vector<nlohmann::json> key{g.values[0], g.values[1], g.values[3]};
    const std::string k = nlohmann::json(key).dump();
    if (std::find(rows.begin(), rows.end(), key) == rows.end()) rows.push_back(key);
    at[{k, allocator}] = &g;
  }
  html::Table table{"versions-" + series.variant + "-" + std::string(rs::metric_row(m).name),
                    {{"workload"}, {"threads", true}, {"phase"}}, {}, true};
  for (const auto& v : series.versions)
    table.columns.push_back({v, true, "median over ok repetitions; change from the version to its left"});
  for (const auto& key : rows) {
    std::vector<html::TableCell> row{{rs::value_label(key[0])}, {rs::value_label(key[1]), key[1].get<double>()},
                                     {rs::value_label(key[2])}};
    const rs::Spread* before = nullptr;
    bool any = false;  // an idle phase's ops/s is 0 in every version: no row
    for (const auto& allocator : series.allocators) {
      auto it = at.find({nlohmann::json(key).dump(), allocator});
      const rs::Spread* s = it == at.end() ? nullptr : &it->second->metric(m);
      row.push_back(s ? version_cell(m, *s, before) : html::TableCell{"-"});
      any = any || (s && s->n > 0 && s->median != 0);
      before = s;
    }
    if (any) table.rows.push_back(std::move(row));
  }
  doc.heading(3, fmt::format("{}: {}", series.variant, rs::text::metric_header(m)));
  doc.table(table);
}

}  // namespace

std::vector<VersionSeries> version_series(const std::vector<std::pair<std::string, std::string>>& allocators) {
  std::vector<VersionSeries> out;
  for (const auto& [name, backend] : allocators) {
    const matrix::ReleaseName rn = matrix::split_release(name);
    if (!rn.named || backend.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.variant == rn.variant && s.backend == backend; });
    if (it == out.end()) it = out.insert(out.end(), VersionSeries{backend, rn.variant, {}, {}});
    if (std::find(it->allocators.begin(), it->allocators.end(), name) != it->allocators.end()) continue;
    // Insertion in version order: the one comparison `list` and the matrix use.
    std::size_t i = 0;
    while (i < it->versions.size() && rel::release_less({backend, it->versions[i]}, {backend, rn.version})) ++i;
    it->versions.insert(it->versions.begin() + static_cast<std::ptrdiff_t>(i), rn.version);
    it->allocators.insert(it->allocators.begin() + static_cast<std::ptrdiff_t>(i), name);
  }
  std::erase_if(out, [](const VersionSeries& s) { return s.versions.size() < 2; });
  return out;
}

std::vector<VersionSeries> version_series(const rs::Model& model) {
  std::vector<std::pair<std::string, std::string>> allocators;
  for (const auto& g : model.group({rs::Dimension::allocator}).groups) {
    auto backend = g.identity.find("backend");
    allocators.emplace_back(rs::value_label(g.values[0]),
                            backend != g.identity.end() && backend->is_string() ? backend->get<std::string>() : "");
  }
  return version_series(allocators);
}

void versions_section(html::Document& doc, const rs::Model& model, const std::vector<VersionSeries>& series) {
  if (series.empty()) return;
  const rs::Grouping grouping = model.group(rs::default_dimensions());
  doc.heading(2, "Versions", "versions");
  doc.paragraph("Each release of an allocator beside the one before it, in version order (5.9 before 5.10): the "
                "median over ok repetitions per workload, threads and phase, and under it the change from the version "
                "to its left, green or red where every repetition of one lies outside the other's range. A variant "
                "(:bg) is its own line of versions; the recommendation above ranks every version as an allocator.",
                "note");
  for (const auto& s : series)
    for (rs::Metric m : kVersionMetrics) series_table(doc, s, m, grouping);
}

}  // namespace allocmark::report
