// The results model: statistics, metrics, dimensions and the workload metrics a grouping keeps.
// Its other concerns have files of their own: reading a record (model_reader.cpp), a cell's
// identity (model_identity.cpp), reading folders (model_folder.cpp), labels (model_labels.cpp)
// and grouping (model_group.cpp).
#include "harness/results/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "workloads/workload.h"

namespace allocmark::results {
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Statistics

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Spread spread_of(std::vector<double> v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.min = *lo;
  s.max = *hi;
  s.median = median(v);
  for (double& x : v) x = std::fabs(x - s.median);
  s.mad = median(std::move(v));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Metrics

std::optional<double> metric_value(Metric m, const CellResult& cell, const PhaseValues& phase) {
  return metric_row(m).formula(phase, cell.idle_rss_bytes);
}

PhaseValues node_view(const PhaseValues& phase, const NodeValues& node) {
  PhaseValues view;
  view.name = phase.name;
  view.values = node.values;
  return view;
}

namespace {

// `into` with `from` (one later phase) folded in, field by field as the field table says.
void fold_into(FieldValues& into, const FieldValues& from) {
  for (const FieldRow& row : field_table()) {
    auto v = from.get(row.field);
    if (!v) continue;
    auto acc = into.get(row.field);
    switch (row.fold) {
      case Fold::sum: into.set(row.field, acc.value_or(0) + *v); break;
      case Fold::max: into.set(row.field, acc ? std::max(*acc, *v) : *v); break;
      case Fold::last: into.set(row.field, *v); break;
    }
  }
}

}  // namespace

PhaseValues whole_cell(const CellResult& cell) {
  PhaseValues whole;
  whole.name = std::string(kCellPhase);
  for (const auto& p : cell.phases) {
    fold_into(whole, p);
    for (const auto& n : p.nodes) {
      auto it = std::find_if(whole.nodes.begin(), whole.nodes.end(), [&](const NodeValues& w) { return w.node == n.node; });
      if (it == whole.nodes.end()) whole.nodes.push_back(n);
      else fold_into(*it, n);
    }
  }
  return whole;
}

// ---------------------------------------------------------------------------------------------
// Dimensions

namespace {
constexpr std::array<std::pair<Dimension, std::string_view>, 7> kDimensions{{
    {Dimension::workload, "workload"},
    {Dimension::threads, "threads"},
    {Dimension::allocator, "allocator"},
    {Dimension::phase, "phase"},
    {Dimension::backend, "backend"},
    {Dimension::host, "host"},
    {Dimension::node, "node"},
}};
}  // namespace

std::string_view dimension_name(Dimension d) {
  for (const auto& [dim, name] : kDimensions)
    if (dim == d) return name;
  return "?";
}

std::optional<Dimension> dimension_from_name(std::string_view name) {
  for (const auto& [dim, n] : kDimensions)
    if (n == name) return dim;
  return std::nullopt;
}

const std::vector<Dimension>& all_dimensions() {
  static const std::vector<Dimension> all = [] {
    std::vector<Dimension> v;
    for (const auto& [dim, name] : kDimensions) v.push_back(dim);
    return v;
  }();
  return all;
}

const std::vector<Dimension>& default_dimensions() {
  static const std::vector<Dimension> v{Dimension::workload, Dimension::threads, Dimension::allocator, Dimension::phase};
  return v;
}

std::string value_label(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

std::string ops_per_s_not_a_speed(const std::string& workload, const nlohmann::json& params, std::string_view phase) {
  const workloads::WorkloadInfo* info = workloads::find_workload(workload);
  if (!info || !info->ops_per_s_not_a_speed || !params.is_object()) return "";
  try {
    auto texts = params.get<std::map<std::string, std::string>>();
    return info->ops_per_s_not_a_speed(workloads::Params::typed(*info, texts), phase);
  } catch (const std::exception&) {  // a record from before a parameter existed: nothing declared
    return "";
  }
}

std::vector<std::string> pooling_notes(const Grouping& grouping) {
  std::vector<std::string> notes;
  for (const auto& p : grouping.pooled) {
    std::string values;
    for (const auto& v : p.values) values += (values.empty() ? "" : ", ") + v;
    notes.push_back(fmt::format("rows pool {} {} ({} is not a grouping dimension): add it to --by, or keep one with --{} {}",
                                dimension_name(p.dimension), values, dimension_name(p.dimension),
                                dimension_name(p.dimension), p.dimension == Dimension::threads ? "N" : "NAME"));
  }
  return notes;
}

void select_workload_metrics(Grouping& grouping, const std::vector<std::string>& patterns) {
  auto matches = [](const std::string& pattern, const std::string& name) {
    if (!pattern.empty() && pattern.back() == '*') return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
    return name == pattern;
  };
  for (const auto& pattern : patterns)
    if (std::none_of(grouping.workload_metrics.begin(), grouping.workload_metrics.end(),
                     [&](const std::string& name) { return matches(pattern, name); })) {
      std::string there;
      for (const auto& name : grouping.workload_metrics) there += (there.empty() ? "" : ", ") + name;
      throw ResultsError(fmt::format("no workload metric matches '{}' ({})", pattern,
                                     there.empty() ? "these results have none in this grouping; they are per phase"
                                                   : "these results have: " + there));
    }
  auto wanted = [&](const std::string& name) {
    return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return matches(p, name); });
  };
  std::erase_if(grouping.workload_metrics, [&](const std::string& name) { return !wanted(name); });
  for (Group& g : grouping.groups) std::erase_if(g.workload_metrics, [&](const auto& entry) { return !wanted(entry.first); });
}

}  // namespace allocmark::results
