#include "harness/results/model.h"
#include "harness/results/machine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

using namespace allocmark::results;
using nlohmann::json;
namespace fs = std::filesystem;

// Named after the file: its helpers and tests share a unity batch with other files (cmake/allocmark_build_speed.cmake).
namespace model_test {
namespace {

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/model_test_" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

json phase(const std::string& name, double peak_rss, double live, double ops, double wall) {
  return {{"name", name},          {"peak_rss_bytes", peak_rss}, {"end_rss_bytes", peak_rss / 2},
          {"peak_live_bytes", live}, {"ops", ops},               {"wall_s", wall},
          {"minor_faults", 10},       {"user_s", 0.5}};
}

json cell(const std::string& allocator, int rep, json phases, const std::string& status = "ok") {
  return {{"key", allocator + "/size_mix/t2/r" + std::to_string(rep) + "/h"},
          {"allocator", allocator},
          {"backend", allocator},
          {"workload", "size_mix"},
          {"threads", 2},
          {"rep", rep},
          {"params", {{"live_mib", "64"}}},
          {"env", json::object()},
          {"preload", ""},
          {"status", status},
          {"error", status == "ok" ? json() : json("killed by signal 11")},
          {"idle_rss_bytes", 1000},
          {"phases", std::move(phases)},
          {"timeline", json::array({json::array({0, 1})})}};
}

const Group& find_group(const Grouping& g, const std::vector<json>& values) {
  for (const auto& group : g.groups)
    if (group.values == values) return group;
  ADD_FAILURE() << "no group " << json(values).dump();
  static Group none;
  return none;
}

}  // namespace

TEST(Statistics, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
}

TEST(Statistics, SpreadHasMinMaxAndMedianAbsoluteDeviation) {
  // Deviations from 3: 2 1 0 1 7 -> sorted 0 1 1 2 7 -> MAD 1.
  Spread odd = spread_of({10, 1, 3, 2, 4});
  EXPECT_EQ(odd.n, 5u);
  EXPECT_DOUBLE_EQ(odd.median, 3);
  EXPECT_DOUBLE_EQ(odd.min, 1);
  EXPECT_DOUBLE_EQ(odd.max, 10);
  EXPECT_DOUBLE_EQ(odd.mad, 1);
  // Median 2.5; deviations 1.5 0.5 0.5 1.5 -> MAD (0.5 + 1.5) / 2 = 1.
  Spread even = spread_of({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(even.median, 2.5);
  EXPECT_DOUBLE_EQ(even.mad, 1);
  EXPECT_EQ(spread_of({}).n, 0u);
  EXPECT_DOUBLE_EQ(spread_of({5, 5}).mad, 0);
}

TEST(Grouping, PhasesOfRepetitionsArePooledAndFailuresKeepTheirOwnRow) {
  std::vector<json> recs;
  for (int rep = 1; rep <= 3; ++rep)
    recs.push_back(cell("jemalloc", rep,
                        {phase("fill", 1000 + rep * 1000.0, 1000, 100.0 * rep, 1), phase("churn", 9000, 2000, 50, 0.5)}));
  recs.push_back(cell("glibc", 1, json::array(), "crashed"));
  Model m = Model::from_records(recs);
  Grouping g = m.group(default_dimensions());
  ASSERT_EQ(g.dimensions, default_dimensions());
  ASSERT_EQ(g.groups.size(), 3u);
  // First appearance order: the table reads like the matrix.
  EXPECT_EQ(g.groups[0].values, (std::vector<json>{"size_mix", 2, "jemalloc", "fill"}));
  EXPECT_EQ(g.groups[1].values, (std::vector<json>{"size_mix", 2, "jemalloc", "churn"}));
  const Group& fill = g.groups[0];
  EXPECT_EQ(fill.cells, 3u);
  EXPECT_EQ(fill.statuses.at("ok"), 3u);
  const Spread& rss = fill.metric(Metric::peak_rss_bytes);
  EXPECT_EQ(rss.n, 3u);
  EXPECT_DOUBLE_EQ(rss.median, 3000);
  EXPECT_DOUBLE_EQ(rss.min, 2000);
  EXPECT_DOUBLE_EQ(rss.max, 4000);
  EXPECT_DOUBLE_EQ(rss.mad, 1000);
  // (3000 - 1000 idle) / 1000 live.
  EXPECT_DOUBLE_EQ(fill.metric(Metric::rss_above_idle_over_live).median, 2);
  EXPECT_DOUBLE_EQ(fill.metric(Metric::ops_per_s).median, 200);
  EXPECT_EQ(fill.metric(Metric::lock_wait_s).n, 0u) << "no contention recorded: no value, not zero";
  const Group& crashed = find_group(g, {"size_mix", 2, "glibc", "(cell)"});
  EXPECT_EQ(crashed.statuses.at("crashed"), 1u);
  EXPECT_EQ(crashed.errors, std::vector<std::string>{"killed by signal 11"});
  EXPECT_EQ(crashed.metric(Metric::peak_rss_bytes).n, 0u);
}

TEST(Grouping, WithoutThePhaseDimensionACellCountsOnceWithWholeCellFigures) {
  Model m = Model::from_records(
      {cell("jemalloc", 1, {phase("fill", 3000, 1000, 100, 1), phase("churn", 9000, 2000, 300, 0.5)})});
  Grouping g = m.group({Dimension::allocator});
  ASSERT_EQ(g.groups.size(), 1u);
  const Group& all = g.groups[0];
  EXPECT_EQ(all.cells, 1u);
  EXPECT_DOUBLE_EQ(all.metric(Metric::peak_rss_bytes).median, 9000);  // the larger peak
  EXPECT_DOUBLE_EQ(all.metric(Metric::end_rss_bytes).median, 4500);   // the last phase's
  EXPECT_DOUBLE_EQ(all.metric(Metric::ops_per_s).median, 400 / 1.5);  // total ops over total time
  EXPECT_DOUBLE_EQ(all.metric(Metric::minor_faults).median, 20);      // summed
  EXPECT_DOUBLE_EQ(all.metric(Metric::rss_above_idle_over_live).median, (9000.0 - 1000) / 2000);
}

TEST(Grouping, LockWaitIsTheContentionWaitInSeconds) {
  json r = cell("jemalloc", 1, {phase("fill", 3000, 1000, 100, 1)});
  r["phases"][0]["contention"] = {{"total_wait_ns", 2500000000LL}, {"num_wait", 3}};
  Grouping g = Model::from_records({r}).group(default_dimensions());
  EXPECT_DOUBLE_EQ(g.groups[0].metric(Metric::lock_wait_s).median, 2.5);
}

TEST(Grouping, ContentionFiguresForEveryBackend) {
  json r = cell("glibc", 1, {phase("fill", 3000, 1000, 2000000, 1), phase("churn", 3000, 1000, 1000000, 1)});
  auto contention = [](uint64_t p50, uint64_t p99, uint64_t p999, uint64_t max, uint64_t wait, uint64_t run) {
    json calls{{"samples", 100}, {"p50_ns", p50}, {"p99_ns", p99}, {"p999_ns", p999}, {"max_ns", max}};
    return json{{"latency", {{"every", 64}, {"malloc", calls}, {"free", calls}}}, {"runqueue_wait_ns", wait}, {"run_ns", run}};
  };
  r["phases"][0]["contention"] = contention(40, 300, 2000, 9000, 1000000000, 3000000000);
  r["phases"][0]["voluntary_ctx_switches"] = 10;
  r["phases"][1]["contention"] = contention(50, 200, 5000, 7000, 0, 1000000000);
  r["phases"][1]["voluntary_ctx_switches"] = 2;
  Model model = Model::from_records({r});
  Grouping by_phase = model.group(default_dimensions());
  const Group& fill = by_phase.groups[0];
  EXPECT_DOUBLE_EQ(fill.metric(Metric::alloc_p50_ns).median, 40);
  EXPECT_DOUBLE_EQ(fill.metric(Metric::alloc_p999_ns).median, 2000);
  EXPECT_DOUBLE_EQ(fill.metric(Metric::free_max_ns).median, 9000);
  EXPECT_DOUBLE_EQ(fill.metric(Metric::vol_ctx_switches_per_mop).median, 5);  // 10 per 2 M operations
  EXPECT_DOUBLE_EQ(fill.metric(Metric::runqueue_wait_s).median, 1);
  EXPECT_DOUBLE_EQ(fill.metric(Metric::runqueue_wait_share).median, 0.25);  // 1 s waiting, 3 s running
  EXPECT_DOUBLE_EQ(by_phase.groups[1].metric(Metric::runqueue_wait_share).median, 0);
  // The whole cell: the worst phase's percentiles; sleeps and waits over everything.
  const Group& whole = model.group({Dimension::workload, Dimension::allocator}).groups[0];
  EXPECT_DOUBLE_EQ(whole.metric(Metric::alloc_p50_ns).median, 50);
  EXPECT_DOUBLE_EQ(whole.metric(Metric::alloc_p99_ns).median, 300);
  EXPECT_DOUBLE_EQ(whole.metric(Metric::alloc_p999_ns).median, 5000);
  EXPECT_DOUBLE_EQ(whole.metric(Metric::alloc_max_ns).median, 9000);
  EXPECT_DOUBLE_EQ(whole.metric(Metric::vol_ctx_switches_per_mop).median, 4);  // 12 per 3 M
  EXPECT_DOUBLE_EQ(whole.metric(Metric::runqueue_wait_share).median, 0.2);     // 1 s of 5 s
}

TEST(Grouping, UnsampledLatencyHasNoValueNotZero) {
  json r = cell("glibc", 1, {phase("fill", 3000, 1000, 100, 1)});
  r["phases"][0]["contention"] = {{"latency", nullptr}, {"latency_absent", "sampling off (latency_every = 0)"}};
  Grouping g = Model::from_records({r}).group(default_dimensions());
  EXPECT_EQ(g.groups[0].metric(Metric::alloc_p99_ns).n, 0u);
  EXPECT_EQ(g.groups[0].metric(Metric::runqueue_wait_share).n, 0u);
  json empty = cell("glibc", 1, {phase("idle", 3000, 1000, 0, 1)});
  empty["phases"][0]["contention"] = {{"latency", {{"every", 64}, {"malloc", {{"samples", 0}, {"p50_ns", nullptr}}}}}};
  EXPECT_EQ(Model::from_records({empty}).group(default_dimensions()).groups[0].metric(Metric::alloc_p50_ns).n, 0u);
}

TEST(Reading, ContentionOfTheWrongShapeNamesTheField) {
  json r = cell("glibc", 1, {phase("fill", 3000, 1000, 100, 1)});
  r["phases"][0]["contention"] = {{"latency", "fast"}};
  try {
    Model::from_records({r}, "f.jsonl");
    FAIL() << "no error";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("phases[0].contention.latency"), std::string::npos) << e.what();
  }
  r["phases"][0]["contention"] = {{"latency", {{"malloc", {{"p99_ns", "slow"}}}}}};
  EXPECT_THROW(Model::from_records({r}), ResultsError);
}

TEST(Grouping, DifferentParamsEnvOrLibraryAreNeverPooledAndTheLabelSaysWhy) {
  json small = cell("jemalloc", 1, {phase("fill", 1000, 1000, 1, 1)});
  json large = small;
  large["params"]["live_mib"] = "128";
  large["key"] = "jemalloc/size_mix/t2/r1/other";
  json tuned = small;
  tuned["env"] = {{"MALLOC_CONF", "dirty_decay_ms:0"}};
  tuned["key"] = "jemalloc/size_mix/t2/r1/tuned";
  json other_lib = small;
  other_lib["preload"] = "/opt/jemalloc-4.5/lib/libjemalloc.so.2";
  other_lib["key"] = "jemalloc/size_mix/t2/r1/lib";
  Grouping g = Model::from_records({small, large, tuned, other_lib}).group(default_dimensions());
  ASSERT_EQ(g.groups.size(), 4u);
  std::set<std::string> labels;
  for (const auto& group : g.groups) {
    EXPECT_EQ(group.cells, 1u);
    labels.insert(value_label(group.values[0]) + " " + value_label(group.values[2]));
  }
  // Every row of the ambiguous set names what differs; "-" is a key the identity does not have.
  EXPECT_TRUE(labels.count(R"(size_mix[live_mib=64] jemalloc[MALLOC_CONF=-,library=""])")) << json(labels).dump();
  EXPECT_TRUE(labels.count(R"(size_mix[live_mib=128] jemalloc[MALLOC_CONF=-,library=""])")) << json(labels).dump();
  EXPECT_TRUE(labels.count(R"(size_mix[live_mib=64] jemalloc[MALLOC_CONF=dirty_decay_ms:0,library=""])"))
      << json(labels).dump();
  bool hashed = false;
  for (const auto& l : labels) hashed = hashed || l.find("library=#") != std::string::npos;
  EXPECT_TRUE(hashed) << "a long library path is shown as a short hash: " << json(labels).dump();
  // The group's identity carries the full values.
  EXPECT_EQ(find_group(g, {"size_mix[live_mib=128]", 2, R"(jemalloc[MALLOC_CONF=-,library=""])", "fill"}).identity["params"]["live_mib"], "128");
}

TEST(Grouping, PlainLabelsWhereNothingIsAmbiguous) {
  // Two parameter sets of one workload, but on different allocators: each row is already unique.
  json a = cell("jemalloc", 1, json::array(), "failed");
  json b = cell("glibc", 1, json::array(), "timeout");
  b["params"]["live_mib"] = "128";
  Grouping g = Model::from_records({a, b}).group(default_dimensions());
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.groups[0].values[0], "size_mix");
  EXPECT_EQ(g.groups[1].values[0], "size_mix");
}

TEST(Grouping, HostsAreNeverPooled) {
  json a = cell("jemalloc", 1, {phase("fill", 1000, 1000, 1, 1)});
  json b = cell("jemalloc", 2, {phase("fill", 2000, 1000, 1, 1)});
  a["host"] = "node-a";
  b["host"] = "node-b";
  Model m = Model::from_records({a, b});
  Grouping g = m.group(default_dimensions());
  ASSERT_EQ(g.groups.size(), 2u);
  ASSERT_EQ(g.dimensions.back(), Dimension::host) << "a host column appears where rows would read the same";
  EXPECT_EQ(g.groups[0].values.back(), "node-a");
  EXPECT_EQ(g.groups[1].values.back(), "node-b");
  Grouping by_host = m.group({Dimension::host});
  ASSERT_EQ(by_host.dimensions, std::vector<Dimension>{Dimension::host});
  EXPECT_EQ(by_host.groups.size(), 2u);
  EXPECT_THROW(m.group({Dimension::host, Dimension::host}), ResultsError);
}

TEST(Grouping, ReleasesOfAFamilyAreInVersionOrderWhateverTheFileOrder) {
  // A folder of two runs: the first ran 5.10.0, glibc, 5.9.0 and 5.3.0:bg, the second appended
  // 4.5.0; at 1 thread only 5.10.0 and 4.5.0 ran.
  auto release = [](const std::string& allocator, int threads) {
    json r = cell(allocator, 1, {phase("fill", 1000, 1000, 1, 1), phase("churn", 2000, 1000, 1, 1)});
    r["backend"] = allocator == "glibc" ? "glibc" : "jemalloc";
    r["threads"] = threads;
    r["key"] = allocator + "/size_mix/t" + std::to_string(threads) + "/r1/h";
    return r;
  };
  Model m = Model::from_records({release("jemalloc@5.10.0", 2), release("glibc", 2), release("jemalloc@5.10.0", 1),
                                 release("jemalloc@5.9.0", 2), release("jemalloc@5.3.0:bg", 2),
                                 release("jemalloc@4.5.0", 2), release("jemalloc@4.5.0", 1)});
  std::vector<std::pair<std::string, int>> cells;
  for (const auto& c : m.cells()) cells.emplace_back(m.identity(c).allocator, c.threads);
  // The releases take the places releases held, by version (5.9 before 5.10); glibc keeps its own,
  // and a cell never moves to the place of another thread count's.
  const std::vector<std::pair<std::string, int>> expected{{"jemalloc@4.5.0", 2}, {"glibc", 2},
                                                          {"jemalloc@4.5.0", 1}, {"jemalloc@5.3.0:bg", 2},
                                                          {"jemalloc@5.9.0", 2}, {"jemalloc@5.10.0", 2},
                                                          {"jemalloc@5.10.0", 1}};
  EXPECT_EQ(cells, expected);
  std::vector<std::string> rows;
  for (const auto& g : m.group(default_dimensions()).groups)
    rows.push_back(value_label(g.values[2]) + " t" + value_label(g.values[1]) + " " + value_label(g.values[3]));
  const std::vector<std::string> expected_rows{
      "jemalloc@4.5.0 t2 fill",    "jemalloc@4.5.0 t2 churn",    "glibc t2 fill",          "glibc t2 churn",
      "jemalloc@4.5.0 t1 fill",    "jemalloc@4.5.0 t1 churn",    "jemalloc@5.3.0:bg t2 fill", "jemalloc@5.3.0:bg t2 churn",
      "jemalloc@5.9.0 t2 fill",    "jemalloc@5.9.0 t2 churn",    "jemalloc@5.10.0 t2 fill",   "jemalloc@5.10.0 t2 churn",
      "jemalloc@5.10.0 t1 fill",   "jemalloc@5.10.0 t1 churn"};
  EXPECT_EQ(rows, expected_rows);
}

TEST(Reading, CorruptMiddleLineIsSkippedWithItsLineNumber) {
  std::string d = fresh_dir("corrupt");
  write(d + "/results.jsonl", cell("glibc", 1, json::array()).dump() + "\n{\"key\": \"x\", garbage\n" +
                                  cell("glibc", 2, json::array()).dump() + "\n");
  Model m = Model::load({d});
  EXPECT_EQ(m.cells().size(), 2u);
  ASSERT_EQ(m.warnings().size(), 1u);
  EXPECT_NE(m.warnings()[0].find(d + "/results.jsonl:2: not a JSON object"), std::string::npos) << m.warnings()[0];
}

TEST(Reading, ALastLineCutShortIsReportedAsSuch) {
  std::string d = fresh_dir("cut");
  write(d + "/results.jsonl", cell("glibc", 1, json::array()).dump() + "\n{\"key\":\"b\",\"sta");
  Model m = Model::load({d});
  EXPECT_EQ(m.cells().size(), 1u);
  ASSERT_EQ(m.warnings().size(), 1u);
  EXPECT_NE(m.warnings()[0].find("results.jsonl:2: last line cut short"), std::string::npos) << m.warnings()[0];
}

TEST(Reading, DuplicatesCountOnceAndAreListedWithTheirLines) {
  std::vector<json> recs{cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)}), cell("glibc", 2, json::array()),
                         cell("glibc", 1, {phase("fill", 5000, 1000, 1, 1)})};
  Model m = Model::from_records(recs, "r.jsonl");
  ASSERT_EQ(m.cells().size(), 2u);
  EXPECT_EQ(m.cells()[0].phases[0].get(Field::peak_rss_bytes), 1000) << "the first is kept";
  ASSERT_EQ(m.warnings().size(), 1u);
  EXPECT_NE(m.warnings()[0].find("r.jsonl: 1 duplicate record"), std::string::npos) << m.warnings()[0];
  EXPECT_NE(m.warnings()[0].find("line 3 repeats line 1"), std::string::npos) << m.warnings()[0];

  std::vector<json> many{cell("glibc", 1, json::array())};
  for (int i = 0; i < 7; ++i) many.push_back(many[0]);
  Model capped = Model::from_records(many, "r.jsonl");
  EXPECT_EQ(capped.cells().size(), 1u);
  ASSERT_EQ(capped.warnings().size(), 1u);
  EXPECT_NE(capped.warnings()[0].find("7 duplicate records"), std::string::npos) << capped.warnings()[0];
  EXPECT_NE(capped.warnings()[0].find("line 6 repeats line 1, and 2 more"), std::string::npos) << capped.warnings()[0];
}

