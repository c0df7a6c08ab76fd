#include "harness/history/export.h"

#include <map>
#include <set>

#include "harness/history/sqlite.h"

namespace allocmark::history {

namespace {

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
    cells.push_back({{"cell", s.text(0)}, {"allocator", s.text(1)}, {"backend", s.text(2)}, {"workload", s.text(3)},
                     {"threads", s.integer(4)}, {"params_digest", s.text(5)}, {"params", json_or_text(s.text(6))}});
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
    ordered_json cell = identities ? identities->at(s.text(0)) : ordered_json{{"cell", s.text(0)}};
    cell["allocator_version"] = s.text(1);
    cell["library"] = s.text(2);
    cell["values"] = std::move(values);
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
    ordered_json r = identities ? ordered_json{{"allocmark_history_export", kExportFormat}} : ordered_json::object();
    r["commit"] = s.text(1);
    r["branch"] = s.text(2);
    r["time"] = s.text(3);
    r["testbed"] = s.text(4);
    r["machine_fingerprint"] = s.text(5);
    r["machine"] = json_or_text(s.text(6));
    r["run_ids"] = s.text(7);
    r["allocmark_version"] = s.text(8);
    r["added"] = s.text(9);
    r["cells"] = run_cells_json(db, s.integer(0), metrics, identities);
    runs.push_back(std::move(r));
  }
  return runs;
}

}  // namespace

ordered_json export_json(const HistoryDb& db, const std::vector<std::string>& metrics) {
  return {{"allocmark_history_export", kExportFormat}, {"history", db.path()}, {"schema_version", db.version()},
          {"cells", cells_json(db)}, {"runs", runs_json(db, Metrics(metrics.begin(), metrics.end()), nullptr)}};
}

std::string export_lines(const HistoryDb& db, const std::vector<std::string>& metrics) {
  Identities identities;
  for (auto& cell : cells_json(db)) {
    const std::string id = cell["cell"].get<std::string>();  // before the move: operator= takes its side first
    identities[id] = std::move(cell);
  }
  std::string out;
  for (const auto& run : runs_json(db, Metrics(metrics.begin(), metrics.end()), &identities))
    out += run.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
  return out;
}

}  // namespace allocmark::history
