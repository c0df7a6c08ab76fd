#include "harness/gate/confirm.h"
#include "harness/placement/placement.h"
#include "harness/record/cell.h"
#include "harness/topology/topology.h"
#include "harness/results/folder_layout.h"
#include "harness/results/meta.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

namespace allocmark::gate {

using nlohmann::json;
namespace mx = allocmark::matrix;
namespace rs = allocmark::results;

namespace {

// The judged part of a baseline cell's setup (its under_test's env and params), typed.
record::Cell judged_setup(const GateCell& b) { return record::cell_of_setup(setup_part(b.under_test, true)); }

// The settings a rerun measures with, from a RunSummary's settings (meta.json's matrix), checked
// like a matrix file's and then given to build_plan as the rerun's matrix file's.
void apply_settings(mx::MatrixFile& file, const json& s, const std::string& origin) {
  const mx::Settings recorded = mx::recorded_settings(s, origin);
  for (const auto& row : mx::setting_rows())
    if (json v = row.get(recorded); mx::is_measurement(row) && !v.is_null()) row.choose(file, v);
}

struct CellToRerun {
  std::string allocator, workload;
  int threads = 0;
};

class Planner {
 public:
  explicit Planner(const ConfirmSources& s) : s_(s) {
    defs_ = s.variants.allocator_defs;
    if (s.matrix)
      for (const auto& [name, def] : s.matrix->allocator_defs) defs_[name] = def;
    if (!s.baseline.settings.empty()) {
      settings_ = s.baseline.settings;
      settings_origin_ = s.baseline_path + " settings";
    } else {
      settings_ = s.results.settings;
      const std::string meta = rs::layout::path_in(s.results_path, rs::layout::kMeta);
      settings_origin_ = meta + " " + rs::meta::kMatrix;
      notes_.push_back(fmt::format("{} keeps no measurement settings (written before baselines kept them): the rerun "
                                   "measures with those of {} (timeout, sampling, pinning, call timing; none "
                                   "of them runs or loads anything)",
                                   s.baseline_path, meta));
    }
  }

  // The plan of one cell, or ConfigError saying why it is not rerun.
  mx::Plan plan(const CellToRerun& c) {
    const std::string name = cell_name(c.allocator, c.workload, c.threads);
    std::vector<std::size_t> in_baseline;
    for (std::size_t i = 0; i < s_.baseline.cells.size(); ++i) {
      const GateCell& b = s_.baseline.cells[i];
      if (b.allocator == c.allocator && b.workload == c.workload && b.threads == c.threads) in_baseline.push_back(i);
    }
    if (in_baseline.empty()) throw mx::ConfigError("the baseline has no such cell");
    const std::string origin = fmt::format("{} cells[{}]", s_.baseline_path, in_baseline.front());
    const json setup = baseline_setup(in_baseline, origin);

    if (s_.matrix) check_against_matrix(c, setup);

    mx::MatrixFile file;
    file.path = origin;
    // Setups are read through the codec, so env and params hold text: a baseline's odd value was
    // made text when the baseline was read.
    const record::Cell ran = record::cell_of_setup(setup);
    const std::map<std::string, std::string>& params = ran.params;
    const std::string params_origin = origin + " " + kUnderTest + "." + record::setup_key(record::CellField::params);
    mx::AllocatorDef def{c.allocator, ran.allocator.backend, ran.allocator.library, ran.allocator.env, "", origin, origin};
    file.allocator_defs[c.allocator] = def;
    file.allocators = {c.allocator};
    if (mx::is_program(c.workload)) {
      mx::ProgramDef program = mx::program_from_params(c.workload, params);
      program.origin = origin;
      file.programs[program.name] = program;
    } else {
      file.workloads = {c.workload};
      for (const auto& [k, v] : params) file.params[c.workload][k] = mx::Located{v, params_origin};
      file.params_origin[c.workload] = origin;
    }
    file.threads = {c.threads};
    file.reps = repetitions(in_baseline);
    apply_settings(file, settings_, settings_origin_);
    mx::Plan plan = mx::build_plan(file, mx::MatrixFile{}, {});

    // The rerun must run what the results measured; otherwise it confirms nothing.
    if (plan.cells.empty()) throw mx::ConfigError("the baseline's setup of it plans no cell");
    const mx::Cell& planned = plan.cells.front();
    const json rerun_setup = record::cell_setup(planned);
    for (const auto& r : s_.results.cells) {
      if (r.allocator != c.allocator || r.workload != c.workload || r.threads != c.threads) continue;
      for (const auto& ran : r.setups)
        if (ran != rerun_setup)
          throw mx::ConfigError(fmt::format("the results ran another setup than the baseline names ({}); --confirm "
                                            "reruns only what the baseline names, never what a results folder does",
                                            setup_difference(rerun_setup, ran)));
    }
    return plan;
  }