TEST(Reading, TheHighestAttemptWinsInTheFirstAttemptsPlace) {
  json first = cell("glibc", 1, json::array(), "timeout");
  json other = cell("jemalloc", 1, {phase("fill", 1000, 1000, 1, 1)});
  json retry = cell("glibc", 1, {phase("fill", 2000, 1000, 1, 1)});
  retry["attempt"] = 3;
  json stale = first;
  stale["attempt"] = 2;
  Model m = Model::from_records({first, other, retry, stale});
  EXPECT_TRUE(m.warnings().empty());
  ASSERT_EQ(m.cells().size(), 2u);
  EXPECT_EQ(m.cells()[0].attempt, 3);
  EXPECT_EQ(m.cells()[0].status, "ok");
  EXPECT_EQ(m.cells()[0].line, 3u);
  Grouping g = m.group(default_dimensions());
  EXPECT_EQ(g.groups[0].values[2], "glibc");
  EXPECT_EQ(g.groups[0].statuses.count("timeout"), 0u);
}

TEST(Reading, TheSameKeyInTwoFoldersIsTwoRuns) {
  std::string a = fresh_dir("run_a"), b = fresh_dir("run_b");
  write(a + "/results.jsonl", cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)}).dump() + "\n");
  write(b + "/results.jsonl", cell("glibc", 1, {phase("fill", 1100, 1000, 1, 1)}).dump() + "\n");
  Model m = Model::load({a, b, a});
  EXPECT_EQ(m.cells().size(), 2u);
  ASSERT_EQ(m.warnings().size(), 1u);
  EXPECT_NE(m.warnings()[0].find("given twice"), std::string::npos);
  EXPECT_EQ(m.group(default_dimensions()).groups[0].cells, 2u);
}

