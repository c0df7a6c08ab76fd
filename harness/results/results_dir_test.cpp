#include "harness/results/results_dir.h"

#include "harness/results/folder_layout.h"
#include "harness/results/meta.h"
#include "harness/results/reporters/reporter.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace allocmark::results;
using nlohmann::json;
namespace fs = std::filesystem;

// Named after the file: its helpers and tests share a unity batch with other files (cmake/allocmark_build_speed.cmake).
namespace results_dir_test {
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
          {"phases", json::array({{{"name", "fill"}, {"peak_rss_bytes", 3000}, {"peak_live_bytes", 1000}, {"ops", 5}, {"wall_s", 1.0}}})}};
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
  EXPECT_EQ(dir.recorded().at("a").identity.attempt, 2);
  EXPECT_TRUE(part_files(d).empty());
  EXPECT_TRUE(fs::exists(d + "/parts/s1/3.json.tmp.99"));
}

// Issue 21: a results folder may be someone else's; links planted in it are never followed.
namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}
}  // namespace

TEST(ResultsDir, ALinkWhereARunKeepsItsFilesIsRefusedBeforeAnythingChanges) {
  const std::string outside = fresh_dir("outside");
  write_text(outside + "/other.json", record("elsewhere").dump());
  write_text(outside + "/victim.txt", "precious\n");
  for (const std::string link : {"parts/x", "parts/s1/0.json", "logs", "data", "results.corrupt.jsonl", ".allocmark.lock",
                                 "slurm/s1", "machines"}) {
    SCOPED_TRACE(link);
    std::string d = fresh_dir("linked");
    { ResultsDir(d, {}).append(record("a")); }
    const std::string jsonl = read_all(d + "/results.jsonl");
    fs::create_directories(fs::path(d + "/" + link).parent_path());
    fs::remove_all(d + "/" + link);
    const bool file = link.find('.') != std::string::npos;
    fs::create_symlink(file ? outside + (link == "parts/s1/0.json" ? "/other.json" : "/victim.txt") : outside, d + "/" + link);
    try {
      ResultsDir dir(d, {.resume = true});
      ADD_FAILURE() << "opened a folder with a link at " << link;
    } catch (const ResultsError& e) {
      EXPECT_NE(std::string(e.what()).find(d + "/" + link + " is a symbolic link"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read_all(d + "/results.jsonl"), jsonl);
    EXPECT_EQ(read_all(outside + "/other.json"), record("elsewhere").dump());
    EXPECT_EQ(read_all(outside + "/victim.txt"), "precious\n");
  }
}

TEST(ResultsDir, PartFilesAndSubmissionsLeaveLinksOut) {
  const std::string outside = fresh_dir("outside_parts");
  write_text(outside + "/0.json", record("elsewhere").dump());
  std::string d = fresh_dir("reader");
  write_text(d + "/parts/s1/0.json", record("a").dump());
  fs::create_symlink(outside, d + "/parts/s2");
  fs::create_symlink(outside + "/0.json", d + "/parts/s1/1.json");
  fs::create_directories(d + "/slurm/s1");
  fs::create_symlink(outside, d + "/slurm/s2");
  EXPECT_EQ(part_files(d), std::vector<std::string>{d + "/parts/s1/0.json"});
  EXPECT_EQ(submission_dirs(d), std::vector<std::string>{d + "/slurm/s1"});
}

TEST(Folder, WritingAtomicallyReplacesALinkAndNeverWritesThroughIt) {
  const std::string outside = fresh_dir("outside_write");
  write_text(outside + "/victim.txt", "precious\n");
  std::string d = fresh_dir("atomic");
  fs::create_directories(d);
  fs::create_symlink(outside + "/victim.txt", d + "/meta.json");
  write_file_atomically(d + "/meta.json", "{}\n");
  EXPECT_FALSE(fs::is_symlink(d + "/meta.json"));
  EXPECT_EQ(read_all(d + "/meta.json"), "{}\n");
  EXPECT_EQ(read_all(outside + "/victim.txt"), "precious\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1) << "no temporary file is left";
}

TEST(Folder, RemovingATreeRemovesLinksNotWhatTheyPointTo) {
  const std::string outside = fresh_dir("outside_tree");
  write_text(outside + "/keep/db", "someone's\n");
  std::string d = fresh_dir("tree");
  write_text(d + "/data/cell.data/own", "x");
  fs::create_symlink(outside, d + "/data/cell.data/link");
  fs::create_symlink(outside + "/keep/db", d + "/data/cell.data/file_link");
  Folder(d).sub("data", false).remove_tree("cell.data");
  EXPECT_FALSE(fs::exists(fs::symlink_status(d + "/data/cell.data")));
  EXPECT_EQ(read_all(outside + "/keep/db"), "someone's\n");
  // A data root that is a link is no folder of the run: refused, not entered.
  fs::remove_all(d + "/data");
  fs::create_symlink(outside, d + "/data");
  EXPECT_THROW(Folder(d).sub("data", false), ResultsError);
  EXPECT_THROW(Folder(d).open_file("data", O_RDONLY), ResultsError);
}

TEST(Folder, AFailedWriteSaysTheSystemsReason) {
  try {
    write_file_atomically(fresh_dir("no_such") + "/sub/meta.json", "{}\n");
    ADD_FAILURE() << "wrote into a folder that does not exist";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("disk full"), std::string::npos) << e.what();
  }
  std::string d = fresh_dir("too_large");
  fs::create_directories(d);
  rlimit old{};
  ::getrlimit(RLIMIT_FSIZE, &old);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 1000;
  ::setrlimit(RLIMIT_FSIZE, &small);
  std::string what;
  try {
    write_file_atomically(d + "/summary.json", std::string(5000, 'x'));
  } catch (const ResultsError& e) {
    what = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_NE(what.find("File too large"), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(d + "/summary.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 0) << "no temporary file is left";
}

TEST(FolderLayout, OneFunctionNamesEveryFileOfACell) {
  const layout::CellFiles first = layout::cell_files("glibc/size_mix/t1/r1/0123abcd");
  EXPECT_EQ(first.log, "logs/glibc_size_mix_t1_r1_0123abcd.log");
  EXPECT_EQ(first.stdout_file, "logs/glibc_size_mix_t1_r1_0123abcd.stdout");
  EXPECT_EQ(first.data, "data/glibc_size_mix_t1_r1_0123abcd.data");
  const layout::CellFiles again = layout::cell_files("glibc/size_mix/t1/r1/0123abcd", 3);
  EXPECT_EQ(again.log, "logs/glibc_size_mix_t1_r1_0123abcd.attempt3.log");
  // Derived from a log's path (`allocmark cell` is given the log) they are the same names.
  EXPECT_EQ(layout::stdout_beside("/r/" + again.log), "/r/" + again.stdout_file);
  EXPECT_EQ("data/" + layout::data_folder_name("/r/" + again.log), again.data);
  // A key too long for a file name keeps a name the file system takes, and stays distinct.
  const std::string long_a = std::string(5000, 'a') + "/size_mix/t1/r1/1", long_b = std::string(5000, 'a') + "/size_mix/t1/r1/2";
  const layout::CellFiles a = layout::cell_files(long_a, 12), b = layout::cell_files(long_b, 12);
  EXPECT_LT(fs::path(a.stdout_file).filename().string().size(), 255u);
  EXPECT_NE(a.log, b.log);
  EXPECT_TRUE(layout::is_own_entry("parts"));
  EXPECT_FALSE(layout::is_own_entry("report.html"));
}

TEST(Meta, ReadersFindWhatTheRunWrote) {
  std::string d = fresh_dir("meta_codec");
  fs::create_directories(d);
  meta::NewFolder folder;
  folder.allocmark = {{"version", "1"}, {"git_commit", "abc"}};
  folder.machine = {{"host", "h1"}, {"kernel", "6"}};
  folder.matrix = {{"pin", "scatter"}, {"nodes", "0"}};
  folder.run = {{"mode", "run"}};
  std::ofstream(layout::path_in(d, layout::kMeta)) << meta::encode(folder).dump(2);
  const meta::Recorded read = meta::read(d);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read.path, d + "/meta.json");
  EXPECT_EQ(meta::host(read.value), "h1");
  EXPECT_EQ(read.value[meta::kRuns].size(), 1u);
  EXPECT_EQ(meta::placement_text(read.value[meta::kMatrix]), "scatter on nodes 0");
  EXPECT_EQ(meta::machines(read.value).at("h1")["kernel"], "6");
}

TEST(Meta, MissingAndInvalidAreToldApart) {
  std::string d = fresh_dir("meta_states");
  fs::create_directories(d);
  EXPECT_EQ(meta::read(d).state, meta::Recorded::State::missing);
  std::ofstream(layout::path_in(d, layout::kMeta)) << "[1, 2]";
  EXPECT_EQ(meta::read(d).state, meta::Recorded::State::invalid);
  EXPECT_FALSE(meta::decode("{").has_value());
  // An old folder's matrix names no pin: pin_threads decides, as it did when it was written.
  EXPECT_EQ(meta::placement_text({{"pin_threads", false}}), "none");
}

}  // namespace results_dir_test
