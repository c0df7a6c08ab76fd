// Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format), the JSON
// Bencher's `--adapter json` ingests: {"BENCHMARK": {"MEASURE": {"value", "lower_value",
// "upper_value"}}}. One definition of how allocmark's figures map onto it, for `show`, `gate` and
// `history show` (docs/history.md "Bencher Metric Format"): a benchmark per cell and phase, named
// CELL/PHASE with the cell id of the history (allocator/workload/tT/HASH, so two parameter sets stay
// two benchmarks); a measure per metric, named as allocmark names it; the median of the
// repetitions as value, their min and max as the bounds, in the metric's own unit.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/history/store.h"

namespace allocmark::history {

std::string bmf_benchmark(const std::string& cell_id, const std::string& phase);

// Adds METRIC of BENCHMARK from its repetitions' values (none: nothing added). A name longer than
// Bencher takes (a benchmark 1024 characters, a measure 64) is std::invalid_argument naming it:
// allocmark's own names are far shorter, but a record or history from elsewhere may hold any.
void add_bmf_measure(nlohmann::ordered_json& bmf, const std::string& benchmark, const std::string& metric,
                     const std::vector<double>& values);

// The BMF of a run's cells (ingest.h's model_cells): the metrics named, every phase or only `phase`.
nlohmann::ordered_json bmf_of_cells(const std::vector<CellRun>& cells, const std::vector<std::string>& metrics,
                                    const std::string& phase = "");

// As Bencher's `--file` reads it: indented, invalid UTF-8 replaced.
std::string bmf_text(const nlohmann::ordered_json& bmf);

}  // namespace allocmark::history