// A copied folder read with its original, or a merged folder with one of its sources: one record
// read twice is one repetition, whatever the folder calls its origin or host.
TEST(Reading, TheSameRecordInTwoFoldersCountsOnceAndIsSaid) {
  std::string a = fresh_dir("same_a"), b = fresh_dir("same_b");
  json with_id = cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)});
  with_id["record_id"] = "0123456789abcdef0123456789abcdef";
  json before_ids = cell("jemalloc", 1, {phase("fill", 2000, 1000, 1, 1)});
  write(a + "/results.jsonl", with_id.dump() + "\n" + before_ids.dump() + "\n");
  json merged_id = with_id, merged_old = before_ids;
  for (json* r : {&merged_id, &merged_old}) {
    (*r)["origin"] = a;
    (*r)["host"] = "h1";
  }
  merged_id["phases"][0]["peak_rss_bytes"] = 999;  // the id decides, not the figures
  write(b + "/results.jsonl", merged_id.dump() + "\n" + merged_old.dump() + "\n");
  Model m = Model::load({a, b});
  EXPECT_EQ(m.cells().size(), 2u);
  ASSERT_EQ(m.warnings().size(), 1u);
  EXPECT_EQ(m.warnings()[0].rfind("2 records appear in more than one folder; counted once", 0), 0u) << m.warnings()[0];
  EXPECT_EQ(m.cells()[0].phases[0].get(Field::peak_rss_bytes), 1000) << "the first read is kept";

  // Records of other runs of the same cell are repetitions, as before.
  json rerun = with_id;
  rerun["record_id"] = "fedcba9876543210fedcba9876543210";
  write(b + "/results.jsonl", rerun.dump() + "\n");
  EXPECT_EQ(Model::load({a, b}).cells().size(), 3u);
  EXPECT_TRUE(Model::load({a, b}).warnings().empty());
}

