// A gate baseline: per cell (allocator, workload, threads) and phase, every repetition's value of
// the gated metrics, plus a fingerprint in two parts: the machine (must match for a fair
// comparison) and what is under test (library, version, variant environment, parameters, commit:
// exactly what a team changes and wants judged). Readable JSON that shows in a diff what moved.
// It also holds what `gate --confirm` reruns (each cell's backend and preloaded library, the
// measurement settings): the team commits the baseline, so a rerun never has to take what it runs
// from the results folder it judges, which may come from anyone's pull request.
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

// Format 2 keys a cell's values by the metric table's names (peak_rss_bytes, ...); format 1, which
// committed baselines and users' files still are, by the old names (peak_rss, rss_over_live,
// end_rss). Both are read; only format 2 is written.
inline constexpr int kBaselineVersion = 2;
inline constexpr int kOldestBaselineVersion = 1;

// The gated metrics: the metric table's rows marked gated. `name` is the table's name, as `show`,
// verdicts, compare and format 2 baselines spell it; `old_name` is format 1's key ("" if none).
struct GateMetric {
  std::string name, old_name;
  results::Metric metric;
  const results::MetricRow& row() const { return results::metric_row(metric); }
  bool bytes() const { return row().unit == "bytes"; }  // an absolute floor of one huge page applies
};
const std::vector<GateMetric>& gate_metrics();
// By its gate name or its metric table name (peak_rss or peak_rss_bytes); nullptr for neither.
const GateMetric* find_gate_metric(const std::string& name);

// One cell and phase of a run, as the gate compares it.
struct GateCell {
  std::string allocator, workload, phase;
  int threads = 0;
  nlohmann::json under_test = nlohmann::json::object();  // library, version, env, params
  std::map<std::string, std::vector<double>> values;    // gate metric name -> one value per ok repetition
  std::size_t not_ok = 0;                               // repetitions that failed, crashed or timed out
  // What the records ran, each distinct setup once: {backend, library (the preload, "" for
  // glibc), env, params}. One per cell in a sound folder; empty when read from a baseline written
  // before baselines kept the backend and library.
  std::vector<nlohmann::json> setups;
  // How the cell got its transparent-huge-page mode, from its records' thp.how: "prctl" (set for
  // its own process: the machine's mode is no difference for it), "machine", or "" (unknown:
  // records or a baseline from before, or records that disagree) which counts as "machine".
  std::string thp_how;
  std::string id() const;                               // "jemalloc size_mix t2 churn"
  std::string cell_name() const;                        // "jemalloc size_mix t2": the cell a rerun runs
};

struct RunSummary {
  nlohmann::json machine = nlohmann::json::object();  // the fingerprint's machine part
  std::string commit;
  // The run's measurement settings as meta.json's matrix records them (timeout_s, sample_ms,
  // max_timeline_points, pin, nodes, latency_every, node_figures); empty when unknown.
  nlohmann::json settings = nlohmann::json::object();
  std::vector<GateCell> cells;
  int baseline_format = 0;  // the file's format when read from a baseline (a note names an old one); 0 for a results folder
};

// "jemalloc size_mix t2": a cell by what the gate names it by (its phases are GateCells).
std::string cell_name(const std::string& allocator, const std::string& workload, int threads);

// The baseline file's keys, for its writer (baseline_json) and its reader (read_baseline).
namespace baseline_key {
inline constexpr const char* kFormat = "allocmark_baseline";  // kBaselineVersion
inline constexpr const char* kSource = "source";              // the results folder it was made from
inline constexpr const char* kMachine = "machine";            // machine_fingerprint
inline constexpr const char* kCommit = "allocmark_commit";    // RunSummary::commit
inline constexpr const char* kSettings = "settings";          // RunSummary::settings
inline constexpr const char* kCells = "cells";                // one entry per GateCell
}  // namespace baseline_key
// An entry of `cells`: a GateCell's fields (with kUnderTest and kAllocatorConfig below).
namespace cell_key {
inline constexpr const char* kAllocator = "allocator";
inline constexpr const char* kWorkload = "workload";
inline constexpr const char* kThreads = "threads";
inline constexpr const char* kPhase = "phase";
inline constexpr const char* kNotOk = "not_ok";
inline constexpr const char* kValues = "values";  // gate metric name -> one value per ok repetition
inline constexpr const char* kThpHow = "thp_how";
}  // namespace cell_key

// A baseline cell keeps its setup (GateCell::setups) in two objects: under_test, beside the library
// serving malloc, its version and the allocmark commit, holds the rows a team changes and wants
// judged (the variant's environment, the parameters); allocator_config the rest a confirming rerun
// needs (backend, preloaded library). Format 1 files written before allocator_config have only the first.
inline constexpr const char* kUnderTest = "under_test";
inline constexpr const char* kAllocatorConfig = "allocator_config";
// under_test's own fields, beside the setup's rows.
inline constexpr const char* kServingLibrary = "library";      // the library serving malloc ("" unknown)
inline constexpr const char* kAllocatorVersion = "version";    // its version as the allocator reports it
inline constexpr const char* kAllocmarkCommit = "allocmark_commit";  // no change under test: verdicts pass it over
// The setup's rows that `object` holds and a baseline keeps in under_test (`under_test`) or in
// allocator_config (otherwise), by the setup's keys (record::setup_key).
nlohmann::json setup_part(const nlohmann::json& object, bool under_test);

// A setup as GateCell::setups holds it: record::cell_setup of the cell these name (env and params
// read as texts, as a record reader found them).
nlohmann::json cell_setup(const std::string& backend, const std::string& library, const nlohmann::json& env,
                          const nlohmann::json& params);

// A value as JSON text cut to 80 characters, for messages.
std::string json_excerpt(const nlohmann::json& value);

// What tells object `from` from `to`, one entry per field that differs, one level into fields that
// are objects on both sides: "library /a.so -> /b.so", "params live_mib 64 -> 80", "env MALLOC_CONF
// (none) -> background_thread:true", "params command "sort" -> "sh -c 'sort -u'"". A value is
// written as it is when it is one word, as JSON otherwise, cut to 80 characters; "(none)" where a
// side lacks the field.
struct FieldChange {
  std::string field, before, after;  // "params live_mib", "64", "80"
  std::string text() const { return field + " " + before + " -> " + after; }
};
std::vector<FieldChange> field_changes(const nlohmann::json& from, const nlohmann::json& to);

// field_changes of two setups (GateCell::setups), joined with "; ".
std::string setup_difference(const nlohmann::json& from, const nlohmann::json& to);

// From a results folder (through the results model, so the reader rules apply). GateError for a
// path that is not a results folder.
RunSummary summarize_run(const std::string& dir);

// What makes a summary unfit to be a baseline (GateError naming `dir`, the cell and the metric): no
// ok cell, a cell whose records ran two setups, a value no measurement can give.
void check_baseline_source(const RunSummary& run, const std::string& dir);
nlohmann::json baseline_json(const RunSummary& run, const std::string& source);
// Parses and checks a baseline file; GateError names the file, the entry (cells[i]) and the field,
// and what is expected: absurd values, duplicate cells and a baseline without one usable value are
// refused.
RunSummary read_baseline(const std::string& path);

// "" when `value` is a value `metric` can take, else what is wrong with it ("0 is not a peak
// RSS: expected bytes above 0 ...").
std::string value_problem(const GateMetric& metric, double value);

// The machine facts that must match for a fair comparison.
nlohmann::json machine_fingerprint(const nlohmann::json& meta_machine);

}  // namespace allocmark::gate
