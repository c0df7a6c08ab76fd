#include "harness/gate/baseline.h"
#include "harness/settings/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "harness/matrix/config.h"
#include "harness/record/cell.h"
#include "harness/results/folder.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/safe_text.h"

namespace allocmark::gate {

using nlohmann::json;
namespace rs = allocmark::results;
namespace fs = std::filesystem;

const std::vector<GateMetric>& gate_metrics() {
  static const std::vector<GateMetric> metrics = [] {
    std::vector<GateMetric> out;
    for (rs::Metric m : rs::gated_metrics()) {
      const rs::MetricRow& row = rs::metric_row(m);
      out.push_back({std::string(row.name), std::string(row.alias), m});
    }
    return out;
  }();
  return metrics;
}

const GateMetric* find_gate_metric(const std::string& name) {
  auto metric = rs::metric_from_name(name);
  for (const auto& m : gate_metrics())
    if (metric && m.metric == *metric) return &m;
  return nullptr;
}

std::string cell_name(const std::string& allocator, const std::string& workload, int threads) {
  return allocator + " " + workload + " t" + std::to_string(threads);
}

std::string GateCell::cell_name() const { return gate::cell_name(allocator, workload, threads); }

std::string GateCell::id() const { return cell_name() + " " + phase; }

json machine_fingerprint(const json& m) {
  json out = json::object();
  for (const auto& [key, role] : rs::kMachineFields)
    if (role == rs::MachineRole::decides) out[key] = m.value(key, json());
  return out;
}

json setup_part(const json& object, bool under_test) {
  static const record::CellField kUnderTestRows[] = {record::CellField::env, record::CellField::params};
  static const json kSetup = record::cell_setup(record::Cell{});  // its keys: what a setup holds
  json out = json::object();
  if (!object.is_object()) return out;
  for (const auto& [key, unused] : kSetup.items()) {
    const bool judged = std::any_of(std::begin(kUnderTestRows), std::end(kUnderTestRows),
                                    [&](record::CellField f) { return key == record::setup_key(f); });
    if (judged == under_test && object.contains(key)) out[key] = object[key];
  }
  return out;
}

json cell_setup(const std::string& backend, const std::string& library, const json& env, const json& params) {
  record::Cell cell;
  cell.allocator.backend = backend;
  cell.allocator.library = library;
  cell.allocator.env = record::texts_of(env);
  cell.params = record::texts_of(params);
  return record::cell_setup(cell);
}

namespace {

// The matrix settings a rerun measures with; the axes and the size preset are not among them (a
// rerun's cells come with every parameter).
json measurement_settings(const json& matrix) {
  json out = json::object();
  if (!matrix.is_object()) return out;
  for (const auto& row : matrix::setting_rows())
    if (matrix::is_measurement(row) && matrix.contains(row.key)) out[row.key] = matrix[row.key];
  if (matrix.contains("pin_threads")) out["pin_threads"] = matrix["pin_threads"];  // folders from before the pinning policies
  return out;
}

// A baseline's fields, read with the file, the entry and the field named in every complaint.
struct BaselineReader {
  const std::string& path;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw GateError(path + ": " + where + ": " + what);
  }
  const json& need(const json& object, const std::string& where, const char* key) const {
    if (!object.contains(key)) fail(where, fmt::format("no \"{}\"", key));
    return object[key];
  }
  std::string text(const json& object, const std::string& where, const char* key) const {
    const json& v = need(object, where, key);
    if (!v.is_string() || v.get_ref<const std::string&>().empty())
      fail(where + "." + key, "expected a non-empty string, found " + json_excerpt(v));
    return v.get<std::string>();
  }
  long long integer(const json& object, const std::string& where, const char* key, long long least, long long most) const {
    const json& v = need(object, where, key);
    if (!v.is_number_integer() || v.get<long long>() < least || v.get<long long>() > most)
      fail(where + "." + key, fmt::format("expected an integer from {} to {}, found {}", least, most, json_excerpt(v)));
    return v.get<long long>();
  }
  // An optional object: `fallback` when absent.
  json object(const json& object, const std::string& where, const char* key, const json& fallback) const {
    if (!object.contains(key)) return fallback;
    if (!object[key].is_object()) fail(where + "." + key, "expected an object, found " + json_excerpt(object[key]));
    return object[key];
  }
};

}  // namespace