// An id is drawn per record, but an edit or a botched copy can give two records of other cells one
// id: they are two records, both kept, and said (issue 41: "line 2 repeats line 1" dropped one).
TEST(Reading, RecordsOfOtherCellsSharingAnIdAreBothKeptAndSaid) {
  std::string d = fresh_dir("shared_id");
  json r1 = cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)}), r2 = cell("glibc", 2, {phase("fill", 1100, 1000, 1, 1)});
  r1["record_id"] = r2["record_id"] = "0123456789abcdef0123456789abcdef";
  json retry = r1;  // the same cell's next attempt under the same id: another record too
  retry["attempt"] = 2;
  write(d + "/results.jsonl", r1.dump() + "\n" + r2.dump() + "\n");
  Model m = Model::load({d});
  EXPECT_EQ(m.cells().size(), 2u);
  EXPECT_EQ(m.group(default_dimensions()).groups.at(0).cells, 2u);
  ASSERT_EQ(m.warnings().size(), 1u) << m.warnings()[0];
  EXPECT_EQ(m.warnings()[0].find("repeats"), std::string::npos) << m.warnings()[0];
  EXPECT_NE(m.warnings()[0].find("1 record shares its record_id with a record of another cell or attempt"), std::string::npos)
      << m.warnings()[0];
  EXPECT_NE(m.warnings()[0].find(d + "/results.jsonl:2 and line 1 (record_id 0123456789abcdef0123456789abcdef)"),
            std::string::npos) << m.warnings()[0];

  // Across folders the same: the copy of line 1 is one record, counted once; line 2 and the retry are more.
  std::string e = fresh_dir("shared_id_other");
  write(e + "/results.jsonl", r1.dump() + "\n" + retry.dump() + "\n");
  Model both = Model::load({d, e});
  EXPECT_EQ(both.cells().size(), 3u) << "r1 once, r2, and r1's retry in the second folder";
  std::string said;
  for (const auto& w : both.warnings()) said += w + "\n";
  EXPECT_NE(said.find("1 record appears in more than one folder; counted once"), std::string::npos) << said;
  EXPECT_NE(said.find("2 records share their record_id"), std::string::npos) << said;
  EXPECT_NE(said.find(e + "/results.jsonl:2 and " + d + "/results.jsonl:1"), std::string::npos) << said;
}

TEST(Reading, RecordIdentityIsTheIdElseTheContentWithoutOriginAndHost) {
  json r = cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)});
  json moved = r;
  moved["origin"] = "/elsewhere";
  moved["host"] = "h2";
  EXPECT_EQ(record_copy_identity(r), record_copy_identity(moved));
  moved["rep"] = 2;
  EXPECT_NE(record_copy_identity(r), record_copy_identity(moved));
  r["record_id"] = "abc";
  moved["record_id"] = "abc";
  EXPECT_EQ(record_copy_identity(r), record_copy_identity(moved));
}

// The first line of tests/fixtures/records/vN.jsonl: one real record of each schema version.
json record_of_version(int version) {
  std::ifstream in(std::string(ALLOCMARK_FIXTURES_DIR) + "/records/v" + std::to_string(version) + ".jsonl");
  std::string line;
  std::getline(in, line);
  return json::parse(line);
}

