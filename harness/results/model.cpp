#include "harness/results/model.h"

#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/safe_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>

#include "harness/metrics/derived.h"
#include "workloads/workload.h"

namespace allocmark::results {
namespace fs = std::filesystem;
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

// ---------------------------------------------------------------------------------------------
// Reading records

namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::string fnv1a_hex(const std::string& text, std::size_t digits) { return fmt::format("{:016x}", fnv1a(text)).substr(0, digits); }

// Checks the shape of one record as it is read, so a wrong type becomes a message with the file,
// line and field instead of a JSON library exception later.
class RecordReader {
 public:
  RecordReader(const json& record, const std::string& file, std::size_t line)
      : record_(record), where_(fmt::format("{}:{}", file, line)) {}

  [[noreturn]] void fail(const std::string& what) const { throw ResultsError(where_ + ": " + what); }

  std::string required_string(const char* field) const {
    auto v = optional_string(field);
    if (!v) fail(fmt::format("record has no '{}'", field));
    return *v;
  }
  std::optional<std::string> optional_string(const char* field, const json& in) const {
    auto it = in.find(field);
    if (it == in.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) fail(fmt::format("'{}' must be a string, not {}", field, it->dump()));
    return it->get<std::string>();
  }
  std::optional<std::string> optional_string(const char* field) const { return optional_string(field, record_); }
  std::optional<long long> optional_integer(const char* field) const {
    auto it = record_.find(field);
    if (it == record_.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer()) fail(fmt::format("'{}' must be an integer, not {}", field, it->dump()));
    return it->get<long long>();
  }
  long long required_integer(const char* field) const {
    auto v = optional_integer(field);
    if (!v) fail(fmt::format("record has no '{}'", field));
    return *v;
  }
  std::optional<double> optional_number(const json& in, const std::string& field, const std::string& context) const {
    auto it = in.find(field);
    if (it == in.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) fail(fmt::format("'{}{}' must be a number, not {}", context, field, it->dump()));
    return it->get<double>();
  }
  // An object member that may be absent or null (then an empty object); anything else is an error.
  json optional_object_in(const json& in, const std::string& field, const std::string& context) const {
    auto it = in.find(field);
    if (it == in.end() || it->is_null()) return json::object();
    if (!it->is_object()) fail(fmt::format("'{}{}' must be an object, not {}", context, field, it->dump()));
    return *it;
  }
  json optional_object(const char* field) const {
    auto it = record_.find(field);
    if (it == record_.end() || it->is_null()) return json::object();
    if (!it->is_object()) fail(fmt::format("'{}' must be an object, not {}", field, it->dump()));
    return *it;
  }

  // Every number in a phase's workload_metrics, nested objects' names joined with '.'; text and
  // other values are the workload's notes, not figures to summarise.
  template <class Intern>
  static void workload_numbers(const json& object, const std::string& prefix, PhaseValues& values, Intern& intern) {
    for (const auto& [k, v] : object.items()) {
      if (v.is_object()) workload_numbers(v, prefix + k + ".", values, intern);
      else if (v.is_number()) values.workload.emplace_back(intern(prefix + k), v.template get<double>());
    }
  }