// The results' own rule set (results::value_problem): a baseline is held to what the model holds
// every record to.
std::string value_problem(const GateMetric& metric, double v) { return rs::value_problem(metric.metric, v); }

std::string json_excerpt(const json& v) {
  std::string text = v.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

namespace {

// A value as a message shows it: one word as it is, anything else as JSON (quoted, cut to 80).
std::string shown_value(const json& v) {
  if (v.is_null()) return "(none)";
  if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    const bool one_word = !text.empty() && text.size() <= 80 &&
                          std::none_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) || c == '"'; });
    if (one_word) return text;
  }
  return json_excerpt(v);
}

}  // namespace

std::vector<FieldChange> field_changes(const json& from, const json& to) {
  auto keys_of = [](const json& a, const json& b) {
    std::set<std::string> keys;
    for (const json* side : {&a, &b})
      if (side->is_object())
        for (const auto& [k, v] : side->items()) keys.insert(k);
    return keys;
  };
  auto field = [](const json& object, const std::string& key) { return object.is_object() ? object.value(key, json()) : json(); };
  std::vector<FieldChange> out;
  for (const auto& k : keys_of(from, to)) {
    const json a = field(from, k), b = field(to, k);
    if (a == b) continue;
    if (a.is_object() && b.is_object()) {
      for (const auto& ik : keys_of(a, b))
        if (field(a, ik) != field(b, ik)) out.push_back({k + " " + ik, shown_value(field(a, ik)), shown_value(field(b, ik))});
    } else {
      out.push_back({k, shown_value(a), shown_value(b)});
    }
  }
  return out;
}

std::string setup_difference(const json& from, const json& to) {
  json a = json::object(), b = json::object();
  static const json fields = record::cell_setup(record::Cell{});  // its keys: what a setup holds
  for (const auto& [k, unused] : fields.items()) {
    a[k] = from.value(k, json());
    b[k] = to.value(k, json());
  }
  std::string out;
  for (const auto& change : field_changes(a, b)) out += (out.empty() ? "" : "; ") + change.text();
  return out;
}

