// A gate baseline: per cell (allocator, workload, threads) and phase, every repetition's value of
// the gated metrics, plus a fingerprint in two parts: the machine (must match for a fair
// comparison) and what is under test (library, version, variant environment, parameters, commit:
// exactly what a team changes and wants judged). Readable JSON that shows in a diff what moved.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::gate {

class GateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kBaselineVersion = 1;

// The gated metrics, by their gate names.
struct GateMetric {
  std::string name;            // peak_rss | rss_over_live | end_rss | ops_per_s
  results::Metric metric;      // where the model defines it
  bool higher_is_worse;        // RSS: more is a regression; throughput: less is
  bool bytes;                  // an absolute floor of one huge page applies
};
const std::vector<GateMetric>& gate_metrics();
const GateMetric* find_gate_metric(const std::string& name);

// One cell and phase of a run, as the gate compares it.
struct GateCell {
  std::string allocator, workload, phase;
  int threads = 0;
  nlohmann::json under_test = nlohmann::json::object();  // library, version, env, params
  std::map<std::string, std::vector<double>> values;    // gate metric name -> one value per ok repetition
  std::size_t not_ok = 0;                               // repetitions that failed, crashed or timed out
  std::string id() const;                               // "jemalloc size_mix t2 churn"
};

struct RunSummary {
  nlohmann::json machine = nlohmann::json::object();  // the fingerprint's machine part
  std::string commit;
  std::vector<GateCell> cells;
};

// From a results folder (through the results model, so the reader rules apply).
RunSummary summarize_run(const std::string& dir);

nlohmann::json baseline_json(const RunSummary& run, const std::string& source);
// Parses and checks a baseline file; GateError names the file and what is wrong.
RunSummary read_baseline(const std::string& path);

// The machine facts that must match for a fair comparison.
nlohmann::json machine_fingerprint(const nlohmann::json& meta_machine);

}  // namespace allocmark::gate