  const std::vector<std::string>& notes() const { return notes_; }

  // The rerun's placement planned on this machine before anything runs: a pin or nodes this machine
  // cannot give is a field of the baseline (or of the folder's meta.json), named with its value,
  // never a flag the user did not type.
  void check_placement_here(const mx::Plan& plan) const {
    int most_threads = 1;
    for (const auto& c : plan.cells) most_threads = std::max(most_threads, c.threads);
    try {
      (void)placement::plan_placement(topology::detect(), placement::current_allowed(), plan.settings.pin, most_threads);
    } catch (const placement::PlacementError& e) {
      const std::string field = e.setting().empty() ? "pin" : e.setting();
      throw mx::ConfigError(fmt::format("{}.{} ({}): {}; a confirming rerun measures with the baseline's settings, which this "
                                        "machine cannot give",
                                        settings_origin_, field, json_excerpt(settings_.value(field, json())), e.detail()));
    }
  }

 private:
  // The setup every baseline phase of the cell names: kept by the baseline, or, for a baseline
  // written before it kept backend and library, the allocator of that name as configured here
  // (built-in variants, --confirm-matrix) with the environment the baseline recorded. A kept
  // library that is not on this machine (the in-tree numap of another checkout) is the one the
  // allocator of that name resolves to here, when it has the same backend.
  json baseline_setup(const std::vector<std::size_t>& cells, const std::string& origin) {
    std::vector<json> setups;
    for (std::size_t i : cells) {
      const GateCell& b = s_.baseline.cells[i];
      for (const auto& setup : b.setups)
        if (std::find(setups.begin(), setups.end(), setup) == setups.end()) setups.push_back(setup);
    }
    if (setups.size() > 1)
      throw mx::ConfigError(fmt::format("the baseline's phases of it name different setups ({})", setup_difference(setups[0], setups[1])));
    const GateCell& b = s_.baseline.cells[cells.front()];
    if (setups.size() == 1) {
      const record::Cell kept = record::cell_of_setup(setups[0]);
      const std::string& library = kept.allocator.library;
      std::error_code ec;
      if (library.empty() || std::filesystem::is_regular_file(library, ec)) return setups[0];
      const record::Cell here = resolved_here(b.allocator, kept, origin);
      if (here.allocator.backend != kept.allocator.backend)
        throw mx::ConfigError(fmt::format("its library {} is not on this machine, and allocator {} here is another backend ({})",
                                          library, b.allocator, setup_difference(setups[0], record::cell_setup(here))));
      notes_.push_back(fmt::format("{}: library {} is not on this machine; {} reruns with {}, its library here", origin,
                                   library, b.allocator, here.allocator.library));
      return record::cell_setup(here);
    }
    const json judged = record::cell_setup(judged_setup(b));
    for (std::size_t i : cells)
      if (record::cell_setup(judged_setup(s_.baseline.cells[i])) != judged)
        throw mx::ConfigError(fmt::format("the baseline's phases of it name different environments or parameters (cells[{}] and cells[{}])",
                                          cells.front(), i));
    return record::cell_setup(resolved_here(b.allocator, judged_setup(b), origin));
  }

