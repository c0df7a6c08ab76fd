// The history store on real SQLite files in a temporary folder: creation, migration, refusals
// (each leaving the file byte for byte as it was), adding twice, series order, and a fixture
// results folder read into cells.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/history/ingest.h"
#include "harness/history/store.h"

namespace fs = std::filesystem;
using allocmark::history::CellRun;
using allocmark::history::HistoryDb;
using allocmark::history::HistoryError;
using allocmark::history::RunInfo;

namespace {

class HistoryStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("allocmark-history-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Raw SQL on a file, as another program (or another allocmark) would write it.
void raw_sql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

RunInfo run_at(const std::string& commit, const std::string& time, const std::string& run_ids) {
  return {commit, "main", time, "box", "fp", "{}", run_ids, "0.1.0"};
}

CellRun cell_with(const std::vector<double>& peaks) {
  CellRun c{{"glibc/size_mix/t1/0123456789", "glibc", "glibc", "size_mix", "d", "{}", 1}, "2.36", "", {}};
  for (std::size_t r = 0; r < peaks.size(); ++r) c.values.push_back({"fill", "peak_rss_bytes", static_cast<int>(r), peaks[r]});
  return c;
}

std::string message_of(const std::string& path) {
  try {
    HistoryDb db(path, HistoryDb::Mode::write);
  } catch (const HistoryError& e) {
    return e.what();
  }
  return "";
}

TEST_F(HistoryStore, CreatesTheSchemaInWalMode) {
  HistoryDb db(file("h.db"), HistoryDb::Mode::write);
  EXPECT_EQ(db.version(), allocmark::history::schema_version());
  EXPECT_EQ(db.run_count(), 0u);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db.handle(), "PRAGMA journal_mode", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
  sqlite3_finalize(s);
}

TEST_F(HistoryStore, MigratesAnEmptyVersionZeroFile) {
  raw_sql(file("h.db"), "PRAGMA user_version = 0; VACUUM");
  ASSERT_TRUE(fs::exists(file("h.db")));
  {
    HistoryDb db(file("h.db"), HistoryDb::Mode::write);
    EXPECT_EQ(db.version(), allocmark::history::schema_version());
  }
  HistoryDb read(file("h.db"), HistoryDb::Mode::read);
  EXPECT_EQ(read.run_count(), 0u);
}

TEST_F(HistoryStore, RefusesANewerSchemaAndLeavesItAlone) {
  { HistoryDb db(file("h.db"), HistoryDb::Mode::write); }
  raw_sql(file("h.db"), "PRAGMA journal_mode = DELETE; PRAGMA user_version = 99");
  const std::string before = bytes_of(file("h.db"));
  const std::string message = message_of(file("h.db"));
  EXPECT_NE(message.find(file("h.db")), std::string::npos) << message;
  EXPECT_NE(message.find("version 99"), std::string::npos) << message;
  EXPECT_NE(message.find("up to " + std::to_string(allocmark::history::schema_version())), std::string::npos) << message;
  EXPECT_EQ(bytes_of(file("h.db")), before);
}

TEST_F(HistoryStore, RefusesATextFileUntouched) {
  const std::string path = file("notes.txt");
  std::ofstream(path) << "not a database\n";
  const std::string message = message_of(path);
  EXPECT_NE(message.find("not an SQLite database"), std::string::npos) << message;
  EXPECT_EQ(bytes_of(path), "not a database\n");
  for (const char* suffix : {"-wal", "-shm", "-journal"}) EXPECT_FALSE(fs::exists(path + suffix)) << suffix;
}

TEST_F(HistoryStore, RefusesAnotherSqliteDatabaseAndOneWithTriggers) {
  raw_sql(file("other.db"), "CREATE TABLE accounts(id INTEGER)");
  const std::string before = bytes_of(file("other.db"));
  EXPECT_NE(message_of(file("other.db")).find("without allocmark's history tables (it has: accounts)"), std::string::npos);
  EXPECT_EQ(bytes_of(file("other.db")), before);
  { HistoryDb db(file("h.db"), HistoryDb::Mode::write); }
  raw_sql(file("h.db"), "CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM runs; END");
  EXPECT_NE(message_of(file("h.db")).find("trigger t"), std::string::npos);
}

TEST_F(HistoryStore, AddingTheSameRunTwiceIsANoOp) {
  HistoryDb db(file("h.db"), HistoryDb::Mode::write);
  EXPECT_TRUE(db.add_run(run_at("abcdef1", "2026-12-01T00:00:00Z", "r1"), {cell_with({1, 2, 3})}));
  EXPECT_FALSE(db.add_run(run_at("abcdef1", "2026-12-01T00:00:00Z", "r1"), {cell_with({1, 2, 3})}));
  EXPECT_EQ(db.run_count(), 1u);
  // The same folder under another commit is another run.
  EXPECT_TRUE(db.add_run(run_at("abcdef2", "2026-12-02T00:00:00Z", "r1"), {cell_with({4})}));
  EXPECT_EQ(db.run_count(), 2u);
}

TEST_F(HistoryStore, AFailedAddLeavesTheFileAsItWas) {
  HistoryDb db(file("h.db"), HistoryDb::Mode::write);
  ASSERT_TRUE(db.add_run(run_at("aaaaaaa", "2026-12-01T00:00:00Z", "r1"), {cell_with({1})}));
  // The second cell's value breaks a constraint after the run and the first cell went in: the
  // transaction takes them back with it.
  CellRun other = cell_with({2});
  other.cell.cell_id = "glibc/size_mix/t2/9876543210";
  CellRun broken = cell_with({std::nan("")});
  broken.cell.cell_id = "glibc/size_mix/t4/5555555555";
  EXPECT_THROW(db.add_run(run_at("bbbbbbb", "2026-12-02T00:00:00Z", "r2"), {other, broken}), HistoryError);
  EXPECT_EQ(db.run_count(), 1u);
  EXPECT_EQ(db.series_keys().size(), 1u);
  EXPECT_TRUE(db.series("glibc/size_mix/t2/9876543210", "fill", "peak_rss_bytes", "main", "box").empty());
}

TEST_F(HistoryStore, SeriesComesInCommitOrder) {
  HistoryDb db(file("h.db"), HistoryDb::Mode::write);
  // Added out of order: the commits' times decide the order, and a commit without the cell keeps
  // its index.
  db.add_run(run_at("ccccccc", "2026-12-03T00:00:00Z", "r3"), {cell_with({30, 31})});
  db.add_run(run_at("aaaaaaa", "2026-12-01T00:00:00Z", "r1"), {cell_with({10, 11, 12})});
  db.add_run(run_at("bbbbbbb", "2026-12-02T00:00:00Z", "r2"), {});
  const auto points = allocmark::history::series(db, "glibc/size_mix/t1/0123456789", "fill", "peak_rss_bytes", "main", "box");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].commit, "aaaaaaa");
  EXPECT_EQ(points[0].values, (std::vector<double>{10, 11, 12}));
  EXPECT_EQ(points[1].commit, "ccccccc");
  const auto commits = db.commits("main", "box");
  ASSERT_EQ(commits.size(), 3u);
  EXPECT_EQ(commits[1].commit, "bbbbbbb");
  EXPECT_EQ(commits[2].index, 2u);
  EXPECT_EQ(commits[2].time, "2026-12-03T00:00:00Z");
  EXPECT_TRUE(allocmark::history::series(db, "glibc/size_mix/t1/0123456789", "fill", "peak_rss_bytes", "other", "box").empty());
  ASSERT_EQ(db.series_keys().size(), 1u);
  EXPECT_EQ(db.series_keys()[0].metric, "peak_rss_bytes");
  // The series goes to the change-point code as it is.
  EXPECT_TRUE(allocmark::history::find_change_points(points).empty());
}

