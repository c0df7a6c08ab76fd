#include "harness/history/import.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/history/export.h"
#include "harness/history/ingest.h"
#include "harness/results/safe_text.h"

namespace allocmark::history {

namespace {

namespace k = export_key;
using nlohmann::ordered_json;
using CellIdentities = std::map<std::string, CellInfo>;

[[noreturn]] void bad(const std::string& at, const std::string& what) { throw HistoryError(at + ": " + what); }

const ordered_json& field(const ordered_json& o, const char* key, const std::string& at) {
  if (!o.contains(key)) bad(at, fmt::format("no \"{}\"", key));
  return o.at(key);
}

std::string text_field(const ordered_json& o, const char* key, const std::string& at, bool may_be_empty = true) {
  const ordered_json& v = field(o, key, at);
  if (!v.is_string()) bad(at, fmt::format("\"{}\" is not text", key));
  if (!may_be_empty && v.get_ref<const std::string&>().empty()) bad(at, fmt::format("\"{}\" is empty", key));
  return v.get<std::string>();
}

// The machine and a cell's params: the object export wrote (so its text as the history kept it), or
// the text a history held where it was not JSON.
std::string json_text(const ordered_json& o, const char* key, const std::string& at) {
  const ordered_json& v = field(o, key, at);
  if (!v.is_object() && !v.is_string()) bad(at, fmt::format("\"{}\" is not an object", key));
  return v.is_string() ? v.get<std::string>() : v.dump();
}

CellInfo cell_identity(const ordered_json& c, const std::string& at) {
  CellInfo info;
  info.cell_id = text_field(c, k::kCell, at, false);
  const std::string where = at + ", cell " + results::terminal_line(info.cell_id);
  info.allocator = text_field(c, k::kAllocator, where, false);
  info.backend = text_field(c, k::kBackend, where);
  info.workload = text_field(c, k::kWorkload, where, false);
  info.params_digest = text_field(c, k::kParamsDigest, where);
  info.params_json = json_text(c, k::kParams, where);
  const ordered_json& threads = field(c, k::kThreads, where);
  if (!threads.is_number_integer() || threads.get<long long>() < 1 || threads.get<long long>() > 1 << 20)
    bad(where, fmt::format("\"{}\" is not a thread count", k::kThreads));
  info.threads = threads.get<int>();
  return info;
}

// {phase: {metric: [repetition 0, 1, ...]}}, every value a finite number.
std::vector<Value> values_of(const ordered_json& c, const std::string& at) {
  const ordered_json& phases = field(c, k::kValues, at);
  if (!phases.is_object()) bad(at, fmt::format("\"{}\" is not an object of phases", k::kValues));
  std::vector<Value> out;
  for (const auto& [phase, metrics] : phases.items()) {
    if (!metrics.is_object()) bad(at, fmt::format("phase '{}' is not an object of metrics", results::terminal_line(phase)));
    for (const auto& [metric, reps] : metrics.items()) {
      const std::string what = fmt::format("phase '{}', metric '{}'", results::terminal_line(phase), results::terminal_line(metric));
      if (!reps.is_array()) bad(at, what + " is not a list of repetitions");
      int rep = 0;
      for (const auto& v : reps) {
        if (!v.is_number() || !std::isfinite(v.get<double>()))
          bad(at, fmt::format("{}: repetition {} is not a finite number", what, rep));
        out.push_back({phase, metric, rep++, v.get<double>()});
      }
    }
  }
  return out;
}

// A cell of a run: its identity from the line itself (`known` null) or from the document's cells.
CellRun cell_run(const ordered_json& c, const std::string& at, const CellIdentities* known) {
  if (!c.is_object()) bad(at, "a cell that is not an object");
  CellRun out;
  if (known) {
    const std::string id = text_field(c, k::kCell, at, false);
    const auto found = known->find(id);
    if (found == known->end()) bad(at, fmt::format("cell {} is not among the file's cells", results::terminal_line(id)));
    out.cell = found->second;
  } else {
    out.cell = cell_identity(c, at);
  }
  const std::string where = at + ", cell " + results::terminal_line(out.cell.cell_id);
  out.allocator_version = text_field(c, k::kAllocatorVersion, where);
  out.library = text_field(c, k::kLibrary, where);
  out.values = values_of(c, where);
  return out;
}

ImportedRun run_of(const ordered_json& r, const std::string& at, const CellIdentities* known) {
  if (!r.is_object()) bad(at, "not a JSON object (a run)");
  ImportedRun out;
  RunInfo& info = out.run;
  info.commit = text_field(r, k::kCommit, at);
  if (std::string problem = commit_problem(info.commit, fmt::format("\"{}\"", k::kCommit)); !problem.empty()) bad(at, problem);
  info.branch = text_field(r, k::kBranch, at, false);
  info.time = normalise_time(text_field(r, k::kTime, at), at + fmt::format(": \"{}\"", k::kTime));
  info.testbed = text_field(r, k::kTestbed, at, false);
  info.machine_fingerprint = text_field(r, k::kMachineFingerprint, at);
  info.machine_json = json_text(r, k::kMachine, at);
  info.run_ids = text_field(r, k::kRunIds, at, false);
  info.allocmark_version = text_field(r, k::kAllocmarkVersion, at);
  info.added = normalise_time(text_field(r, k::kAdded, at), at + fmt::format(": \"{}\"", k::kAdded));
  const ordered_json& cells = field(r, k::kCells, at);
  if (!cells.is_array()) bad(at, fmt::format("\"{}\" is not a list", k::kCells));
  std::set<std::string> seen;
  for (const auto& c : cells) {
    out.cells.push_back(cell_run(c, at, known));
    if (!seen.insert(out.cells.back().cell.cell_id).second)
      bad(at, fmt::format("cell {} twice in one run", results::terminal_line(out.cells.back().cell.cell_id)));
  }
  return out;
}

void check_format(const ordered_json& o, const std::string& at) {
  if (!o.is_object() || !o.contains(k::kFormat))
    bad(at, fmt::format("not what `allocmark history export` writes (no \"{}\")", k::kFormat));
  const ordered_json& format = o.at(k::kFormat);
  if (format != kExportFormat)
    bad(at, fmt::format("export format {}; this allocmark reads format {} (a newer allocmark wrote it?)",
                        results::terminal_line(format.dump()), kExportFormat));
}

std::vector<ImportedRun> document_runs(const ordered_json& doc, const std::string& name) {
  check_format(doc, name);
  const ordered_json& cells = field(doc, k::kCells, name);
  const ordered_json& runs = field(doc, k::kRuns, name);
  if (!cells.is_array() || !runs.is_array()) bad(name, fmt::format("\"{}\" and \"{}\" are not lists", k::kCells, k::kRuns));
  CellIdentities known;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (!cells[i].is_object()) bad(fmt::format("{} cells[{}]", name, i), "not an object");
    CellInfo info = cell_identity(cells[i], fmt::format("{} cells[{}]", name, i));
    known[info.cell_id] = std::move(info);
  }
  std::vector<ImportedRun> out;
  for (std::size_t i = 0; i < runs.size(); ++i) out.push_back(run_of(runs[i], fmt::format("{} runs[{}]", name, i), &known));
  return out;
}

std::vector<ImportedRun> line_runs(const std::string& text, const std::string& name) {
  std::vector<ImportedRun> out;
  std::size_t start = 0;
  for (std::size_t number = 1; start < text.size(); ++number) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const std::string at = fmt::format("{} line {}", name, number);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (line.starts_with("<<<<<<<") || line.starts_with("=======") || line.starts_with(">>>>>>>"))
      bad(at, "a merge conflict marker: each line is one run, so keep both sides' lines and delete the markers "
              "(.gitattributes merges this file as a union)");
    const ordered_json parsed = ordered_json::parse(line, nullptr, false);
    if (parsed.is_discarded()) bad(at, "not JSON (one run a line, as `history export --format jsonl` writes)");
    check_format(parsed, at);
    out.push_back(run_of(parsed, at, nullptr));
  }
  return out;
}

}  // namespace

std::vector<ImportedRun> read_export(const std::string& text, const std::string& name) {
  // The document is one JSON value holding "runs"; a file of lines is many values (or one run).
  const ordered_json whole = ordered_json::parse(text, nullptr, false);
  if (!whole.is_discarded() && whole.is_object() && whole.contains(k::kRuns)) return document_runs(whole, name);
  return line_runs(text, name);
}

ImportCounts import_runs(HistoryDb& db, const std::vector<ImportedRun>& runs) {
  ImportCounts counts;
  for (const auto& r : runs) ++(db.add_run(r.run, r.cells) ? counts.added : counts.held);
  return counts;
}

}  // namespace allocmark::history