// `a` and `b` the same JSON, numbers equal to within 1e-12 of their size (an integer written by the
// old code, a double by the model).
void expect_same_figures(const json& a, const json& b, const std::string& where) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    EXPECT_NEAR(x, y, 1e-12 * std::max(std::abs(x), std::abs(y))) << where;
  } else if (a.is_object() && b.is_object()) {
    EXPECT_EQ(a.size(), b.size()) << where << ": " << a.dump() << " vs " << b.dump();
    for (const auto& [k, v] : a.items()) {
      ASSERT_TRUE(b.contains(k)) << where << "." << k;
      expect_same_figures(v, b[k], where + "." + k);
    }
  } else if (a.is_array() && b.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (std::size_t i = 0; i < a.size(); ++i) expect_same_figures(a[i], b[i], where + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

// What records of schema version 3 carry beyond version 2's (docs/results-schema.md, "Schema versions").
json without_figures_for_readers(json r) {
  for (const char* k : {"schema_version", "peak_rss_bytes", "peak_live_bytes", "fragmentation_ratio", "totals"}) r.erase(k);
  for (auto& p : r["phases"]) {
    p.erase("ops_per_s");
    if (p.contains("contention") && p["contention"].is_object())
      for (const char* k : {"voluntary_ctx_switches_per_mop", "runqueue_wait_share"}) p["contention"].erase(k);
  }
  return r;
}

// Issue 41: the records of 2026-12-03 dropped fields the schema promised to keep. A record of each
// version (v1 written on 2026-11-30, v2 as 7b59db7 wrote them, v3 now) is read alike, and the
// figures v1 and v3 carry for their readers are the model's metrics, computed again the same.
TEST(Reading, RecordsOfEverySchemaVersionReadAlike) {
  for (int version : {1, 2, 3}) {
    SCOPED_TRACE("schema version " + std::to_string(version));
    const json record = record_of_version(version);
    EXPECT_EQ(record.contains("schema_version"), version == 3);
    if (version == 3) {
      EXPECT_EQ(record["schema_version"], kRecordSchemaVersion);
    }
    EXPECT_EQ(record.contains("peak_rss_bytes"), version != 2);
    const Model model = Model::from_records({record});
    ASSERT_EQ(model.cells().size(), 1u);
    const CellResult& c = model.cells()[0];
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(c.phases.size(), 3u);
    const PhaseValues whole = whole_cell(c);
    EXPECT_GT(*metric_value(Metric::peak_rss_bytes, c, whole), 1 << 20);
    EXPECT_GT(*metric_value(Metric::ops_per_s, c, c.phases[1]), 0);
    // Added again to the record without them: what the record itself carries (v2 carries none).
    json added = without_figures_for_readers(record);
    add_figures_for_readers(added);
    if (version == 2) {
      json v3 = record_of_version(3);
      EXPECT_EQ(without_figures_for_readers(v3), record) << "v2 is v3 without the figures for readers";
      v3.erase("schema_version");
      expect_same_figures(added, v3, "v2 with its figures added");
      continue;
    }
    for (const char* k : {"peak_rss_bytes", "peak_live_bytes", "fragmentation_ratio", "totals"}) {
      ASSERT_TRUE(record.contains(k)) << k;
      expect_same_figures(added[k], record[k], k);
    }
    for (std::size_t i = 0; i < 3; ++i) {
      expect_same_figures(added["phases"][i]["ops_per_s"], record["phases"][i]["ops_per_s"], "ops_per_s");
      // v1's writer put the shares in a phase's contention only once it measured them.
      for (const char* k : {"voluntary_ctx_switches_per_mop", "runqueue_wait_share"})
        if (version == 3 || record["phases"][i]["contention"].contains(k))
          expect_same_figures(added["phases"][i]["contention"][k], record["phases"][i]["contention"][k], k);
    }
    // Each is the metric's value.
    EXPECT_EQ(record["peak_rss_bytes"].get<double>(), *metric_value(Metric::peak_rss_bytes, c, whole));
    EXPECT_EQ(record["peak_live_bytes"].get<double>(), *metric_value(Metric::peak_live_bytes, c, whole));
    EXPECT_NEAR(record["fragmentation_ratio"].get<double>(), *metric_value(Metric::rss_above_idle_over_live, c, whole), 1e-12);
    EXPECT_NEAR(record["totals"]["ops_per_s"].get<double>(), *metric_value(Metric::ops_per_s, c, whole), 1e-6);
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(record["phases"][i]["ops_per_s"].get<double>(), *metric_value(Metric::ops_per_s, c, c.phases[i]), 1e-6) << i;
  }
}

// Issue 41: a value no measurement gives is refused as the record is read, naming the file, the
// line, the cell, the phase and the metric, by the rule baselines are held to.
TEST(Reading, ImplausibleValuesAreRefusedNamingLineCellPhaseAndMetric) {
  const auto refusal = [](json record) -> std::string {
    try {
      (void)Model::from_records({record}, "F/results.jsonl");
      return "";
    } catch (const ResultsError& e) {
      return e.what();
    }
  };
  const json good = cell("glibc", 1, json::array({phase("fill", 1e7, 4e6, 1000, 0.5), phase("churn", 1.1e7, 4e6, 3000, 1.0)}));
  EXPECT_EQ(refusal(good), "");
  for (auto [field, value, expected] :
       std::vector<std::tuple<std::string, double, std::string>>{
           {"peak_rss_bytes", -5, "-5 is not a peak_rss_bytes: expected bytes above 0"},
           {"peak_rss_bytes", 0, "0 is not a peak_rss_bytes: expected bytes above 0"},
           {"peak_rss_bytes", 1e300, "1e+300 is not a peak_rss_bytes: more bytes than a 57-bit address space holds"},
           {"ops", 1e300, "is not a ops_per_s: more than 10^12 operations a second"},
           {"wall_s", -1, "-1 is not a wall_s: expected seconds from 0 to 10^9"},
           {"minor_faults", -1, "-1 is not a minor_faults: expected a count from 0 to 10^18"},
           {"peak_live_bytes", -1, "is not a"}}) {
    json bad = good;
    bad["phases"][1][field] = value;
    const std::string why = refusal(bad);
    EXPECT_NE(why.find("F/results.jsonl:1: cell glibc size_mix t2 r1, phases[1] (churn): "), std::string::npos) << why;
    EXPECT_NE(why.find(expected), std::string::npos) << field << ": " << why;
  }
  // The idle RSS, a field no metric is, by the bytes rule.
  json idle = good;
  idle["idle_rss_bytes"] = -5;
  EXPECT_NE(refusal(idle).find("F/results.jsonl:1: cell glibc size_mix t2 r1: -5 is not a idle_rss_bytes: expected bytes of 0 or more"),
            std::string::npos) << refusal(idle);
  // A node's share above one (the phase's, over both nodes, is 0.55).
  json nodes = good;
  nodes["phases"][0]["nodes"] = json::array({{{"node", 0}, {"sampled_blocks", 10}, {"local_blocks", 11}},
                                             {{"node", 1}, {"sampled_blocks", 10}, {"local_blocks", 0}}});
  EXPECT_NE(refusal(nodes).find("phases[0] (fill) nodes[0] (node 0): 1.1 is not a local_fraction: expected a share from 0 to 1"),
            std::string::npos) << refusal(nodes);
  // The same rule as a baseline's (harness/gate): one function.
  EXPECT_EQ(value_problem(Metric::anon_huge_bytes, 0), "");
  EXPECT_NE(value_problem(Metric::end_rss_bytes, 0), "");
  EXPECT_EQ(value_problem(Metric::rss_above_idle_over_live, -0.5), "");
}

TEST(Reading, OneRuleSaysWhichRecordOfACellCounts) {
  EXPECT_FALSE(record_identity_of(json{{"status", "ok"}})) << "no key: not a record the driver wrote";
  EXPECT_FALSE(record_identity_of(json{{"key", 3}}));
  EXPECT_FALSE(record_identity_of(json{{"key", "k"}, {"attempt", "2"}}));
  EXPECT_FALSE(record_identity_of(json{{"key", "k"}, {"attempt", 0}}));
  const RecordIdentity first = *record_identity_of(json{{"key", "k"}, {"status", "failed"}});
  EXPECT_EQ(first.attempt, 1);
  EXPECT_EQ(first.status, "failed");
  const RecordIdentity retry = *record_identity_of(json{{"key", "k"}, {"attempt", 2}, {"status", "ok"}});
  EXPECT_EQ(versus(retry, first), RecordVersus::supersedes);
  EXPECT_EQ(versus(first, retry), RecordVersus::superseded);
  EXPECT_EQ(versus(first, first), RecordVersus::duplicate);
  // In a merged folder the same cell of two runs is two repetitions, never one attempt of the other.
  const RecordIdentity elsewhere = *record_identity_of(json{{"key", "k"}, {"attempt", 2}, {"origin", "/b"}});
  EXPECT_NE(elsewhere.slot(), retry.slot());
  EXPECT_EQ(retry.slot(), first.slot());
}

// A run holding the folder's lock (here this test, through another descriptor): every reader is
// told, with the cells finished so far and the run's plan.
TEST(Reading, AFolderARunIsWritingIsSaidWithItsProgress) {
  std::string d = fresh_dir("being_written");
  write(d + "/results.jsonl", cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)}).dump() + "\n");
  write(d + "/cells.json", R"({"a": "a", "b": "b", "c": "c"})");
  write(d + "/.allocmark.lock", "pid 4242 on host h, started 0: allocmark run\n");
  EXPECT_TRUE(Model::load({d}).writer_notices().empty()) << "no run holds it";
  EXPECT_EQ(writer_notice(d), "");
  int fd = ::open((d + "/.allocmark.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  Model m = Model::load({d});
  ASSERT_EQ(m.writer_notices().size(), 1u);
  EXPECT_EQ(m.writer_notices()[0].rfind(d + ": a run is writing this folder (pid 4242): 1 of 3 cells finished", 0), 0u)
      << m.writer_notices()[0];
  EXPECT_EQ(writer_notice(d), m.writer_notices()[0]);
  EXPECT_TRUE(Model::load({d}, {.require_cells = true, .own_folder = true}).writer_notices().empty());
  std::filesystem::remove(d + "/cells.json");
  const std::string without_plan = Model::load({d}).writer_notices()[0];
  EXPECT_NE(without_plan.find("(pid 4242): 1 cells finished"), std::string::npos) << without_plan;
  ::close(fd);
}

TEST(Reading, PartsNotGatheredYetAreRecordsOfTheFolderAndRepeatsOfGatheredOnesAreSkipped) {
  std::string d = fresh_dir("parts");
  json gathered = cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)});
  json pending = cell("jemalloc", 1, {phase("fill", 1000, 1000, 1, 1)});
  write(d + "/results.jsonl", gathered.dump() + "\n");
  std::filesystem::create_directories(d + "/parts/s1");
  write(d + "/parts/s1/0.json", gathered.dump() + "\n");  // the driver died before removing it
  write(d + "/parts/s1/1.json", pending.dump() + "\n");
  Model m = Model::load({d});
  EXPECT_EQ(m.cells().size(), 2u);
  EXPECT_TRUE(m.warnings().empty());
  // Only parts, no results.jsonl yet (a --no-wait array still running).
  std::filesystem::remove(d + "/results.jsonl");
  EXPECT_EQ(Model::load({d}).cells().size(), 2u);
}

