#include "harness/history/export.h"

#include <map>
#include <set>

#include "harness/history/sqlite.h"

namespace allocmark::history {

namespace {

namespace k = export_key;
using detail::Statement;
using nlohmann::ordered_json;

// Text the file holds as JSON where it is JSON (the machine, a cell's params), else as the text.
ordered_json json_or_text(const std::string& text) {
  ordered_json parsed = ordered_json::parse(text, nullptr, false);
  return parsed.is_discarded() ? ordered_json(text) : parsed;
}

ordered_json cells_json(const HistoryDb& db) {
  Statement s(db.handle(), db.path(),
              "SELECT cell_id, allocator, backend, workload, threads, params_digest, params FROM cells ORDER BY cell_id");
  ordered_json cells = ordered_json::array();
  while (s.step())
    cells.push_back({{k::kCell, s.text(0)}, {k::kAllocator, s.text(1)}, {k::kBackend, s.text(2)}, {k::kWorkload, s.text(3)},
                     {k::kThreads, s.integer(4)}, {k::kParamsDigest, s.text(5)}, {k::kParams, json_or_text(s.text(6))}});
  return cells;
}

using Metrics = std::set<std::string>;
using Identities = std::map<std::string, ordered_json>;

// A run's cells, each with its values as {phase: {metric: [repetition 0, 1, ...]}}; with
// `identities` (lines), each cell also carries its identity, so a line needs no other.
ordered_json run_cells_json(const HistoryDb& db, long long run, const Metrics& metrics, const Identities* identities) {
  Statement s(db.handle(), db.path(),
              "SELECT c.cell_id, rc.allocator_version, rc.library, c.id FROM run_cells rc JOIN cells c ON c.id = rc.cell "
              "WHERE rc.run = ?1 ORDER BY c.cell_id");
  s.bind(1, run);
  ordered_json cells = ordered_json::array();
  while (s.step()) {
    Statement v(db.handle(), db.path(),
                "SELECT phase, metric, value FROM metric_values WHERE run = ?1 AND cell = ?2 "
                "ORDER BY phase, metric, repetition");
    v.bind(1, run).bind(2, s.integer(3));
    ordered_json values = ordered_json::object();
    while (v.step())
      if (metrics.empty() || metrics.contains(v.text(1))) values[v.text(0)][v.text(1)].push_back(v.real(2));
    ordered_json cell = identities ? identities->at(s.text(0)) : ordered_json{{k::kCell, s.text(0)}};
    cell[k::kAllocatorVersion] = s.text(1);
    cell[k::kLibrary] = s.text(2);
    cell[k::kValues] = std::move(values);
    cells.push_back(std::move(cell));
  }
  return cells;
}

ordered_json runs_json(const HistoryDb& db, const Metrics& metrics, const Identities* identities) {
  Statement s(db.handle(), db.path(),
              "SELECT id, commit_sha, branch, time, testbed, machine_fingerprint, machine, run_ids, allocmark_version, "
              "added FROM runs ORDER BY branch, testbed, time, commit_sha, run_ids");
  ordered_json runs = ordered_json::array();
  while (s.step()) {
    // A line names its format first, so a file of lines says what it is on every line.
    ordered_json r = identities ? ordered_json{{k::kFormat, kExportFormat}} : ordered_json::object();
    r[k::kCommit] = s.text(1);
    r[k::kBranch] = s.text(2);
    r[k::kTime] = s.text(3);
    r[k::kTestbed] = s.text(4);
    r[k::kMachineFingerprint] = s.text(5);
    r[k::kMachine] = json_or_text(s.text(6));
    r[k::kRunIds] = s.text(7);
    r[k::kAllocmarkVersion] = s.text(8);
    r[k::kAdded] = s.text(9);
    r[k::kCells] = run_cells_json(db, s.integer(0), metrics, identities);
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace

ordered_json export_json(const HistoryDb& db, const std::vector<std::string>& metrics) {
  return {{k::kFormat, kExportFormat}, {k::kHistory, db.path()}, {k::kSchemaVersion, db.version()},
          {k::kCells, cells_json(db)}, {k::kRuns, runs_json(db, Metrics(metrics.begin(), metrics.end()), nullptr)}};
}

std::string export_lines(const HistoryDb& db, const std::vector<std::string>& metrics) {
  Identities identities;
  for (auto& cell : cells_json(db)) {
    const std::string id = cell[k::kCell].get<std::string>();  // before the move: operator= takes its side first
    identities[id] = std::move(cell);
  }
  std::string out;
  for (const auto& run : runs_json(db, Metrics(metrics.begin(), metrics.end()), &identities))
    out += run.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
  return out;
}

}  // namespace allocmark::history
