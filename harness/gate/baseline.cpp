#include "harness/gate/baseline.h"

#include <fstream>
#include <map>
#include <tuple>

namespace allocmark::gate {

using nlohmann::json;
namespace rs = allocmark::results;

const std::vector<GateMetric>& gate_metrics() {
  static const std::vector<GateMetric> metrics{
      {"peak_rss", rs::Metric::peak_rss_bytes, true, true},
      {"rss_over_live", rs::Metric::rss_above_idle_over_live, true, false},
      {"end_rss", rs::Metric::end_rss_bytes, true, true},
      {"ops_per_s", rs::Metric::ops_per_s, false, false},
  };
  return metrics;
}

const GateMetric* find_gate_metric(const std::string& name) {
  for (const auto& m : gate_metrics())
    if (m.name == name) return &m;
  return nullptr;
}

std::string GateCell::id() const {
  return allocator + " " + workload + " t" + std::to_string(threads) + " " + phase;
}

json machine_fingerprint(const json& m) {
  json out = json::object();
  for (const char* k : {"cpu_model", "cpus_usable", "kernel", "thp_enabled", "overcommit_memory", "glibc_version"})
    out[k] = m.value(k, json());
  return out;
}

RunSummary summarize_run(const std::string& dir) {
  rs::Model model = rs::Model::load({dir});
  RunSummary run;
  std::ifstream meta_in(dir + "/meta.json");
  json meta = json::parse(meta_in, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) throw GateError(dir + "/meta.json: missing or not valid JSON");
  run.machine = machine_fingerprint(meta.value("machine", json::object()));
  run.commit = meta.value("allocmark", json::object()).value("git_commit", "");
  std::map<std::tuple<std::string, std::string, int, std::string>, std::size_t> index;
  auto cell_for = [&](const rs::Cell& c, const std::string& phase) -> GateCell& {
    const auto& id = model.identity(c);
    auto key = std::make_tuple(id.allocator, id.workload, c.threads, phase);
    auto [it, fresh] = index.try_emplace(key, run.cells.size());
    if (fresh) {
      GateCell g;
      g.allocator = id.allocator;
      g.workload = id.workload;
      g.threads = c.threads;
      g.phase = phase;
      g.under_test = {{"library", c.library.value_or("")}, {"version", c.allocator_version.value_or("")},
                      {"env", id.env}, {"params", id.params}, {"allocmark_commit", run.commit}};
      run.cells.push_back(std::move(g));
    }
    return run.cells[it->second];
  };
  for (const auto& c : model.cells()) {
    if (!c.ok()) {
      cell_for(c, std::string(rs::kCellPhase)).not_ok++;
      continue;
    }
    for (const auto& p : c.phases) {
      GateCell& g = cell_for(c, p.name);
      for (const auto& m : gate_metrics())
        if (auto v = rs::metric_value(m.metric, c, p)) g.values[m.name].push_back(*v);
    }
  }
  return run;
}

json baseline_json(const RunSummary& run, const std::string& source) {
  json cells = json::array();
  for (const auto& c : run.cells) {
    json values = json::object();
    for (const auto& [k, v] : c.values) values[k] = v;
    cells.push_back({{"allocator", c.allocator}, {"workload", c.workload}, {"threads", c.threads}, {"phase", c.phase},
                     {"not_ok", c.not_ok}, {"under_test", c.under_test}, {"values", values}});
  }
  return {{"allocmark_baseline", kBaselineVersion}, {"source", source}, {"machine", run.machine},
          {"allocmark_commit", run.commit}, {"cells", cells}};
}

RunSummary read_baseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw GateError(path + ": cannot read the baseline");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) throw GateError(path + ": not valid JSON (truncated?)");
  try {
    if (!j.is_object() || j.value("allocmark_baseline", 0) != kBaselineVersion)
      throw GateError(path + ": not an allocmark baseline of version " + std::to_string(kBaselineVersion) +
                      " (make one with `allocmark baseline DIR -o FILE`)");
    RunSummary run;
    run.machine = j.at("machine");
    run.commit = j.value("allocmark_commit", "");
    std::size_t i = 0;
    for (const auto& c : j.at("cells")) {
      GateCell g;
      g.allocator = c.at("allocator").get<std::string>();
      g.workload = c.at("workload").get<std::string>();
      g.threads = c.at("threads").get<int>();
      g.phase = c.at("phase").get<std::string>();
      g.not_ok = c.value("not_ok", std::size_t{0});
      g.under_test = c.value("under_test", json::object());
      for (const auto& [k, v] : c.at("values").items()) {
        if (!find_gate_metric(k)) throw GateError(path + ": cells[" + std::to_string(i) + "]: unknown metric '" + k + "'");
        g.values[k] = v.get<std::vector<double>>();
      }
      run.cells.push_back(std::move(g));
      ++i;
    }
    return run;
  } catch (const json::exception& e) {
    throw GateError(path + ": malformed baseline: " + e.what());
  }
}

}  // namespace allocmark::gate
