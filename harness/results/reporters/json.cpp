// JSON: summary.json, and `show --format json` (the same document for the grouping asked for).
// Plotting code reads these figures as they are; it never recomputes one.
#include "harness/results/reporters/reporter.h"

namespace allocmark::results {
namespace {
nlohmann::ordered_json spread_json(const Spread& s) {
  return {{"n", s.n}, {"median", s.median}, {"min", s.min}, {"max", s.max}, {"mad", s.mad}};
}

// Why a group's ops/s is not the allocator's speed, as its workload declares it for the group's
// phase and parameters; "" where it is one, and for groups across phases or parameter sets.
std::string ops_per_s_not_a_speed(const Grouping& grouping, const Group& g) {
  const nlohmann::json* phase = nullptr;
  for (std::size_t i = 0; i < grouping.dimensions.size(); ++i)
    if (grouping.dimensions[i] == Dimension::phase) phase = &g.values[i];
  auto workload = g.identity.find("workload");
  auto params = g.identity.find("params");
  if (!phase || !phase->is_string() || workload == g.identity.end() || params == g.identity.end()) return "";
  return results::ops_per_s_not_a_speed(workload->get<std::string>(), *params, phase->get<std::string>());
}
}  // namespace

nlohmann::ordered_json summary_json(const Model& model, const Grouping& grouping, const std::vector<Metric>& metrics) {
  using ojson = nlohmann::ordered_json;
  ojson out = ojson::object();
  out["schema_version"] = kSummarySchemaVersion;
  ojson group_by = ojson::array();
  for (Dimension d : grouping.dimensions) group_by.push_back(std::string(dimension_name(d)));
  out["group_by"] = group_by;
  // The metric table's rows for these metrics, so a reader (plots/) needs no list of its own.
  ojson rows = ojson::object();
  for (Metric m : metrics) {
    const MetricRow& row = metric_row(m);
    rows[std::string(row.name)] = {{"unit", row.unit},
                                   {"description", row.description},
                                   {"better", row.better == Better::lower ? "lower" : "higher"},
                                   {"display", display_name(row.display)},
                                   {"label", row.header}};
  }
  out["metrics"] = rows;
  ojson groups = ojson::array();
  for (const Group& g : grouping.groups) {
    ojson group = ojson::object();
    for (std::size_t i = 0; i < grouping.dimensions.size(); ++i)
      group[std::string(dimension_name(grouping.dimensions[i]))] = ojson::parse(g.values[i].dump());
    group["cells"] = g.cells;
    group["statuses"] = g.statuses;
    group["errors"] = g.errors;
    if (g.errors_not_listed) group["errors_not_listed"] = g.errors_not_listed;
    group["identity"] = g.identity;
    ojson values = ojson::object();
    for (Metric m : metrics) {
      const Spread& s = g.metric(m);
      // A metric the group has no value for (a failed cell, glibc's lock waits) is left out.
      if (s.n == 0) continue;
      values[std::string(metric_row(m).name)] = spread_json(s);
    }
    group["metrics"] = values;
    if (std::string why = ops_per_s_not_a_speed(grouping, g); !why.empty()) group["ops_per_s_not_a_speed"] = why;
    if (!grouping.workload_metrics.empty()) {
      ojson workload = ojson::object();
      for (const auto& name : grouping.workload_metrics)
        if (auto it = g.workload_metrics.find(name); it != g.workload_metrics.end()) workload[name] = spread_json(it->second);
      group["workload_metrics"] = workload;
    }
    groups.push_back(std::move(group));
  }
  out["groups"] = groups;
  out["warnings"] = model.warnings();
  return out;
}

namespace {

class JsonReporter : public Reporter {
 public:
  std::vector<Metric> default_metrics() const override { return all_metrics(); }
  bool all_workload_metrics_by_default() const override { return true; }
  std::string render(const Model& model, const Grouping& grouping, const std::vector<Metric>& metrics) const override {
    return summary_json(model, grouping, metrics).dump(2) + "\n";
  }
};

}  // namespace

std::unique_ptr<Reporter> make_json_reporter() { return std::make_unique<JsonReporter>(); }

}  // namespace allocmark::results