  // The number at a dotted `path` in `holder` (`at`: where holder is, for messages); nullopt where
  // the path or its value is absent or null.
  std::optional<double> number_at(const json& holder, std::string_view path, const std::string& at) const {
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

  template <class Intern>
  std::vector<PhaseValues> phases(Intern intern) const {
    std::vector<PhaseValues> out;
    auto it = record_.find("phases");
    if (it == record_.end() || it->is_null()) return out;
    if (!it->is_array()) fail("'phases' must be a list");
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

 private:
  const json& record_;
  std::string where_;
};

std::string describe_line(const std::string& file, std::size_t line) { return fmt::format("{}:{}", file, line); }

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
    if (std::string problem = field_bytes_problem("idle_rss_bytes", *cell.idle_rss_bytes); !problem.empty())
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

void add_figures_for_readers(json& record) {
  const RecordReader r(record, "(record)", 0);
  CellResult cell;
  cell.idle_rss_bytes = r.optional_number(record, "idle_rss_bytes", "");
  cell.phases = r.phases([](const std::string&) { return std::size_t{0}; });
  const auto figure = [&](Metric m, const PhaseValues& p) {
    auto v = metric_value(m, cell, p);
    return v ? json(*v) : json(nullptr);
  };
  for (std::size_t i = 0; i < cell.phases.size(); ++i) {
    json& phase = record["phases"][i];
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
  record["peak_rss_bytes"] = cell.phases.empty() ? json(nullptr) : bytes(Metric::peak_rss_bytes);
  record["peak_live_bytes"] = bytes(Metric::peak_live_bytes);
  if (auto ratio = metric_value(Metric::rss_above_idle_over_live, cell, whole)) record["fragmentation_ratio"] = *ratio;
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
  record["totals"] = totals;
}

std::size_t Model::intern(CellIdentity id) {
  std::string text = id.allocator + '\n' + id.backend + '\n' + id.workload + '\n' + id.params.dump() + '\n' +
                     id.env.dump() + '\n' + id.preload + '\n' + id.host;
  auto [it, inserted] = identity_index_.emplace(std::move(text), identities_.size());
  if (inserted) identities_.push_back(std::move(id));
  return it->second;
}

std::size_t Model::intern_workload_metric(const std::string& name) {
  auto [it, inserted] = workload_metric_index_.emplace(name, workload_metric_names_.size());
  if (inserted) workload_metric_names_.push_back(name);
  return it->second;
}

void Model::add_record(const json& record, const std::string& file, std::size_t line) {
  // One record read twice is one repetition, not two: a copy of a folder read with it, a merged
  // folder read with one of its sources. Within a folder it is a duplicate line, or a part file
  // the driver gathered but had not removed yet (skipped silently below as well).
  const std::size_t folder = folders_seen_.size();
  id_collisions_.add(record, file, line);
  if (auto [first, fresh] = records_read_.try_emplace(fnv1a(record_copy_identity(record)), FirstRead{folder, line}); !fresh) {
    if (first->second.folder != folder) ++records_in_other_folders_;
    else if (!reading_parts_) duplicates_.emplace_back(line, first->second.line);
    return;
  }
  RecordReader r(record, file, line);
  CellResult cell;
  CellIdentity id;
  id.allocator = r.required_string("allocator");
  id.workload = r.required_string("workload");
  cell.threads = static_cast<int>(r.required_integer("threads"));
  cell.status = r.required_string(kRecordStatus);
  id.backend = r.optional_string("backend").value_or("");
  id.params = r.optional_object("params");
  id.env = r.optional_object("env");
  id.preload = r.optional_string("preload").value_or("");
  id.host = r.optional_string("host").value_or(default_host_);
  cell.rep = static_cast<int>(r.optional_integer("rep").value_or(0));
  cell.attempt = static_cast<int>(r.optional_integer(kRecordAttempt).value_or(1));
  cell.error = r.optional_string("error");
  cell.library = r.optional_string("library");
  cell.allocator_version = r.optional_string("allocator_version");
  cell.idle_rss_bytes = r.optional_number(record, "idle_rss_bytes", "");
  cell.phases = r.phases([this](const std::string& name) { return intern_workload_metric(name); });
  cell.stdout_checksum = r.optional_string("stdout_checksum");
  check_plausible(r, cell, id);
  if (const json thp = r.optional_object("thp"); thp.contains("how") && thp["how"].is_string()) cell.thp_how = thp["how"];
  // Records always carry a key; one written by hand may not. It gets one of the same shape, but
  // without the driver's key nothing says two records are the same cell: each is taken as its own.
  auto key = r.optional_string(kRecordKey);
  cell.key = key.value_or(fmt::format("{}/{}/t{}/r{}/{}", id.allocator, id.workload, cell.threads, cell.rep,
                                      fnv1a_hex(id.preload + '\n' + id.env.dump() + '\n' + id.params.dump(), 10)));
  cell.identity = intern(std::move(id));
  cell.file = file;
  cell.line = line;
  cell.whole_file = reading_parts_;
  if (!key) {
    cells_.push_back(std::move(cell));
    return;
  }

  // A merged folder holds the same cells from several runs; attempts supersede each other only
  // within one origin (RecordIdentity::slot).
  const RecordIdentity identity{cell.key, r.optional_string(kRecordOrigin).value_or(""), cell.attempt, cell.status};
  auto [seen, first] = seen_.try_emplace(identity.slot(), Seen{cells_.size(), identity, line});
  if (first) {
    cells_.push_back(std::move(cell));
    return;
  }
  switch (versus(identity, seen->second.identity)) {
    case RecordVersus::supersedes:  // a retry: it takes the place (and the position in reports) of the earlier attempt
      seen->second.identity = identity;
      seen->second.line = line;
      cells_[seen->second.cell] = std::move(cell);
      break;
    case RecordVersus::duplicate:
      if (!reading_parts_) duplicates_.emplace_back(line, seen->second.line);
      break;
    case RecordVersus::superseded: break;  // after a higher attempt: nothing to say
  }
}

void Model::add_line(std::string_view text, const std::string& file, std::size_t line, bool unterminated) {
  if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank: nothing lost
  json record = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded() || !record.is_object()) {
    warnings_.push_back(unterminated ? describe_line(file, line) +
                                           ": last line cut short (no newline at the end: a run still writing, or "
                                           "one that died mid-write); skipped"
                                     : describe_line(file, line) + ": not a JSON object; line skipped");
    return;
  }
  add_record(record, file, line);
}

void Model::finish_file(const std::string& file) {
  if (!duplicates_.empty()) {
    constexpr std::size_t kListed = 5;
    std::string listed;
    for (std::size_t i = 0; i < std::min(kListed, duplicates_.size()); ++i)
      listed += fmt::format("{}line {} repeats line {}", i ? ", " : "", duplicates_[i].first, duplicates_[i].second);
    if (duplicates_.size() > kListed) listed += fmt::format(", and {} more", duplicates_.size() - kListed);
    warnings_.push_back(fmt::format("{}: {} duplicate record{} (same key and attempt) counted once, the first kept: {}",
                                    file, duplicates_.size(), duplicates_.size() == 1 ? "" : "s", listed));
  }
  seen_.clear();
  duplicates_.clear();
}

void Model::add_folder(const std::string& dir, const LoadOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ResultsError(dir + ": no such results folder");
  std::string canonical = fs::weakly_canonical(dir, ec).string();
  if (std::find(folders_seen_.begin(), folders_seen_.end(), canonical) != folders_seen_.end()) {
    warnings_.push_back(dir + ": given twice; read once");
    return;
  }
  folders_seen_.push_back(canonical);

  // The host of records that do not name their own: the machine the folder's run was on.
  default_host_.clear();
  const meta::Recorded recorded = meta::read(dir);
  for (const char* name : {layout::kCells, layout::kResults}) check_readable_file(layout::path_in(dir, name));
  if (recorded.state == meta::Recorded::State::invalid) warnings_.push_back(recorded.path + ": not a JSON object; its host is unknown");
  default_host_ = meta::host(recorded.value);
  // Every reader (show, report, compare, gate) says it: emulated timings must not pass for a machine's.
  if (std::string notice = lab_notice(recorded.value); !notice.empty()) warnings_.push_back(dir + ": " + notice);

  // A run writing the folder now is said with whatever is read of it, so that a partial answer is
  // not taken for a whole one.
  const FolderWriter writer = options.own_folder ? FolderWriter{} : folder_writer(dir);
  auto note_writer = [&](std::size_t finished) {
    if (!writer.active) return std::string();
    json planned;  // the run's plan, when its cells.json is there to say it
    if (std::ifstream in(layout::path_in(dir, layout::kCells)); in) planned = json::parse(in, nullptr, false);
    std::string notice = fmt::format(
        "{}: a run is writing this folder ({}): {} cells finished; what is read now is partial", dir,
        writer.pid ? fmt::format("pid {}", writer.pid) : "its holder is unnamed",
        planned.is_object() ? fmt::format("{} of {}", finished, planned.size()) : std::to_string(finished));
    writer_notices_.push_back(notice);
    return "; " + notice;
  };

  std::string file = layout::path_in(dir, layout::kResults);
  std::ifstream in(file, std::ios::binary);
  const std::vector<std::string> parts = part_files(dir);
  if (!in && parts.empty()) {
    std::string running = note_writer(0);
    if (!options.require_cells) return;
    throw ResultsError(fmt::format("{} holds no {} (not a results folder?)", dir, layout::kResults) + running);
  }
  const std::size_t before = cells_.size(), read_before = records_in_other_folders_;
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line)
    // getline sets eof only when the last line had no newline to end it.
    add_line(text, file, line, in.eof());
  // Records a batch executor's tasks finished that the driver has not gathered into results.jsonl
  // yet (docs/ARCHITECTURE.md, "Executors"): one whole record per file. One the driver already
  // appended but had not removed yet (it died in between) is the same cell: skipped silently.
  reading_parts_ = true;
  for (const auto& part : parts) {
    std::ifstream p(part, std::ios::binary);
    std::string record((std::istreambuf_iterator<char>(p)), std::istreambuf_iterator<char>());
    add_line(record, part, 1, false);
  }
  reading_parts_ = false;
  finish_file(file);
  std::string running = note_writer(cells_.size() - before);
  // A folder whose every record was read from another folder already (a copy) is not empty.
  if (options.require_cells && cells_.size() == before && records_in_other_folders_ == read_before)
    throw ResultsError(file + " holds no finished cell" + running);
}

std::string writer_notice(const std::string& dir) {
  if (!folder_writer(dir).active) return "";  // the common case: no second read of the folder
  try {
    Model model = Model::load({dir}, LoadOptions{.require_cells = false});
    return model.writer_notices().empty() ? "" : model.writer_notices().front();
  } catch (const ResultsError&) {  // a record of the wrong shape: the reader itself will say so
    return "";
  }
}

void refuse_folder_being_written(const std::string& dir, const std::string& remedy) {
  if (!folder_writer(dir).active) return;
  const std::string notice = writer_notice(dir);
  throw ResultsError((notice.empty() ? dir + ": a run is writing this folder" : notice) + "; " + remedy);
}

Model Model::load(const std::vector<std::string>& dirs, const LoadOptions& options) {
  if (dirs.empty()) throw ResultsError("no results folder given");
  Model model;
  for (const auto& dir : dirs) model.add_folder(dir, options);
  if (std::size_t n = model.records_in_other_folders_)
    model.warnings_.push_back(fmt::format("{} record{} appear{} in more than one folder; counted once (the same "
                                          "record_id, or the same content for records without one)",
                                          n, n == 1 ? "" : "s", n == 1 ? "s" : ""));
  model.warn_on_id_collisions();
  model.warn_on_differing_outputs();
  return model;
}

Model Model::from_records(const std::vector<json>& records, const std::string& source) {
  Model model;
  for (std::size_t i = 0; i < records.size(); ++i) model.add_record(records[i], source, i + 1);
  model.finish_file(source);
  model.warn_on_id_collisions();
  model.warn_on_differing_outputs();
  return model;
}

void Model::warn_on_id_collisions() {
  if (std::string warning = id_collisions_.warning(); !warning.empty()) warnings_.push_back(warning);
}

void Model::warn_on_differing_outputs() {
  // Cells of one program and parameters, whatever the allocator, repetition or host.
  std::map<std::string, std::map<std::string, std::set<std::string>>> outputs;  // workload+params -> checksum -> allocators
  std::map<std::string, std::string> names;
  for (const auto& c : cells_) {
    if (!c.stdout_checksum) continue;
    const CellIdentity& id = identities_[c.identity];
    std::string what = id.workload + '\n' + id.params.dump();
    names[what] = id.workload;
    outputs[what][*c.stdout_checksum].insert(id.allocator);
  }
  for (const auto& [what, sums] : outputs) {
    if (sums.size() < 2) continue;
    std::string listed;
    for (const auto& [sum, allocators] : sums) {
      std::string who;
      for (const auto& a : allocators) who += (who.empty() ? "" : ", ") + a;
      listed += fmt::format("{}{} under {}", listed.empty() ? "" : "; ", sum, who);
    }
    warnings_.push_back(fmt::format("{}: output differs between cells (stdout checksums: {}); an allocator may change "
                                    "what the program computes, or the program's output is not deterministic",
                                    names[what], listed));
  }
}

// ---------------------------------------------------------------------------------------------
// Grouping

namespace {

// Labels that tell identities of one name apart: name[key=value,...] over the keys whose values
// differ among every identity of that name in the model, so a label reads the same in every row.
class Disambiguator {
 public:
  using Attributes = std::map<std::string, std::string>;