  // The allocator `name` as configured here (built-in variants, --confirm-matrix), which must have
  // the environment the baseline recorded (`recorded`'s), with the baseline's parameters.
  record::Cell resolved_here(const std::string& name, const record::Cell& recorded, const std::string& origin) const {
    record::Cell here = recorded;
    here.allocator = mx::resolve_allocator(name, defs_, origin);
    if (here.allocator.env != recorded.allocator.env) {
      record::Cell as_recorded = here;
      as_recorded.allocator.env = recorded.allocator.env;
      throw mx::ConfigError(fmt::format("allocator {} as configured here differs from what {} recorded ({})", name,
                                        s_.baseline_path, setup_difference(record::cell_setup(as_recorded), record::cell_setup(here))));
    }
    return here;
  }

  void check_against_matrix(const CellToRerun& c, const json& setup) const {
    const mx::MatrixFile& m = *s_.matrix;
    if (m.allocator_defs.count(c.allocator)) {
      const mx::ResolvedAllocator a = mx::resolve_allocator(c.allocator, defs_, m.path);
      const json from_matrix = cell_setup(a.backend, a.library, json(a.env), json(record::cell_of_setup(setup).params));
      if (from_matrix != setup)
        throw mx::ConfigError(fmt::format("allocator {} differs between the baseline and --confirm-matrix {} ({})", c.allocator,
                                          m.path, setup_difference(setup, from_matrix)));
    }
    if (mx::is_program(c.workload)) {
      const std::string program = mx::program_name(c.workload);
      if (auto it = m.programs.find(program); it != m.programs.end()) {
        record::Cell program_cell = record::cell_of_setup(setup);
        program_cell.params = mx::program_params(it->second);
        const json from_matrix = record::cell_setup(program_cell);
        if (from_matrix != setup)
          throw mx::ConfigError(fmt::format("program {} differs between the baseline and --confirm-matrix {} ({})", program,
                                            m.path, setup_difference(setup, from_matrix)));
      }
    }
  }

  // As many repetitions as the baseline holds of the cell: its most ok ones in a phase, and its failed ones.
  int repetitions(const std::vector<std::size_t>& cells) const {
    std::size_t ok = 0, failed = 0;
    for (std::size_t i : cells) {
      const GateCell& b = s_.baseline.cells[i];
      failed += b.not_ok;
      for (const auto& [metric, values] : b.values) ok = std::max(ok, values.size());
    }
    return static_cast<int>(std::min<std::size_t>(ok + failed, mx::kMaxReps));
  }

  const ConfirmSources& s_;
  std::map<std::string, mx::AllocatorDef> defs_;
  json settings_;
  std::string settings_origin_;
  std::vector<std::string> notes_;
};

}  // namespace

ConfirmationPlan plan_confirmation(const std::vector<Verdict>& flagged, const ConfirmSources& sources) {
  ConfirmationPlan out;
  Planner planner(sources);
  std::set<std::tuple<std::string, std::string, int>> seen;
  std::set<std::string> allocators;
  for (const auto& v : flagged) {
    if (!seen.insert({v.allocator, v.workload, v.threads}).second) continue;
    try {
      mx::Plan one = planner.plan({v.allocator, v.workload, v.threads});
      out.plan.settings = one.settings;
      for (auto& a : one.allocators)
        if (allocators.insert(json{a.name, a.library, a.env}.dump()).second) out.plan.allocators.push_back(a);
      for (auto& c : one.cells) out.plan.cells.push_back(std::move(c));
    } catch (const mx::ConfigError& e) {
      out.not_rerun[v.cell_name()] = e.what();
    }
  }
  if (!out.plan.cells.empty()) planner.check_placement_here(out.plan);
  std::stable_sort(out.plan.cells.begin(), out.plan.cells.end(), [](const mx::Cell& a, const mx::Cell& b) { return a.rep < b.rep; });
  out.notes = planner.notes();
  return out;
}

}  // namespace allocmark::gate