TEST(HistoryIngest, ReadsEveryMetricOfAFixtureFolder) {
  allocmark::history::RunLabels labels{"0123abc", "main", "2026-12-06T19:00:00+01:00", "box"};
  const auto run = allocmark::history::read_folder_run(std::string(ALLOCMARK_FIXTURES_DIR) + "/results-small", labels);
  EXPECT_EQ(run.run.time, "2026-12-06T18:00:00Z");
  ASSERT_FALSE(run.cells.empty());
  EXPECT_FALSE(run.run.run_ids.empty());
  bool peak = false, ops = false;
  for (const auto& c : run.cells) {
    EXPECT_EQ(c.cell.cell_id.find("/r"), std::string::npos) << c.cell.cell_id;
    for (const auto& v : c.values) peak |= v.metric == "peak_rss_bytes", ops |= v.metric == "ops_per_s";
  }
  EXPECT_TRUE(peak && ops);
}

TEST(HistoryIngest, LabelsAreChecked) {
  using namespace allocmark::history;
  EXPECT_EQ(commit_problem("0123abc", "--commit"), "");
  EXPECT_NE(commit_problem("HEAD", "--commit"), "");
  EXPECT_NE(commit_problem("0123ab", "--commit"), "");
  EXPECT_EQ(normalise_time("2026-12-06", "--time"), "2026-12-06T00:00:00Z");
  EXPECT_EQ(normalise_time("2026-12-06T01:30:00-02:00", "--time"), "2026-12-06T03:30:00Z");
  EXPECT_THROW(normalise_time("2026-02-30", "--time"), HistoryError);
  EXPECT_THROW(normalise_time("yesterday", "--time"), HistoryError);
  EXPECT_EQ(series_cell_id("glibc/size_mix/t2/r3/0123456789", 2, 3), "glibc/size_mix/t2/0123456789");
}

}  // namespace
