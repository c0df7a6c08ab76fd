// Reading one record into what the model keeps of it (model_reader.h), and the figures a record
// carries for the scripts that read results.jsonl themselves (add_figures_for_readers).
#include "harness/results/model_reader.h"

#include "harness/record/cell.h"
#include "harness/record/record_keys.h"
#include "harness/results/safe_text.h"

#include <cmath>
#include <cstdint>

namespace allocmark::results {
namespace detail {
namespace {

// Every number in a phase's workload_metrics, nested objects' names joined with '.'; text and
// other values are the workload's notes, not figures to summarise.
void workload_numbers(const json& object, const std::string& prefix, PhaseValues& values, const InternName& intern) {
  for (const auto& [k, v] : object.items()) {
    if (v.is_object()) workload_numbers(v, prefix + k + ".", values, intern);
    else if (v.is_number()) values.workload.emplace_back(intern(prefix + k), v.get<double>());
  }
}

// Holds each phase of a record, and each of its nodes, to the metrics' one rule set (value_problem,
// which the gate holds baselines to): a value no measurement gives (a peak RSS of 0 or -5, 1e300
// operations a second, a share above 1) is a record edited or damaged after it was written,
// refused like a record of the wrong shape, naming the line, the cell, the phase and the metric.
void check_plausible(const RecordReader& r, const CellResult& cell, const CellIdentity& id) {
  const auto refuse = [&](std::size_t phase, const std::string& node, const std::string& problem) {
    r.fail(fmt::format("cell {} {} t{} r{}, phases[{}] ({}){}: {}", terminal_line(id.allocator), terminal_line(id.workload),
                       cell.threads, cell.rep, phase, terminal_line(cell.phases[phase].name), node, problem));
  };
  if (cell.idle_rss_bytes)
    if (std::string problem = field_bytes_problem(record::kRecordIdleRssBytes, *cell.idle_rss_bytes); !problem.empty())
      r.fail(fmt::format("cell {} {} t{} r{}: {}", terminal_line(id.allocator), terminal_line(id.workload), cell.threads,
                         cell.rep, problem));
  for (std::size_t i = 0; i < cell.phases.size(); ++i) {
    const PhaseValues& p = cell.phases[i];
    for (const MetricRow& row : metric_table())
      if (auto v = row.formula(p, cell.idle_rss_bytes))
        if (std::string problem = value_problem(row.metric, *v); !problem.empty()) refuse(i, "", problem);
    for (std::size_t k = 0; k < p.nodes.size(); ++k) {
      const PhaseValues view = node_view(p, p.nodes[k]);
      static const std::vector<Metric> per_node = node_metrics();
      for (Metric m : per_node)
        if (auto v = metric_value(m, cell, view))
          if (std::string problem = value_problem(m, *v); !problem.empty())
            refuse(i, fmt::format(" nodes[{}] (node {})", k, p.nodes[k].node), problem);
    }
  }
}

}  // namespace

// The number at a dotted `path` in `holder` (`at`: where holder is, for messages); nullopt where
// the path or its value is absent or null.
std::optional<double> RecordReader::number_at(const json& holder, std::string_view path, const std::string& at) const {
  const json* object = &holder;
  std::string context = at;
  for (std::size_t dot; (dot = path.find('.')) != std::string_view::npos; path.remove_prefix(dot + 1)) {
    const std::string step(path.substr(0, dot));
    auto it = object->find(step);
    if (it == object->end() || it->is_null()) return std::nullopt;
    if (!it->is_object()) fail(fmt::format("'{}{}' must be an object, not {}", context, step, it->dump()));
    object = &*it;
    context += step + ".";
  }
  return optional_number(*object, std::string(path), context);
}

std::vector<PhaseValues> RecordReader::phases(const InternName& intern) const {
  std::vector<PhaseValues> out;
  auto it = record_.find(record::kRecordPhases);
  if (it == record_.end() || it->is_null()) return out;
  if (!it->is_array()) fail(fmt::format("'{}' must be a list", record::kRecordPhases));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& p = (*it)[i];
    std::string context = fmt::format("phases[{}].", i);
    if (!p.is_object()) fail(fmt::format("'phases[{}]' must be an object", i));
    PhaseValues values;
    auto name = optional_string("name", p);
    values.name = name ? *name : "?";
    for (const FieldRow& row : field_table())
      if (!row.phase_path.empty())
        if (auto v = number_at(p, row.phase_path, context)) values.set(row.field, *v);
    if (auto nodes = p.find("nodes"); nodes != p.end() && nodes->is_array())
      for (std::size_t k = 0; k < nodes->size(); ++k) {
        const json& n = (*nodes)[k];
        std::string at = fmt::format("{}nodes[{}].", context, k);
        if (!n.is_object()) fail(fmt::format("'{}' must be an object", at.substr(0, at.size() - 1)));
        NodeValues node;
        auto id = optional_number(n, "node", at);
        if (!id) fail(fmt::format("'{}node' is missing", at));
        node.node = static_cast<int>(*id);
        // The node's rate is its threads' operations over the phase's time.
        if (auto v = values.get(Field::wall_s)) node.set(Field::wall_s, *v);
        for (const FieldRow& row : field_table()) {
          if (row.node_path.empty()) continue;
          std::optional<double> v;
          if (row.node_path == "threads") {
            if (auto t = n.find("threads"); t != n.end() && t->is_array()) v = static_cast<double>(t->size());
          } else {
            v = number_at(n, row.node_path, at);
          }
          if (!v) continue;
          node.set(row.field, *v);
          if (row.phase_sums_nodes) values.set(row.field, values.get(row.field).value_or(0) + *v);
        }
        values.nodes.push_back(std::move(node));
      }
    if (auto w = p.find("workload_metrics"); w != p.end() && w->is_object()) workload_numbers(*w, "", values, intern);
    out.push_back(std::move(values));
  }
  return out;
}

ReadCell read_cell(const RecordReader& r, const json& record, const std::string& default_host, const InternName& intern) {
  CellResult cell;
  CellIdentity id;
  using record::CellField;
  using record::record_key;
  id.allocator = r.required_string(record_key(CellField::allocator));
  id.workload = r.required_string(record_key(CellField::workload));
  cell.threads = static_cast<int>(r.required_integer(record_key(CellField::threads)));
  cell.status = r.required_string(kRecordStatus);
  id.backend = r.optional_string(record_key(CellField::backend)).value_or("");
  id.params = r.optional_object(record_key(CellField::params));
  id.env = r.optional_object(record_key(CellField::env));
  id.preload = r.optional_string(record_key(CellField::library)).value_or("");
  id.host = r.optional_string(kRecordHost).value_or(default_host);
  cell.rep = static_cast<int>(r.optional_integer(record_key(CellField::rep)).value_or(0));
  cell.attempt = static_cast<int>(r.optional_integer(kRecordAttempt).value_or(1));
  cell.error = r.optional_string(record::kRecordError);
  cell.library = r.optional_string(record::kRecordLibrary);
  cell.allocator_version = r.optional_string(record::kRecordAllocatorVersion);
  cell.idle_rss_bytes = r.optional_number(record, record::kRecordIdleRssBytes, "");
  cell.phases = r.phases(intern);
  cell.stdout_checksum = r.optional_string(record::kRecordStdoutChecksum);
  check_plausible(r, cell, id);
  r.optional_object(record_key(CellField::thp));  // a thp that is not an object is an error
  cell.thp_how = record::thp_how_in(record);
  return {std::move(cell), std::move(id)};
}

}  // namespace detail

