#include "harness/history/store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>

#include "harness/history/sqlite.h"
#include "harness/os/clock.h"

namespace allocmark::history {

namespace {

using detail::exec;
using detail::fail;
using detail::Statement;
using detail::Transaction;

// The schema's migrations: kMigrations[v] takes a file from version v to v + 1. A file is migrated
// inside one transaction, so it is at one version or the next, never between. Steps are only ever
// appended: a released step is never edited, since files made by it exist.
const std::vector<std::vector<const char*>> kMigrations = {
    {
        // Marks the file as allocmark's history: an SQLite file without it is someone else's.
        "CREATE TABLE allocmark_history(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO allocmark_history(key, value) VALUES ('format', 'allocmark history')",
        "CREATE TABLE runs(id INTEGER PRIMARY KEY, commit_sha TEXT NOT NULL, branch TEXT NOT NULL, time TEXT NOT NULL, "
        "testbed TEXT NOT NULL, machine_fingerprint TEXT NOT NULL, machine TEXT NOT NULL, run_ids TEXT NOT NULL, "
        "allocmark_version TEXT NOT NULL, added TEXT NOT NULL, UNIQUE(run_ids, commit_sha, testbed))",
        "CREATE INDEX runs_by_series ON runs(branch, testbed, time)",
        "CREATE TABLE cells(id INTEGER PRIMARY KEY, cell_id TEXT NOT NULL UNIQUE, allocator TEXT NOT NULL, "
        "backend TEXT NOT NULL, workload TEXT NOT NULL, threads INTEGER NOT NULL, params_digest TEXT NOT NULL, "
        "params TEXT NOT NULL)",
        "CREATE TABLE run_cells(run INTEGER NOT NULL REFERENCES runs(id), cell INTEGER NOT NULL REFERENCES cells(id), "
        "allocator_version TEXT NOT NULL, library TEXT NOT NULL, PRIMARY KEY(run, cell)) WITHOUT ROWID",
        // Keyed by series first, so reading one series is one range of the table.
        "CREATE TABLE metric_values(cell INTEGER NOT NULL, phase TEXT NOT NULL, metric TEXT NOT NULL, "
        "run INTEGER NOT NULL, repetition INTEGER NOT NULL, value REAL NOT NULL, "
        "PRIMARY KEY(cell, phase, metric, run, repetition), FOREIGN KEY(run, cell) REFERENCES run_cells(run, cell)) "
        "WITHOUT ROWID",
    },
};

// A writer waits this long for another (a CI job adding at the same time) before giving up.
constexpr int kBusyTimeoutMs = 60'000;

int user_version(sqlite3* db, const std::string& path) {
  Statement s(db, path, "PRAGMA user_version");
  if (!s.step()) fail(db, path, "cannot read the schema version");
  return static_cast<int>(s.integer(0));
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Switching to WAL takes the file's lock once; a process creating the same new file at the same
// moment holds it briefly, and this pragma does not always wait through busy_timeout itself.
void use_wal(sqlite3* db, const std::string& path) {
  const auto deadline = os::Clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    const int rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) fail(db, path, "cannot switch to WAL");
    if (os::Clock::now() > deadline) fail(db, path, "cannot switch to WAL");
    sqlite3_sleep(20);
  }
}

long long cell_row(sqlite3* db, const std::string& path, const CellInfo& c) {
  Statement insert(db, path,
                   "INSERT OR IGNORE INTO cells(cell_id, allocator, backend, workload, threads, params_digest, params) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  insert.bind(1, c.cell_id).bind(2, c.allocator).bind(3, c.backend).bind(4, c.workload);
  insert.bind(5, static_cast<long long>(c.threads)).bind(6, c.params_digest).bind(7, c.params_json).run();
  Statement select(db, path, "SELECT id FROM cells WHERE cell_id = ?1");
  select.bind(1, c.cell_id);
  if (!select.step()) fail(db, path, "cell " + c.cell_id + " missing after its insert");
  return select.integer(0);
}

long long insert_run(sqlite3* db, const std::string& path, const RunInfo& r) {
  Statement s(db, path,
              "INSERT INTO runs(commit_sha, branch, time, testbed, machine_fingerprint, machine, run_ids, "
              "allocmark_version, added) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  s.bind(1, r.commit).bind(2, r.branch).bind(3, r.time).bind(4, r.testbed).bind(5, r.machine_fingerprint);
  s.bind(6, r.machine_json).bind(7, r.run_ids).bind(8, r.allocmark_version).bind(9, r.added.empty() ? now_iso8601() : r.added).run();
  return sqlite3_last_insert_rowid(db);
}

void insert_cell_run(sqlite3* db, const std::string& path, long long run, const CellRun& c) {
  const long long cell = cell_row(db, path, c.cell);
  Statement rc(db, path, "INSERT INTO run_cells(run, cell, allocator_version, library) VALUES (?1, ?2, ?3, ?4)");
  rc.bind(1, run).bind(2, cell).bind(3, c.allocator_version).bind(4, c.library).run();
  Statement v(db, path,
              "INSERT INTO metric_values(cell, phase, metric, run, repetition, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  for (const auto& value : c.values) {
    v.bind(1, cell).bind(2, value.phase).bind(3, value.metric).bind(4, run);
    v.bind(5, static_cast<long long>(value.repetition)).bind(6, value.value).run();
    v.reset();
  }
}

}  // namespace

int schema_version() { return static_cast<int>(kMigrations.size()); }

HistoryDb::HistoryDb(const std::string& path, Mode mode) : path_(path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw HistoryError(path + ": a folder; the history is one file");
  if (mode == Mode::read && !std::filesystem::exists(path, ec))
    throw HistoryError(path + ": no such history (`allocmark history add` makes one)");
  const int flags = mode == Mode::read ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw HistoryError(path + ": cannot open: " + why);
  }
  try {
    // A file from elsewhere must not run code: no extensions, no writes to the schema by SQL
    // (defensive), and functions its schema names are not trusted.
    sqlite3_db_config(db_, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
    sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
    sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    check_is_history(mode == Mode::write);
    exec(db_, path_, "PRAGMA foreign_keys = ON");
    if (mode == Mode::write) {
      use_wal(db_, path_);
      migrate();
    }
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

HistoryDb::~HistoryDb() { sqlite3_close(db_); }

int HistoryDb::version() const { return user_version(db_, path_); }

// Reads only: every refusal here leaves the file as it was.
void HistoryDb::check_is_history(bool writable) {
  int version = 0;
  std::set<std::string> tables, code;
  try {
    // One read transaction: the version and the tables from one snapshot. Read apart, another
    // process's first add could commit between them (tables, yet version 0: "not a history").
    exec(db_, path_, "BEGIN");
    version = user_version(db_, path_);
    Statement s(db_, path_, "SELECT type, name FROM sqlite_master");
    while (s.step()) {
      if (s.text(0) == "table") tables.insert(s.text(1));
      if (s.text(0) == "trigger" || s.text(0) == "view") code.insert(s.text(0) + " " + s.text(1));
    }
  } catch (const HistoryError&) {
    const std::string why = sqlite3_errmsg(db_);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw HistoryError(path_ + ": not an SQLite database (" + why +
                       "); a history is the file `allocmark history add` makes");
  }
  exec(db_, path_, "COMMIT");
  if (version > schema_version())
    throw HistoryError(fmt::format("{}: written by a newer allocmark (history schema version {}; this allocmark knows up "
                                   "to {}): use that allocmark or a newer one",
                                   path_, version, schema_version()));
  if ((version == 0 && !tables.empty()) || (version > 0 && !tables.contains("allocmark_history")))
    throw HistoryError(path_ + ": an SQLite database without allocmark's history tables (it has: " +
                       (tables.empty() ? std::string("none") : fmt::format("{}", fmt::join(tables, ", "))) + "); not touching it");
  if (!code.empty())
    throw HistoryError(path_ + ": holds what allocmark never makes (" + fmt::format("{}", fmt::join(code, ", ")) +
                       "); a history is data, not code: not using it");
  if (!writable && version < schema_version())
    throw HistoryError(fmt::format("{}: {}; `allocmark history add` creates and migrates it", path_,
                                   version == 0 ? std::string("holds no history yet")
                                                : fmt::format("history schema version {} (this allocmark reads {})",
                                                              version, schema_version())));
}

void HistoryDb::migrate() {
  Transaction t(db_, path_);
  // Read again under the write lock: another process may have migrated the file meanwhile.
  const int version = user_version(db_, path_);
  if (version > schema_version())
    throw HistoryError(fmt::format("{}: written by a newer allocmark (history schema version {}; this allocmark knows up "
                                   "to {})",
                                   path_, version, schema_version()));
  if (version == schema_version()) return;
  for (std::size_t v = static_cast<std::size_t>(version); v < kMigrations.size(); ++v)
    for (const char* step : kMigrations[v]) exec(db_, path_, step);
  // The version is written in the same transaction as the steps: both land or neither.
  exec(db_, path_, fmt::format("PRAGMA user_version = {}", schema_version()).c_str());
  t.commit();
}

bool HistoryDb::add_run(const RunInfo& run, const std::vector<CellRun>& cells) {
  Transaction t(db_, path_);
  Statement seen(db_, path_, "SELECT 1 FROM runs WHERE run_ids = ?1 AND commit_sha = ?2 AND testbed = ?3");
  seen.bind(1, run.run_ids).bind(2, run.commit).bind(3, run.testbed);
  if (seen.step()) return false;
  const long long id = insert_run(db_, path_, run);
  for (const auto& c : cells) insert_cell_run(db_, path_, id, c);
  t.commit();
  return true;
}

std::size_t HistoryDb::run_count() const {
  Statement s(db_, path_, "SELECT COUNT(*) FROM runs");
  s.step();
  return static_cast<std::size_t>(s.integer(0));
}

std::vector<SeriesKey> HistoryDb::series_keys(const SeriesFilter& filter) const {
  Statement s(db_, path_,
              "SELECT DISTINCT c.cell_id, c.allocator, c.backend, c.workload, c.threads, c.params_digest, c.params, "
              "v.phase, v.metric, r.branch, r.testbed FROM metric_values v JOIN cells c ON c.id = v.cell "
              "JOIN runs r ON r.id = v.run WHERE (?1 = '' OR c.workload = ?1) "
              "ORDER BY c.workload, c.allocator, c.threads, c.cell_id, r.branch, r.testbed, v.phase, v.metric");
  s.bind(1, filter.workload);
  std::vector<SeriesKey> keys;
  while (s.step()) {
    SeriesKey k;
    k.cell = {s.text(0), s.text(1), s.text(2), s.text(3), s.text(5), s.text(6), static_cast<int>(s.integer(4))};
    k.phase = s.text(7);
    k.metric = s.text(8);
    k.branch = s.text(9);
    k.testbed = s.text(10);
    const auto& m = filter.metrics;
    if (m.empty() || std::find(m.begin(), m.end(), k.metric) != m.end()) keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<CommitInfo> HistoryDb::commits(const std::string& branch, const std::string& testbed) const {
  // Commits in the order they were measured: a commit's first run's time, ties by the order added.
  Statement s(db_, path_,
              "SELECT commit_sha, MIN(time) AS t FROM runs WHERE branch = ?1 AND testbed = ?2 "
              "GROUP BY commit_sha ORDER BY t, MIN(id)");
  s.bind(1, branch).bind(2, testbed);
  std::vector<CommitInfo> out;
  while (s.step()) out.push_back({out.size(), s.text(0), s.text(1)});
  return out;
}

std::vector<SeriesPoint> HistoryDb::series(const std::string& cell_id, const std::string& phase, const std::string& metric,
                                           const std::string& branch, const std::string& testbed) const {
  std::map<std::string, std::size_t> index;
  std::vector<SeriesPoint> points;
  for (const auto& c : commits(branch, testbed)) {
    index[c.commit] = points.size();
    points.push_back({c.commit, {}});
  }
  Statement values(db_, path_,
                   "SELECT r.commit_sha, v.value FROM metric_values v JOIN cells c ON c.id = v.cell "
                   "JOIN runs r ON r.id = v.run WHERE c.cell_id = ?1 AND v.phase = ?2 AND v.metric = ?3 "
                   "AND r.branch = ?4 AND r.testbed = ?5 ORDER BY r.id, v.repetition");
  values.bind(1, cell_id).bind(2, phase).bind(3, metric).bind(4, branch).bind(5, testbed);
  while (values.step()) points[index.at(values.text(0))].values.push_back(values.real(1));
  // Change points take only commits with figures; commits() still places each on the axis.
  std::erase_if(points, [](const SeriesPoint& p) { return p.values.empty(); });
  return points;
}

std::vector<SeriesPoint> series(const HistoryDb& db, const std::string& cell_id, const std::string& phase,
                                const std::string& metric, const std::string& branch, const std::string& testbed) {
  return db.series(cell_id, phase, metric, branch, testbed);
}

}  // namespace allocmark::history