  // Registers one identity of a name; returns its slot.
  std::size_t add(const std::string& name, Attributes attributes) {
    std::string text = name + '\n';
    for (const auto& [k, v] : attributes) text += k + '=' + v + '\n';
    auto [it, inserted] = index_.emplace(text, entries_.size());
    if (inserted) entries_.push_back({name, std::move(attributes)});
    return it->second;
  }
  const std::string& name(std::size_t slot) const { return entries_[slot].name; }

  std::string qualified(std::size_t slot) const {
    const Entry& e = entries_[slot];
    std::set<std::string> keys;
    for (const auto& other : entries_)
      if (other.name == e.name)
        for (const auto& [k, v] : other.attributes) keys.insert(k);
    std::string parts;
    for (const auto& k : keys) {
      std::optional<std::string> first;
      bool differs = false;
      for (const auto& other : entries_) {
        if (other.name != e.name) continue;
        std::string v = value_of(other, k);
        if (!first) first = v;
        else if (*first != v) differs = true;
      }
      if (!differs) continue;
      std::string v = value_of(e, k);
      // A library path or a long MALLOC_CONF would swamp the column: a short hash still tells them apart.
      if (v.size() > 24) v = "#" + fnv1a_hex(v, 6);
      parts += (parts.empty() ? "" : ",") + k + "=" + v;
    }
    return parts.empty() ? e.name : e.name + "[" + parts + "]";
  }