RunSummary summarize_run(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw GateError(dir + ": a file, not a results folder (the folder `allocmark run --out` wrote)");
  rs::Model model = rs::Model::load({dir});
  RunSummary run;
  const rs::meta::Recorded recorded = rs::meta::read(dir);
  if (!recorded.ok()) throw GateError(recorded.path + ": missing or not valid JSON");
  const json& meta = recorded.value;
  run.machine = machine_fingerprint(meta.value(rs::meta::kMachine, json::object()));
  run.commit = meta.value(rs::meta::kAllocmark, json::object()).value(rs::meta::identity::kGitCommit, "");
  run.settings = measurement_settings(meta.value(rs::meta::kMatrix, json::object()));
  std::map<std::tuple<std::string, std::string, int, std::string>, std::size_t> index;
  auto cell_for = [&](const rs::CellResult& c, const std::string& phase) -> GateCell& {
    const auto& id = model.identity(c);
    auto key = std::make_tuple(id.allocator, id.workload, c.threads, phase);
    json setup = cell_setup(id.backend, id.preload, id.env, id.params);
    auto [it, fresh] = index.try_emplace(key, run.cells.size());
    if (fresh) {
      GateCell g;
      g.allocator = id.allocator;
      g.workload = id.workload;
      g.threads = c.threads;
      g.phase = phase;
      g.under_test = setup_part(setup, true);
      g.under_test.update({{kServingLibrary, c.library.value_or("")}, {kAllocatorVersion, c.allocator_version.value_or("")},
                           {kAllocmarkCommit, run.commit}});
      g.thp_how = c.thp_how;
      run.cells.push_back(std::move(g));
    }
    GateCell& g = run.cells[it->second];
    if (g.thp_how != c.thp_how) g.thp_how.clear();  // records that disagree: not known
    if (std::find(g.setups.begin(), g.setups.end(), setup) == g.setups.end()) g.setups.push_back(std::move(setup));
    return g;
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

void check_baseline_source(const RunSummary& run, const std::string& dir) {
  std::size_t with_values = 0, not_ok = 0;
  for (const auto& c : run.cells) {
    with_values += !c.values.empty();
    not_ok += c.not_ok;
    if (c.setups.size() > 1)
      throw GateError(fmt::format("{}: cell {} ran with {} different setups ({}); the gate names a cell by allocator, "
                                  "workload and threads and cannot tell them apart, so a baseline of it would pool them",
                                  dir, rs::terminal_line(c.cell_name()), c.setups.size(), setup_difference(c.setups[0], c.setups[1])));
    for (const auto& [name, values] : c.values)
      for (double v : values)
        if (auto problem = value_problem(*find_gate_metric(name), v); !problem.empty())
          throw GateError(fmt::format("{}: cell {} {}: {}", dir, rs::terminal_line(c.id()), name, problem));
  }
  if (with_values == 0)
    throw GateError(fmt::format("{}: no ok cell ({} repetitions recorded, none ok): a baseline needs ok repetitions to "
                                "judge against",
                                dir, not_ok));
}

json baseline_json(const RunSummary& run, const std::string& source) {
  json cells = json::array();
  for (const auto& c : run.cells) {
    json values = json::object();
    for (const auto& [k, v] : c.values) values[k] = v;
    json cell{{cell_key::kAllocator, c.allocator}, {cell_key::kWorkload, c.workload}, {cell_key::kThreads, c.threads},
              {cell_key::kPhase, c.phase},         {cell_key::kNotOk, c.not_ok},       {kUnderTest, c.under_test},
              {cell_key::kValues, values}};
    if (c.setups.size() == 1) cell[kAllocatorConfig] = setup_part(c.setups[0], false);
    if (!c.thp_how.empty()) cell[cell_key::kThpHow] = c.thp_how;
    cells.push_back(std::move(cell));
  }
  namespace key = baseline_key;
  return {{key::kFormat, kBaselineVersion}, {key::kSource, source},          {key::kMachine, run.machine},
          {key::kCommit, run.commit},       {key::kSettings, run.settings}, {key::kCells, cells}};
}

namespace {

// The baseline file's JSON; a folder, an unreadable file or broken JSON is a GateError.
json parse_baseline_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw GateError(path + ": a folder; BASELINE (--baseline) takes the baseline file that `allocmark baseline DIR -o FILE` "
                    "writes and comes first (`gate BASELINE RESULTS`; to judge two results folders against each other, use "
                    "`allocmark compare`)");
  try {
    rs::check_readable_file(path);
  } catch (const rs::ResultsError& e) {
    throw GateError(e.what());
  }
  std::ifstream in(path);
  if (!in) throw GateError(path + ": cannot read the baseline");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) throw GateError(path + ": not valid JSON (truncated?)");
  return j;
}

int baseline_format(const json& j, const std::string& path) {
  const json version = j.is_object() ? j.value(baseline_key::kFormat, json()) : json();
  if (!version.is_number_integer() || version.get<long long>() < kOldestBaselineVersion ||
      version.get<long long>() > kBaselineVersion)
    throw GateError(fmt::format("{}: not an allocmark baseline of format {} to {} (\"{}\": {}; make one "
                                "with `allocmark baseline DIR -o FILE`)",
                                path, kOldestBaselineVersion, kBaselineVersion, baseline_key::kFormat, json_excerpt(version)));
  return version.get<int>();
}

// The machine, commit and settings the baseline was measured with.
void read_baseline_header(const BaselineReader& r, const json& j, RunSummary& run) {
  namespace key = baseline_key;
  run.machine = r.object(j, key::kMachine, key::kMachine, json());
  if (run.machine.is_null()) r.fail(key::kMachine, "missing: the fingerprint of the machine the baseline was measured on");
  if (j.contains(key::kCommit) && !j[key::kCommit].is_string())
    r.fail(key::kCommit, "expected a string, found " + json_excerpt(j[key::kCommit]));
  run.commit = j.value(key::kCommit, "");
  run.settings = r.object(j, key::kSettings, key::kSettings, json::object());
  // Checked as a matrix file's [matrix] is, each value named by the file and field (a rerun
  // measures with them; whether this machine can give its pin is checked when one is planned).
  try {
    (void)matrix::recorded_settings(run.settings, r.path + ": " + key::kSettings);
  } catch (const matrix::ConfigError& e) {
    throw GateError(e.what());
  }
}

// `at`: the cell's values ("cells[0] (glibc size_mix t1 churn).values").
const GateMetric& baseline_metric(const BaselineReader& r, const std::string& at, const std::string& k, bool old_names) {
  const GateMetric* m = find_gate_metric(k);
  if (!m || (!old_names && k != m->name)) {
    std::string names;
    for (const auto& g : gate_metrics()) names += (names.empty() ? "" : ", ") + g.name;
    r.fail(at, "unknown metric '" + k + "' (expected " + names +
                   (m ? "; format 1 files name it " + k + ", format " + std::to_string(kBaselineVersion) + " files " + m->name
                      : std::string()) +
                   ")");
  }
  return *m;
}

// Format 1 keyed values by the metrics' old names (`old_names`); the reader took either name then, and still does.
void read_cell_values(const BaselineReader& r, const json& values, const std::string& named, bool old_names, GateCell& g) {
  const std::string at = named + "." + cell_key::kValues;
  for (const auto& [k, v] : values.items()) {
    const GateMetric& m = baseline_metric(r, at, k, old_names);
    if (g.values.count(m.name))
      r.fail(at, fmt::format("'{}' and '{}' are one metric; give its values once", m.old_name, m.name));
    if (!v.is_array() || v.empty()) r.fail(at + "." + k, "expected a list of one number per repetition, found " + json_excerpt(v));
    if (v.size() + g.not_ok > static_cast<std::size_t>(matrix::kMaxReps))
      r.fail(at + "." + k, fmt::format("{} values and {} {}: more repetitions than a run records (at most {}, the limit of --reps)",
                                       v.size(), cell_key::kNotOk, g.not_ok, matrix::kMaxReps));
    for (std::size_t n = 0; n < v.size(); ++n) {
      if (!v[n].is_number()) r.fail(fmt::format("{}.{}[{}]", at, k, n), "expected a number, found " + json_excerpt(v[n]));
      if (auto problem = value_problem(m, v[n].get<double>()); !problem.empty())
        r.fail(fmt::format("{}.{}[{}]", at, k, n), problem);
      g.values[m.name].push_back(v[n].get<double>());
    }
  }
}

// The allocator_config and thp_how a cell may carry.
void read_cell_setup(const BaselineReader& r, const json& c, const std::string& where, const std::string& named, GateCell& g) {
  const json config = r.object(c, where, kAllocatorConfig, json());
  if (!config.is_null()) {
    const std::string at = named + "." + kAllocatorConfig;
    const char* library_key = record::setup_key(record::CellField::library);
    const char* backend_key = record::setup_key(record::CellField::backend);
    const json& library = r.need(config, at, library_key);
    if (!library.is_string())
      r.fail(at + "." + library_key, "expected the preloaded library's path (\"\" for glibc), found " + json_excerpt(library));
    json setup = setup_part(g.under_test, true);
    setup[backend_key] = r.text(config, at, backend_key);
    setup[library_key] = library;
    g.setups.push_back(record::cell_setup(record::cell_of_setup(setup)));
  }
  if (c.contains(cell_key::kThpHow)) {
    g.thp_how = r.text(c, named, cell_key::kThpHow);
    if (g.thp_how != record::kThpHowPrctl && g.thp_how != record::kThpHowMachine)
      r.fail(named + "." + cell_key::kThpHow,
             std::string("expected \"") + record::kThpHowPrctl + "\" or \"" + record::kThpHowMachine +
                 "\" (how the cell got its transparent huge page mode), found " +
                 json_excerpt(c[cell_key::kThpHow]));
  }
}

GateCell read_baseline_cell(const BaselineReader& r, const json& c, const std::string& where, bool old_names) {
  if (!c.is_object()) r.fail(where, "expected an object, found " + json_excerpt(c));
  GateCell g;
  g.allocator = r.text(c, where, cell_key::kAllocator);
  g.workload = r.text(c, where, cell_key::kWorkload);
  g.threads = static_cast<int>(r.integer(c, where, cell_key::kThreads, 1, matrix::kMaxThreads));
  g.phase = r.text(c, where, cell_key::kPhase);
  // Counts are held to what a run can record: a cell has at most --reps (10000) repetitions, and
  // `gate --confirm` reruns as many as the baseline holds.
  g.not_ok = c.contains(cell_key::kNotOk) ? static_cast<std::size_t>(r.integer(c, where, cell_key::kNotOk, 0, matrix::kMaxReps)) : 0;
  g.under_test = r.object(c, where, kUnderTest, json::object());
  const std::string named = where + " (" + rs::terminal_line(g.id()) + ")";
  const json values = r.object(c, where, cell_key::kValues, json());
  if (values.is_null()) r.fail(named, fmt::format("no \"{}\"", cell_key::kValues));
  read_cell_values(r, values, named, old_names, g);
  read_cell_setup(r, c, where, named, g);
  return g;
}

void read_baseline_cells(const BaselineReader& r, const json& j, bool old_names, RunSummary& run) {
  const char* key = baseline_key::kCells;
  const json& cells = r.need(j, "baseline", key);
  if (!cells.is_array()) r.fail(key, "expected a list of cells, found " + json_excerpt(cells));
  if (cells.empty()) r.fail(key, "empty: a baseline needs at least one cell to judge against");
  std::map<std::string, std::size_t> seen;  // id -> index
  std::size_t usable = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const std::string where = fmt::format("{}[{}]", key, i);
    GateCell g = read_baseline_cell(r, cells[i], where, old_names);
    if (auto [it, fresh] = seen.try_emplace(g.id(), i); !fresh)
      r.fail(where, fmt::format("the same cell as {}[{}] ({}); each cell and phase appears once", key, it->second, rs::terminal_line(g.id())));
    usable += g.phase != rs::kCellPhase && !g.values.empty();
    run.cells.push_back(std::move(g));
  }
  if (usable == 0) r.fail(key, "no cell holds a value (every repetition of its source failed?): nothing to judge against");
}