TEST(Reading, AttemptsSupersedeOnlyWithinTheirOrigin) {
  json a = cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)});
  a["origin"] = "/runs/a";
  a["host"] = "h1";
  json b = cell("glibc", 1, {phase("fill", 1100, 1000, 1, 1)});
  b["origin"] = "/runs/b";
  b["host"] = "h1";
  json a_retry = a;
  a_retry["attempt"] = 2;
  Model m = Model::from_records({a, b, a_retry});
  EXPECT_TRUE(m.warnings().empty());
  ASSERT_EQ(m.cells().size(), 2u);  // a's retry replaced a; b is its own run of the same cell
  EXPECT_EQ(m.cells()[0].attempt, 2);
  EXPECT_EQ(m.group(default_dimensions()).groups[0].cells, 2u);  // one host: pooled as repetitions
}

TEST(Reading, TheFoldersMetaNamesTheHostOfRecordsWithout) {
  std::string a = fresh_dir("host_a"), b = fresh_dir("host_b");
  write(a + "/results.jsonl", cell("glibc", 1, {phase("fill", 1000, 1000, 1, 1)}).dump() + "\n");
  write(b + "/results.jsonl", cell("glibc", 1, {phase("fill", 1100, 1000, 1, 1)}).dump() + "\n");
  write(a + "/meta.json", R"({"machine": {"host": "alpha"}})");
  write(b + "/meta.json", R"({"machine": {"host": "beta"}})");
  Grouping g = Model::load({a, b}).group(default_dimensions());
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.groups[0].values.back(), "alpha");
  EXPECT_EQ(g.groups[0].identity["host"], "alpha");
}

TEST(Reading, WrongShapesAndMissingResultsNameTheFileAndLine) {
  std::string d = fresh_dir("shape");
  json bad = cell("glibc", 1, json::array());
  bad["threads"] = "two";
  write(d + "/results.jsonl", cell("glibc", 2, json::array()).dump() + "\n" + bad.dump() + "\n");
  try {
    Model::load({d});
    FAIL() << "no error";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find(d + "/results.jsonl:2: 'threads' must be an integer"), std::string::npos)
        << e.what();
  }
  json bad_phase = cell("glibc", 1, {phase("fill", 1, 1, 1, 1)});
  bad_phase["phases"][0]["peak_rss_bytes"] = "lots";
  EXPECT_THROW(Model::from_records({bad_phase}), ResultsError);
  EXPECT_THROW(Model::from_records({json{{"allocator", "glibc"}}}), ResultsError);

  std::string empty = fresh_dir("no_results");
  EXPECT_THROW(Model::load({empty}), ResultsError);
  EXPECT_NO_THROW(Model::load({empty}, LoadOptions{.require_cells = false}));
  write(empty + "/results.jsonl", "");
  EXPECT_THROW(Model::load({empty}), ResultsError);
  EXPECT_THROW(Model::load({empty + "/missing"}), ResultsError);
}

