#include "harness/history/bmf.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "harness/results/model.h"
#include "harness/results/safe_text.h"

namespace allocmark::history {

namespace {

// Bencher's limits on what identifies a benchmark and a measure by name (bencher.dev
// docs/reference/bencher-metric-format, "Order of Precedence"), in characters.
constexpr std::size_t kMaxBenchmarkName = 1024, kMaxMeasureName = 64;

std::size_t characters(const std::string& utf8) {
  return static_cast<std::size_t>(std::count_if(utf8.begin(), utf8.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Bencher would refuse the whole report, or cut the name to another benchmark's: say so here.
void check_name(const char* what, const std::string& name, std::size_t limit) {
  if (characters(name) <= limit) return;
  throw std::invalid_argument(fmt::format("--format bmf: the {} name '{}...' is {} characters; Bencher takes at most {} "
                                          "(docs/history.md, Bencher Metric Format)",
                                          what, results::terminal_line(name.substr(0, 60)), characters(name), limit));
}

}  // namespace

std::string bmf_benchmark(const std::string& cell_id, const std::string& phase) { return cell_id + "/" + phase; }

void add_bmf_measure(nlohmann::ordered_json& bmf, const std::string& benchmark, const std::string& metric,
                     const std::vector<double>& values) {
  if (values.empty()) return;
  check_name("benchmark", benchmark, kMaxBenchmarkName);
  check_name("measure", metric, kMaxMeasureName);
  const results::Spread s = results::spread_of(values);
  bmf[benchmark][metric] = {{"value", s.median}, {"lower_value", s.min}, {"upper_value", s.max}};
}

nlohmann::ordered_json bmf_of_cells(const std::vector<CellRun>& cells, const std::vector<std::string>& metrics,
                                    const std::string& phase) {
  nlohmann::ordered_json bmf = nlohmann::ordered_json::object();
  for (const auto& cell : cells) {
    // Phases in the order the cell ran them, each metric's repetitions pooled.
    std::vector<std::string> phases;
    std::map<std::pair<std::string, std::string>, std::vector<double>> values;
    for (const auto& v : cell.values) {
      if ((!phase.empty() && v.phase != phase) || std::find(metrics.begin(), metrics.end(), v.metric) == metrics.end())
        continue;
      if (std::find(phases.begin(), phases.end(), v.phase) == phases.end()) phases.push_back(v.phase);
      values[{v.phase, v.metric}].push_back(v.value);
    }
    for (const auto& p : phases)
      for (const auto& m : metrics) add_bmf_measure(bmf, bmf_benchmark(cell.cell.cell_id, p), m, values[{p, m}]);
  }
  return bmf;
}

std::string bmf_text(const nlohmann::ordered_json& bmf) {
  return bmf.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace allocmark::history
