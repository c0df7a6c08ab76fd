#include "harness/results/results_dir.h"

#include "harness/results/reporters/reporter.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace allocmark::results;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
// The folder's lines as written (the model, the one reader, applies its rules on top; these tests
// check what the storage layer itself put in the file).
std::vector<json> load_records(const std::string& dir) {
  std::ifstream in(dir + "/results.jsonl");
  if (!in) throw ResultsError(dir + " holds no results.jsonl");
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) {
    json rec = json::parse(line, nullptr, false);
    if (!rec.is_discarded() && rec.is_object()) out.push_back(std::move(rec));
  }
  if (out.empty()) throw ResultsError(dir + "/results.jsonl holds no finished cell");
  return out;
}

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/results_test_" + name;
  fs::remove_all(d);
  return d;
}
json record(const std::string& key, const std::string& status = "ok") {
  return {{"key", key},      {"allocator", "glibc"}, {"backend", "glibc"}, {"workload", "size_mix"},
          {"threads", 1},    {"rep", 1},             {"status", status},   {"idle_rss_bytes", 1000},
          {"phases", json::array({{{"name", "fill"}, {"peak_rss_bytes", 3000}, {"peak_live_bytes", 1000}, {"ops_per_s", 5.0}}})}};
}
}  // namespace

TEST(ResultsDir, AppendsOneLinePerCellAndResumesFromKeys) {
  std::string d = fresh_dir("append");
  {
    ResultsDir dir(d, {});
    dir.append(record("a"));
    dir.append(record("b", "crashed"));
  }
  EXPECT_THROW(ResultsDir(d, {}), ResultsError);
  ResultsDir again(d, {.resume = true});
  EXPECT_EQ(again.recorded().size(), 2u);
  EXPECT_EQ(load_records(d).size(), 2u);
}

TEST(ResultsDir, ResumeDropsALineCutShort) {
  std::string d = fresh_dir("cut");
  {
    ResultsDir dir(d, {});
    dir.append(record("a"));
  }
  std::ofstream(d + "/results.jsonl", std::ios::app) << R"({"key":"b","status":"o)";
  ResultsDir again(d, {.resume = true});
  EXPECT_EQ(again.recorded().size(), 1u);
  again.append(record("c"));
  auto recs = load_records(d);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1]["key"], "c");
}

TEST(ResultsDir, SummaryCsvHasARowPerPhaseAndQuotesErrors) {
  json failed = record("f", "failed");
  failed["phases"] = json::array();
  failed["error"] = "exit code 3: preload did not take, \"quoted\"";
  std::string csv = cells_csv(Model::from_records({record("a"), failed}));
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = csv.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(csv.substr(start, nl - start));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("allocator,backend,workload,threads,rep,status,phase,", 0), 0u);
  EXPECT_NE(lines[1].find(",fill,"), std::string::npos);
  EXPECT_NE(lines[1].find(",2,"), std::string::npos) << "(3000-1000)/1000 = 2";
  EXPECT_NE(lines[2].find("\"exit code 3: preload did not take, \"\"quoted\"\"\""), std::string::npos) << lines[2];
}

TEST(ResultsDir, LoadingAFolderWithoutResultsIsAnError) {
  std::string d = fresh_dir("empty");
  fs::create_directories(d);
  EXPECT_THROW(load_records(d), ResultsError);
}

// A write that fails part way (here: the file-size limit, as a full disk would) leaves no partial
// line: the file is cut back and the error says so.
TEST(ResultsDir, AFailedAppendLeavesNoPartialLine) {
  std::string d = fresh_dir("full");
  ResultsDir dir(d, {});
  dir.append(record("a"));
  const auto before = fs::file_size(d + "/results.jsonl");
  json big = record("b");
  big["filler"] = std::string(20000, 'x');
  rlimit old{};
  ::getrlimit(RLIMIT_FSIZE, &old);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = before + 5000;
  ::setrlimit(RLIMIT_FSIZE, &small);
  EXPECT_THROW(dir.append(big), ResultsError);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(fs::file_size(d + "/results.jsonl"), before);
  dir.append(record("c"));
  auto recs = load_records(d);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1]["key"], "c");
}

TEST(ResultsDir, ASecondOpenOfALockedFolderNamesTheHolder) {
  std::string d = fresh_dir("locked");
  ResultsDir first(d, {false, false, false, "allocmark run --out x"});
  try {
    ResultsDir second(d, {});
    FAIL() << "a locked folder was opened twice";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("in use by another allocmark run (pid " + std::to_string(::getpid())), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("allocmark run --out x"), std::string::npos) << e.what();
  }
}

TEST(ResultsDir, ResumeStopsAtACorruptMiddleLineAndNamesIt) {
  std::string d = fresh_dir("corrupt");
  {
    ResultsDir dir(d, {});
    dir.append(record("a"));
  }
  std::ofstream(d + "/results.jsonl", std::ios::app) << "{not json\n" << record("c").dump() << "\n";
  try {
    ResultsDir again(d, {.resume = true});
    FAIL() << "resume went past a corrupt line";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2 is not a valid record"), std::string::npos) << e.what();
  }
  ResultsDir discarding(d, {.resume = true, .discard_corrupt = true});
  EXPECT_EQ(discarding.recorded().size(), 2u);
  EXPECT_EQ(load_records(d).size(), 2u);
}

TEST(ResultsDir, PartsAreGatheredOnceAndRemoved) {
  std::string d = fresh_dir("parts");
  {
    ResultsDir dir(d, {});
    dir.append(record("a"));
  }
  fs::create_directories(d + "/parts/s1");
  auto put = [&](const std::string& name, const json& r) { std::ofstream(d + "/parts/s1/" + name) << r.dump() << "\n"; };
  put("0.json", record("a"));  // already appended (the driver died before removing the part)
  put("1.json", record("b"));
  json retry = record("a", "ok");
  retry["attempt"] = 2;
  put("2.json", retry);
  std::ofstream(d + "/parts/s1/3.json.tmp.99") << "{\"key\": \"c\"";  // a task killed mid-write: not a part
  EXPECT_THROW(ResultsDir(d, {}), ResultsError);  // parts are results: a plain run is refused
  ResultsDir dir(d, {.resume = true});
  auto recs = load_records(d);
  ASSERT_EQ(recs.size(), 3u);  // a, b, a's attempt 2; a's attempt 1 not twice
  EXPECT_EQ(recs[1]["key"], "b");
  EXPECT_EQ(recs[2].value("attempt", 1), 2);
  EXPECT_EQ(dir.recorded().at("a").attempt, 2);
  EXPECT_TRUE(part_files(d).empty());
  EXPECT_TRUE(fs::exists(d + "/parts/s1/3.json.tmp.99"));
}