TEST(Reading, ALargeFileIsStreamed) {
  // 50,000 cells of one group. Only counts are asserted: memory and time are not the test's to judge.
  std::string d = fresh_dir("large");
  {
    std::ofstream out(d + "/results.jsonl");
    json r = cell("glibc", 0, {phase("fill", 3000, 1000, 10, 1), phase("churn", 4000, 1000, 10, 1)});
    r["timeline"] = json::array();
    for (int t = 0; t < 50; ++t) r["timeline"].push_back({t * 10, 4096 * t});
    for (int rep = 1; rep <= 50000; ++rep) {
      r["rep"] = rep;
      r["key"] = "glibc/size_mix/t2/r" + std::to_string(rep) + "/h";
      out << r.dump() << "\n";
    }
  }
  Model m = Model::load({d});
  EXPECT_EQ(m.cells().size(), 50000u);
  EXPECT_TRUE(m.warnings().empty());
  Grouping g = m.group(default_dimensions());
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.groups[0].cells, 50000u);
  EXPECT_EQ(g.groups[0].statuses.at("ok"), 50000u);
  EXPECT_EQ(g.groups[0].metric(Metric::peak_rss_bytes).n, 50000u);
  EXPECT_DOUBLE_EQ(g.groups[1].metric(Metric::peak_rss_bytes).median, 4000);
}

// Per-node aggregation: a phase's `nodes` become node rows with the per-node metrics; without the
// node dimension the phase carries their sums and the pooled local fraction.
TEST(Model, NodeDimensionSplitsPhasesIntoNodes) {
  auto with_nodes = [](double r0, double r1, double local0) {
    json p = phase("fill", 4e6, 1e6, 300, 1.0);
    p["nodes"] = json::array({{{"node", 0}, {"threads", {0}}, {"ops", 100}, {"resident_bytes", r0}, {"sampled_blocks", 10},
                               {"local_blocks", local0}, {"local_fraction", local0 / 10}},
                              {{"node", 1}, {"threads", {1, 2}}, {"ops", 200}, {"resident_bytes", r1}, {"sampled_blocks", 30},
                               {"local_blocks", 15}, {"local_fraction", 0.5}}});
    return p;
  };
  Model m = Model::from_records({cell("numap", 1, json::array({with_nodes(1e6, 3e6, 10)})),
                                 cell("numap", 2, json::array({with_nodes(2e6, 2e6, 8)}))});
  Grouping by_node = m.group({Dimension::allocator, Dimension::phase, Dimension::node});
  ASSERT_EQ(by_node.groups.size(), 2u);
  const Group& n0 = find_group(by_node, {"numap", "fill", 0});
  EXPECT_EQ(n0.metric(Metric::numa_resident_bytes).median, 1.5e6);
  EXPECT_EQ(n0.metric(Metric::local_fraction).min, 0.8);
  EXPECT_EQ(n0.metric(Metric::local_fraction).max, 1.0);
  EXPECT_EQ(n0.metric(Metric::node_threads).median, 1);
  EXPECT_EQ(n0.metric(Metric::ops_per_s).median, 100) << "the node's threads' ops over the phase's wall time";
  EXPECT_EQ(n0.metric(Metric::peak_rss_bytes).n, 0u) << "node rows carry only per-node metrics";
  const Group& n1 = find_group(by_node, {"numap", "fill", 1});
  EXPECT_EQ(n1.metric(Metric::node_threads).median, 2);
  EXPECT_EQ(n1.metric(Metric::local_fraction).median, 0.5);

  Grouping by_phase = m.group({Dimension::allocator, Dimension::phase});
  const Group& whole = find_group(by_phase, {"numap", "fill"});
  EXPECT_EQ(whole.metric(Metric::numa_resident_bytes).median, 4e6);
  EXPECT_EQ(whole.metric(Metric::local_fraction).max, 25.0 / 40) << "pooled over nodes: (10 + 15) / (10 + 30)";
  EXPECT_EQ(whole.metric(Metric::node_threads).n, 0u);

  // Per cell (no phase dimension) with nodes: one row per node, folded over the phases.
  Grouping cells = m.group({Dimension::allocator, Dimension::node});
  EXPECT_EQ(cells.groups.size(), 2u);
  EXPECT_EQ(find_group(cells, {"numap", 1}).metric(Metric::numa_resident_bytes).median, 2.5e6);
}

TEST(Model, NodeRowsCarryTheLatencyTimedOnTheirCPUs) {
  auto calls = [](double p50, double p99) {
    return json{{"samples", 10}, {"p50_ns", p50}, {"p99_ns", p99}, {"p999_ns", p99 * 2}, {"max_ns", p99 * 3}};
  };
  json p = phase("fill", 4e6, 1e6, 300, 1.0);
  p["contention"] = {{"latency", {{"every", 64}, {"malloc", calls(40, 900)}, {"free", calls(30, 700)}}}};
  p["nodes"] = json::array({{{"node", 0}, {"threads", {0}}, {"ops", 100}, {"latency", {{"malloc", calls(20, 100)}, {"free", calls(15, 90)}}}},
                            {{"node", 1}, {"threads", {1}}, {"ops", 200}, {"latency", {{"malloc", calls(60, 900)}, {"free", calls(45, 700)}}}},
                            {{"node", 2}, {"threads", json::array()}, {"ops", 0}, {"latency", nullptr}}});
  Model m = Model::from_records({cell("jemalloc", 1, json::array({p}))});
  Grouping by_node = m.group({Dimension::allocator, Dimension::phase, Dimension::node});
  EXPECT_EQ(find_group(by_node, {"jemalloc", "fill", 0}).metric(Metric::alloc_p99_ns).median, 100);
  EXPECT_EQ(find_group(by_node, {"jemalloc", "fill", 1}).metric(Metric::alloc_p99_ns).median, 900);
  EXPECT_EQ(find_group(by_node, {"jemalloc", "fill", 1}).metric(Metric::free_p999_ns).median, 1400);
  EXPECT_EQ(find_group(by_node, {"jemalloc", "fill", 2}).metric(Metric::alloc_p99_ns).n, 0u) << "no timed call on node 2";
  // The phase's own latency is the process-wide histogram's, not a sum over nodes.
  EXPECT_EQ(find_group(m.group({Dimension::allocator, Dimension::phase}), {"jemalloc", "fill"}).metric(Metric::alloc_p50_ns).median, 40);
  // Per cell and node: the worst phase, as for the whole cell.
  EXPECT_EQ(find_group(m.group({Dimension::allocator, Dimension::node}), {"jemalloc", 1}).metric(Metric::alloc_p99_ns).median, 900);
  json bad = p;
  bad["nodes"][0]["latency"]["malloc"]["p99_ns"] = "slow";
  try {
    Model::from_records({cell("jemalloc", 1, json::array({bad}))});
    FAIL() << "a non-number latency is an error";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("nodes[0].latency.malloc.p99_ns"), std::string::npos) << e.what();
  }
}

TEST(Model, RecordsWithoutNodesFallInNodeDash) {
  Model m = Model::from_records({cell("glibc", 1, json::array({phase("fill", 4e6, 1e6, 300, 1.0)}))});
  Grouping g = m.group({Dimension::allocator, Dimension::node});
  ASSERT_EQ(g.groups.size(), 1u);
  EXPECT_EQ(g.groups[0].values[1], "-");
  EXPECT_EQ(g.groups[0].metric(Metric::peak_rss_bytes).median, 4e6);
}