// What a confirming rerun runs of a cell: its most values in a phase and its entries' not_ok together.
void check_cell_repetitions(const BaselineReader& r, const RunSummary& run) {
  std::map<std::string, std::pair<std::size_t, std::size_t>> repetitions;  // cell name -> (most ok, not ok)
  for (std::size_t i = 0; i < run.cells.size(); ++i) {
    const GateCell& g = run.cells[i];
    auto& [ok, failed] = repetitions[g.cell_name()];
    failed += g.not_ok;
    for (const auto& [metric, values] : g.values) ok = std::max(ok, values.size());
    if (ok + failed > static_cast<std::size_t>(matrix::kMaxReps))
      r.fail(fmt::format("{}[{}] ({}).{}", baseline_key::kCells, i, rs::terminal_line(g.id()), cell_key::kNotOk),
             fmt::format("cell {} holds {} ok and {} failed repetitions over its phases: more than a run records (at most {}, "
                         "the limit of --reps)", rs::terminal_line(g.cell_name()), ok, failed, matrix::kMaxReps));
  }
}

}  // namespace

RunSummary read_baseline(const std::string& path) {
  const json j = parse_baseline_file(path);
  const int format = baseline_format(j, path);
  const BaselineReader r{path};
  RunSummary run;
  run.baseline_format = format;
  read_baseline_header(r, j, run);
  read_baseline_cells(r, j, format == 1, run);
  check_cell_repetitions(r, run);
  return run;
}

}  // namespace allocmark::gate