 private:
  struct Entry {
    std::string name;
    Attributes attributes;
  };
  static std::string value_of(const Entry& e, const std::string& key) {
    auto it = e.attributes.find(key);
    if (it == e.attributes.end()) return "-";
    return it->second.empty() ? "\"\"" : it->second;
  }
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
};

Disambiguator::Attributes attributes_of(const json& object) {
  Disambiguator::Attributes out;
  for (const auto& [k, v] : object.items()) out[k] = value_label(v);
  return out;
}

// The identity fields of a group: those every cell agrees on. Unknown values (a failed cell's
// library) do not disagree with known ones.
class CommonIdentity {
 public:
  void add(const std::string& field, const std::optional<json>& value) {
    if (!value || value->is_null() || varying_.count(field)) return;
    auto it = values_.find(field);
    if (it == values_.end()) {
      order_.push_back(field);
      values_.emplace(field, *value);
    } else if (it->second != *value) {
      values_.erase(it);
      varying_.insert(field);
    }
  }
  nlohmann::ordered_json result() const {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& f : order_)
      if (auto it = values_.find(f); it != values_.end()) out[f] = nlohmann::ordered_json::parse(it->second.dump());
    return out;
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, json> values_;
  std::set<std::string> varying_;
};

// Names with numbers in them in the order a reader expects: digit runs compare by value.
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t ei = i, ej = j;
      while (ei < a.size() && digit(a[ei])) ++ei;
      while (ej < b.size() && digit(b[ej])) ++ej;
      const std::string_view da = std::string_view(a).substr(i, ei - i), db = std::string_view(b).substr(j, ej - j);
      // Same value in fewer digits first is fine; values by length, then by digits (no overflow).
      const std::size_t la = da.find_first_not_of('0'), lb = db.find_first_not_of('0');
      const std::string_view va = la == std::string_view::npos ? "" : da.substr(la);
      const std::string_view vb = lb == std::string_view::npos ? "" : db.substr(lb);
      if (va.size() != vb.size()) return va.size() < vb.size();
      if (va != vb) return va < vb;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j || (a.size() - i == b.size() - j && a < b);
}

struct GroupBuilder {
  std::vector<long long> key;  // per dimension: the interned value; then the host when not a dimension
  Group group;
  std::array<std::vector<double>, kMetricCount> samples;
  std::map<std::size_t, std::vector<double>> workload_samples;  // by workload metric index
  CommonIdentity identity;
  // Per pooling-checked dimension (workload, threads, allocator) not asked for: the values seen.
  std::array<std::set<long long>, 3> unasked;
};

constexpr std::array<Dimension, 3> kPoolingChecked{Dimension::workload, Dimension::threads, Dimension::allocator};

// WORKLOAD:VALUE for an instance the workload names by a parameter (replay's traces), else the
// workload's name.
std::string instance_label(const std::string& workload, const json& params) {
  const workloads::WorkloadInfo* info = workloads::find_workload(workload);
  if (!info || info->instance_param.empty() || !params.is_object()) return workload;
  auto it = params.find(info->instance_param);
  if (it == params.end() || !it->is_string() || it->get<std::string>().empty()) return workload;
  return workload + ":" + it->get<std::string>();
}

template <class T>
std::string first_unknown(const std::vector<T>& wanted, const std::set<T>& present, std::string_view flag) {
  for (const auto& w : wanted) {
    if (present.count(w)) continue;
    std::string there;
    for (const auto& v : present) there += (there.empty() ? "" : ", ") + fmt::format("{}", v);
    return fmt::format("{}: no cell has '{}' (there: {})", flag, w, there);
  }
  return "";
}
}  // namespace

std::string Model::unknown_filter_value(const CellFilter& filter) const {
  std::set<std::string> workload_names, allocator_names;
  std::set<int> thread_counts;
  for (const CellResult& cell : cells_) {
    const CellIdentity& id = identities_[cell.identity];
    workload_names.insert(id.workload);
    workload_names.insert(instance_label(id.workload, id.params));  // replay:NAME names its cells too
    allocator_names.insert(identities_[cell.identity].allocator);
    thread_counts.insert(cell.threads);
  }
  for (std::string problem : {first_unknown(filter.workloads, workload_names, "--workload"),
                              first_unknown(filter.allocators, allocator_names, "--allocator"),
                              first_unknown(filter.threads, thread_counts, "--threads")})
    if (!problem.empty()) return problem;
  return "";
}


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

Grouping Model::group(const std::vector<Dimension>& by, const CellFilter& filter) const {
  for (std::size_t i = 0; i < by.size(); ++i)
    if (std::find(by.begin(), by.begin() + i, by[i]) != by.begin() + i)
      throw ResultsError(fmt::format("'{}' is listed twice in the grouping", dimension_name(by[i])));
  const bool by_phase = std::find(by.begin(), by.end(), Dimension::phase) != by.end();
  const bool by_host = std::find(by.begin(), by.end(), Dimension::host) != by.end();
  const bool by_node = std::find(by.begin(), by.end(), Dimension::node) != by.end();

  // Interned values of each dimension; labels come at the end, once all collisions are known.
  Disambiguator workloads, allocators;
  std::vector<std::size_t> workload_slot(identities_.size()), allocator_slot(identities_.size());
  for (std::size_t i = 0; i < identities_.size(); ++i) {
    const CellIdentity& id = identities_[i];
    workload_slot[i] = workloads.add(instance_label(id.workload, id.params), attributes_of(id.params));
    auto attrs = attributes_of(id.env);
    attrs["library"] = id.preload;
    allocator_slot[i] = allocators.add(id.allocator, std::move(attrs));
  }
  std::vector<std::string> strings;  // phase, backend and host values
  std::unordered_map<std::string, long long> string_ids;
  auto string_id = [&](const std::string& s) {
    auto [it, inserted] = string_ids.emplace(s, static_cast<long long>(strings.size()));
    if (inserted) strings.push_back(s);
    return it->second;
  };

  auto kept = [&](const CellResult& cell) {
    const CellIdentity& id = identities_[cell.identity];
    auto in = [](const auto& list, const auto& v) { return list.empty() || std::find(list.begin(), list.end(), v) != list.end(); };
    const bool workload = in(filter.workloads, id.workload) || in(filter.workloads, instance_label(id.workload, id.params));
    return workload && in(filter.allocators, id.allocator) && in(filter.threads, cell.threads);
  };
  std::array<bool, 3> unasked{};
  for (std::size_t k = 0; k < kPoolingChecked.size(); ++k)
    unasked[k] = std::find(by.begin(), by.end(), kPoolingChecked[k]) == by.end();

  std::vector<GroupBuilder> builders;
  std::map<std::vector<long long>, std::size_t> index;
  std::size_t last_builder = 0;
  std::vector<std::size_t> cell_groups(cells_.size(), Grouping::kNoGroup);
  auto builder_for = [&](const CellResult& cell, const std::string& phase, long long node = -1) -> GroupBuilder& {
    const CellIdentity& id = identities_[cell.identity];
    std::vector<long long> key;
    for (Dimension d : by) switch (d) {
        case Dimension::workload: key.push_back(static_cast<long long>(workload_slot[cell.identity])); break;
        case Dimension::threads: key.push_back(cell.threads); break;
        case Dimension::allocator: key.push_back(static_cast<long long>(allocator_slot[cell.identity])); break;
        case Dimension::phase: key.push_back(string_id(phase)); break;
        case Dimension::backend: key.push_back(string_id(id.backend)); break;
        case Dimension::host: key.push_back(string_id(id.host)); break;
        case Dimension::node: key.push_back(node); break;
      }
    // Cells from different machines are never repetitions of each other, asked for or not.
    if (!by_host) key.push_back(string_id(id.host));
    auto [it, inserted] = index.emplace(key, builders.size());
    if (inserted) builders.push_back(GroupBuilder{std::move(key), {}, {}, {}, {}});
    last_builder = it->second;
    return builders[it->second];
  };
  auto count_cell = [&](GroupBuilder& b, const CellResult& cell) {
    const CellIdentity& id = identities_[cell.identity];
    const long long checked[3] = {static_cast<long long>(workload_slot[cell.identity]), cell.threads,
                                  static_cast<long long>(allocator_slot[cell.identity])};
    for (std::size_t k = 0; k < 3; ++k)
      if (unasked[k]) b.unasked[k].insert(checked[k]);
    b.group.cells++;
    b.group.statuses[cell.status]++;
    if (cell.error) {
      if (b.group.errors.size() < kMaxErrorsListed) b.group.errors.push_back(*cell.error);
      else b.group.errors_not_listed++;
    }
    b.identity.add("allocator", json(id.allocator));
    b.identity.add("backend", json(id.backend));
    b.identity.add("workload", json(id.workload));
    b.identity.add("params", id.params);
    b.identity.add("env", id.env);
    b.identity.add("preload", json(id.preload));
    if (!id.host.empty()) b.identity.add("host", json(id.host));
    if (cell.library) b.identity.add("library", json(*cell.library));
    if (cell.allocator_version) b.identity.add("allocator_version", json(*cell.allocator_version));
  };
  auto add_samples = [&](GroupBuilder& b, const CellResult& cell, const PhaseValues& phase) {
    for (const auto& m : metric_table())
      if (auto v = metric_value(m.metric, cell, phase)) b.samples[static_cast<std::size_t>(m.metric)].push_back(*v);
    for (const auto& [index, v] : phase.workload) b.workload_samples[index].push_back(v);
  };

  // One row's worth of a phase (or whole cell): itself, or with the node dimension one row per node.
  auto add_phase = [&](const CellResult& cell, const PhaseValues& phase) {
    if (!by_node || phase.nodes.empty()) {
      GroupBuilder& b = builder_for(cell, phase.name);
      count_cell(b, cell);
      add_samples(b, cell, phase);
      return;
    }
    for (const auto& node : phase.nodes) {
      GroupBuilder& b = builder_for(cell, phase.name, node.node);
      count_cell(b, cell);
      add_samples(b, cell, node_view(phase, node));
    }
  };
  for (std::size_t i = 0; i < cells_.size(); ++i) {
    const CellResult& cell = cells_[i];
    if (!kept(cell)) continue;
    // A cell that is not ok contributes its status and error, never its partial measurements.
    if (!by_phase) {
      if (cell.ok() && !cell.phases.empty()) add_phase(cell, whole_cell(cell));
      else count_cell(builder_for(cell, std::string(kCellPhase)), cell);
      cell_groups[i] = last_builder;
      continue;
    }
    if (!cell.ok() || cell.phases.empty()) count_cell(builder_for(cell, std::string(kCellPhase)), cell);
    cell_groups[i] = last_builder;
    if (!cell.ok()) continue;
    for (std::size_t p = 0; p < cell.phases.size(); ++p) {
      add_phase(cell, cell.phases[p]);
      if (p == 0) cell_groups[i] = last_builder;
    }
  }

  // Labels: plain names, qualified only where two groups would otherwise read the same.
  auto plain_values = [&](const GroupBuilder& b) {
    std::vector<json> values;
    for (std::size_t i = 0; i < by.size(); ++i) {
      long long v = b.key[i];
      switch (by[i]) {
        case Dimension::workload: values.push_back(workloads.name(static_cast<std::size_t>(v))); break;
        case Dimension::allocator: values.push_back(allocators.name(static_cast<std::size_t>(v))); break;
        case Dimension::threads: values.push_back(v); break;
        case Dimension::node: values.push_back(v < 0 ? json("-") : json(v)); break;
        default: values.push_back(strings[static_cast<std::size_t>(v)]); break;
      }
    }
    return values;
  };
  std::map<std::vector<json>, std::vector<std::size_t>> by_plain_label;
  for (std::size_t g = 0; g < builders.size(); ++g) {
    builders[g].group.values = plain_values(builders[g]);
    by_plain_label[builders[g].group.values].push_back(g);
  }
  bool host_column = false;
  for (const auto& [label, members] : by_plain_label) {
    if (members.size() < 2) continue;
    for (std::size_t i = 0; i < by.size(); ++i) {
      std::set<long long> distinct;
      for (std::size_t g : members) distinct.insert(builders[g].key[i]);
      if (distinct.size() < 2) continue;
      for (std::size_t g : members) {
        auto slot = static_cast<std::size_t>(builders[g].key[i]);
        if (by[i] == Dimension::workload) builders[g].group.values[i] = workloads.qualified(slot);
        if (by[i] == Dimension::allocator) builders[g].group.values[i] = allocators.qualified(slot);
      }
    }
    if (!by_host) {
      std::set<long long> hosts;
      for (std::size_t g : members) hosts.insert(builders[g].key.back());
      host_column = host_column || hosts.size() > 1;
    }
  }

  Grouping out;
  out.dimensions = by;
  out.cell_groups = std::move(cell_groups);
  for (std::size_t k = 0; k < kPoolingChecked.size(); ++k) {
    std::set<long long> together;
    for (const auto& b : builders)
      if (b.unasked[k].size() > 1) together.insert(b.unasked[k].begin(), b.unasked[k].end());
    if (together.empty()) continue;
    PooledDimension pooled{kPoolingChecked[k], {}};
    for (long long v : together) {
      auto slot = static_cast<std::size_t>(v);
      pooled.values.push_back(k == 0 ? workloads.qualified(slot) : k == 1 ? std::to_string(v) : allocators.qualified(slot));
    }
    if (kPoolingChecked[k] != Dimension::threads) std::sort(pooled.values.begin(), pooled.values.end());  // by name, not by first seen
    out.pooled.push_back(std::move(pooled));
  }
  if (host_column) out.dimensions.push_back(Dimension::host);
  std::set<std::size_t> workload_metrics_present;
  for (auto& b : builders) {
    if (host_column) b.group.values.push_back(strings[static_cast<std::size_t>(b.key.back())]);
    for (std::size_t m = 0; m < kMetricCount; ++m) b.group.metrics[m] = spread_of(std::move(b.samples[m]));
    for (auto& [index, samples] : b.workload_samples) {
      b.group.workload_metrics[workload_metric_names_[index]] = spread_of(std::move(samples));
      workload_metrics_present.insert(index);
    }
    b.group.identity = b.identity.result();
    out.groups.push_back(std::move(b.group));
  }
  for (std::size_t index : workload_metrics_present) out.workload_metrics.push_back(workload_metric_names_[index]);
  std::sort(out.workload_metrics.begin(), out.workload_metrics.end(), natural_less);
  return out;
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