TEST(WorkloadMetrics, NumbersOfEachPhaseAreGroupedWithNestedNamesJoined) {
  auto with_metrics = [](const std::string& allocator, int rep, double ns64, double ns128) {
    json p = phase("malloc_free", 100, 50, 10, 1);
    p["workload_metrics"] = {{"ns_per_op", {{"malloc_free_64", ns64}, {"malloc_free_128", ns128}, {"malloc_free_0064", 1}}},
                             {"note", "text is not a figure"},
                             {"rows", 7}};
    return cell(allocator, rep, json::array({p, phase("idle", 100, 50, 0, 1)}));
  };
  Model m = Model::from_records({with_metrics("glibc", 0, 10, 20), with_metrics("glibc", 1, 12, 22),
                                 with_metrics("glibc", 2, 30, 21), with_metrics("numap", 0, 8, 40)});
  Grouping g = m.group(default_dimensions());
  EXPECT_EQ(g.workload_metrics, (std::vector<std::string>{"ns_per_op.malloc_free_0064", "ns_per_op.malloc_free_64", "ns_per_op.malloc_free_128", "rows"}));
  const Group& glibc = find_group(g, {"size_mix", 2, "glibc", "malloc_free"});
  const Spread& s = glibc.workload_metrics.at("ns_per_op.malloc_free_64");
  EXPECT_EQ(s.n, 3u);
  EXPECT_DOUBLE_EQ(s.median, 12);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 30);
  EXPECT_DOUBLE_EQ(find_group(g, {"size_mix", 2, "numap", "malloc_free"}).workload_metrics.at("ns_per_op.malloc_free_128").median, 40);
  // A phase without workload metrics has none; a grouping without phases has none (they are per phase).
  EXPECT_TRUE(find_group(g, {"size_mix", 2, "glibc", "idle"}).workload_metrics.empty());
  Grouping whole = m.group({Dimension::allocator});
  EXPECT_TRUE(whole.workload_metrics.empty());
  EXPECT_TRUE(whole.groups[0].workload_metrics.empty());

  select_workload_metrics(g, {"ns_per_op.*"});
  EXPECT_EQ(g.workload_metrics, (std::vector<std::string>{"ns_per_op.malloc_free_0064", "ns_per_op.malloc_free_64", "ns_per_op.malloc_free_128"}));
  EXPECT_EQ(find_group(g, {"size_mix", 2, "glibc", "malloc_free"}).workload_metrics.count("rows"), 0u);
  try {
    select_workload_metrics(g, {"ns_per_op.free_*"});
    ADD_FAILURE() << "a pattern matching nothing was accepted";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("'ns_per_op.free_*'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ns_per_op.malloc_free_64"), std::string::npos) << e.what();
  }
  select_workload_metrics(g, {});
  EXPECT_TRUE(g.workload_metrics.empty());
}

// meta.json's machine is an interface: the writer gives each row of the table (but the one a
// --system-thp run adds) and nothing else, and what decides comparability is named in the
// table's order; a field that only describes is no difference.
TEST(Machine, TheDescriptionHoldsTheTablesFieldsAndDifferencesNameWhatDecides) {
  const json now = machine_info();
  std::set<std::string> written, rows;
  for (const auto& [key, value] : now.items()) written.insert(key);
  for (const auto& [key, role] : kMachineFields)
    if (std::string(key) != machine_key::thp_enabled_set_by_run) rows.insert(key);
  EXPECT_EQ(written, rows);
  EXPECT_EQ(rows, (std::set<std::string>{"arch", "cpu_model", "cpus_online", "cpus_usable", "free_page_reporting", "glibc_version",
                                         "host", "kernel", "memory_bytes", "numa", "overcommit_memory", "page_size", "thp_defrag",
                                         "thp_enabled"}));
  EXPECT_TRUE(now["free_page_reporting"]["active"].is_boolean());
  EXPECT_TRUE(now["numa"].contains("nodes"));
  json other = now;
  other["arch"] = "elsewhere";
  other["memory_bytes"] = 1;
  EXPECT_EQ(machine_differences(now, other), "");
  other["kernel"] = "k2";
  other["host"] = "h2";
  other["numa"]["nodes"] = now["numa"]["nodes"].get<int>() + 1;
  EXPECT_EQ(machine_differences(now, other),
            "host " + now["host"].dump() + " recorded, \"h2\" now; kernel " + now["kernel"].dump() + " recorded, \"k2\" now; NUMA nodes " +
                std::to_string(now["numa"]["nodes"].get<int>()) + " recorded, " + std::to_string(other["numa"]["nodes"].get<int>()) + " now");
}

// Free page reporting describes the machine and decides nothing; its notice is said only where a
// folder's machine had it active (not for older folders, which lack the field, nor a bare machine).
TEST(Machine, FreePageReportingIsANoticeWhereItWasActive) {
  const json machine = machine_info();
  json with = machine, without = machine;
  with["free_page_reporting"] = {{"active", true}, {"block_bytes", 2 << 20}};
  without["free_page_reporting"] = {{"active", false}};
  EXPECT_EQ(machine_differences(with, without), "");
  EXPECT_NE(page_reporting_notice(json{{"machine", with}}).find("free page reporting"), std::string::npos);
  EXPECT_EQ(page_reporting_notice(json{{"machine", without}}), "");
  json old = machine;
  old.erase("free_page_reporting");
  EXPECT_EQ(page_reporting_notice(json{{"machine", old}}), "");
  EXPECT_EQ(page_reporting_notice(json{{"machine", {{"free_page_reporting", "yes"}}}}), "");
  EXPECT_EQ(page_reporting_notice(json::object()), "");
}

// The balloon is found by its device type (0x0005) and its negotiated feature bit 5, whatever the
// other devices say; the block size only from a page_reporting_order the kernel could have set.
TEST(Machine, FreePageReportingIsReadFromTheVirtioBalloonsFeatures) {
  const std::filesystem::path root = std::filesystem::temp_directory_path() / ("allocmark-sysfs-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  auto write = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text << "\n";
  };
  auto read = [&] { return free_page_reporting(root.string(), 4096); };
  EXPECT_EQ(read(), (json{{"active", false}}));  // no virtio bus at all
  write("bus/virtio/devices/virtio1/device", "0x0001");  // a network device with bit 5 set
  write("bus/virtio/devices/virtio1/features", "0000010000000000");
  write("bus/virtio/devices/virtio0/device", "0x0005");  // the balloon, reporting not negotiated
  write("bus/virtio/devices/virtio0/features", "0110000100000000");
  write("module/page_reporting/parameters/page_reporting_order", "9");
  EXPECT_EQ(read(), (json{{"active", false}}));
  write("bus/virtio/devices/virtio0/features", "0110010100000000");
  EXPECT_EQ(read(), (json{{"active", true}, {"block_bytes", 2u << 20}}));
  for (const char* order : {"-1", "4294967295", "64", ""}) {
    write("module/page_reporting/parameters/page_reporting_order", order);
    EXPECT_EQ(read(), (json{{"active", true}})) << order;
  }
  std::filesystem::remove_all(root);
}

}  // namespace model_test