using detail::RecordReader;

void add_figures_for_readers(json& record) {
  const RecordReader r(record, "(record)", 0);
  CellResult cell;
  cell.idle_rss_bytes = r.optional_number(record, record::kRecordIdleRssBytes, "");
  cell.phases = r.phases([](const std::string&) { return std::size_t{0}; });
  const auto figure = [&](Metric m, const PhaseValues& p) {
    auto v = metric_value(m, cell, p);
    return v ? json(*v) : json(nullptr);
  };
  for (std::size_t i = 0; i < cell.phases.size(); ++i) {
    json& phase = record[record::kRecordPhases][i];
    phase["ops_per_s"] = figure(Metric::ops_per_s, cell.phases[i]);
    if (auto c = phase.find("contention"); c != phase.end() && c->is_object()) {
      (*c)["voluntary_ctx_switches_per_mop"] = figure(Metric::vol_ctx_switches_per_mop, cell.phases[i]);
      (*c)["runqueue_wait_share"] = figure(Metric::runqueue_wait_share, cell.phases[i]);
    }
  }
  const PhaseValues whole = whole_cell(cell);
  // Byte counts as the integers version 1 wrote them (a reader may decode them as one).
  const auto bytes = [&](Metric m) {
    auto v = metric_value(m, cell, whole);
    return v ? json(static_cast<int64_t>(std::llround(*v))) : json(nullptr);
  };
  record[record::kRecordPeakRssBytes] = cell.phases.empty() ? json(nullptr) : bytes(Metric::peak_rss_bytes);
  record[record::kRecordPeakLiveBytes] = bytes(Metric::peak_live_bytes);
  if (auto ratio = metric_value(Metric::rss_above_idle_over_live, cell, whole)) record[record::kRecordFragmentationRatio] = *ratio;
  if (cell.phases.empty()) return;
  // Sums over the phases (a figure no phase has is 0, as it always was), and ops/s over the sums.
  json totals = json::object();
  const auto sum = [&](Metric m) { return metric_value(m, cell, whole).value_or(0.0); };
  totals["wall_s"] = sum(Metric::wall_s);
  totals["ops"] = whole.get(Field::ops).value_or(0.0);
#define ALLOCMARK_TOTAL(name) totals[#name] = sum(Metric::name);
  ALLOCMARK_PROCESS_COUNTERS(ALLOCMARK_TOTAL)
#undef ALLOCMARK_TOTAL
  totals["ops_per_s"] = figure(Metric::ops_per_s, whole);
  record[record::kRecordTotals] = totals;
}

std::size_t Model::intern_workload_metric(const std::string& name) {
  auto [it, inserted] = workload_metric_index_.emplace(name, workload_metric_names_.size());
  if (inserted) workload_metric_names_.push_back(name);
  return it->second;
}

}  // namespace allocmark::results
