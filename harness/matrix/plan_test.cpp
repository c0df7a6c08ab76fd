#include "harness/matrix/plan.h"

#include <unistd.h>

#include "allocators/releases/releases.h"
#include "harness/trace/format.h"
#include "harness/trace/test_events.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

using namespace allocmark::matrix;

namespace {
MatrixFile variants() {
  return load_matrix_file(std::string(std::getenv("ALLOCMARK_SOURCE_DIR")) + "/configs/variants.toml", true);
}
std::string error_of(const std::optional<MatrixFile>& file, const Overrides& o) {
  try {
    build_plan(file, variants(), o);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
Overrides axes(std::vector<std::string> a, std::vector<std::string> w, std::vector<int> t) {
  Overrides o;
  o.allocators = a;
  o.workloads = w;
  o.threads = t;
  return o;
}
}  // namespace

TEST(Plan, ExpandsRepsOutermostAndAllocatorsInnermost) {
  Overrides o = axes({"glibc", "jemalloc:bg"}, {"size_mix"}, {1, 2});
  o.reps = 2;
  Plan p = build_plan(std::nullopt, variants(), o);
  ASSERT_EQ(p.cells.size(), 2u * 2u * 2u);
  EXPECT_EQ(p.cells[0].label(), "glibc size_mix t1 r1");
  EXPECT_EQ(p.cells[1].label(), "jemalloc:bg size_mix t1 r1");
  EXPECT_EQ(p.cells[2].label(), "glibc size_mix t2 r1");
  EXPECT_EQ(p.cells[4].rep, 2);
  EXPECT_EQ(p.cells[1].allocator.backend, "jemalloc");
  EXPECT_EQ(p.cells[1].allocator.env.at("MALLOC_CONF"), "background_thread:true");
  EXPECT_NE(p.cells[1].allocator.library.find("libjemalloc.so.2"), std::string::npos);
  EXPECT_EQ(p.cells[0].allocator.library, "");
}

TEST(Plan, ThpAxisCrossesEveryAllocatorOnceAMode) {
  Overrides o = axes({"glibc", "jemalloc:bg"}, {"size_mix"}, {1});
  o.reps = 1;
  o.thp = std::vector<std::string>{"never", "never"};
  // The lab's guest stands in for "the machine" so the test does not depend on this one's mode.
  o.cells_machine_thp = "madvise";
  o.cells_machine = "the guest";
  o.thp->push_back("madvise");
  Plan p = build_plan(std::nullopt, variants(), o);
  ASSERT_EQ(p.allocators.size(), 4u);
  EXPECT_EQ(p.allocators[0].name, "glibc@thp=never");
  EXPECT_EQ(p.allocators[1].name, "glibc@thp=madvise");
  EXPECT_EQ(p.allocators[3].name, "jemalloc:bg@thp=madvise");
  EXPECT_EQ(p.allocators[3].thp, "madvise");
  EXPECT_EQ(p.allocators[3].env.at("MALLOC_CONF"), "background_thread:true");  // the variant's settings stay
  ASSERT_EQ(p.cells.size(), 4u);
  EXPECT_NE(p.cells[0].key(), p.cells[1].key());
  EXPECT_EQ(p.notes, std::vector<std::string>{"thp never is named twice; it runs once"});
  // A cell description carries the mode to `allocmark cell` (a Slurm task) and back.
  EXPECT_EQ(checked_cell(allocmark::record::cell_description(p.cells[0])).allocator.thp, "never");
  EXPECT_EQ(checked_cell(allocmark::record::cell_description(p.cells[0])).key(), p.cells[0].key());
  nlohmann::json bad = allocmark::record::cell_description(p.cells[0]);
  bad["allocator"]["thp"] = "sometimes";
  EXPECT_THROW(checked_cell(bad), ConfigError);
  // The names it holds are checked here, where the backends and workloads are known.
  bad = allocmark::record::cell_description(p.cells[0]);
  bad["allocator"]["backend"] = "nosuch";
  EXPECT_THROW(checked_cell(bad), ConfigError);
  bad = allocmark::record::cell_description(p.cells[0]);
  bad["workload"] = "nosuch";
  EXPECT_THROW(checked_cell(bad), ConfigError);
  EXPECT_EQ(p.as_json()["allocators"][1]["thp"], "madvise");

  // Only `never` can be set per cell: another mode than the machine's is refused, naming the way.
  o.thp = std::vector<std::string>{"always"};
  std::string e = error_of(std::nullopt, o);
  EXPECT_NE(e.find("--thp: always: the transparent huge pages of the guest are 'madvise'"), std::string::npos) << e;
  EXPECT_NE(e.find("allocmark lab --topology configs/topologies/two-node.toml --thp always"), std::string::npos) << e;
  o.thp = std::vector<std::string>{"bogus"};
  EXPECT_NE(error_of(std::nullopt, o).find("'bogus' is not a transparent huge page mode"), std::string::npos);
  MatrixFile f;
  f.path = "m.toml";
  f.thp = {"never", "always"};
  f.thp_origin = "m.toml:3:1";
  o.thp.reset();
  e = error_of(f, o);
  EXPECT_NE(e.find("m.toml:3:1: 'thp': always:"), std::string::npos) << e;
  // Without the axis nothing changes: names, keys and descriptions are as before.
  o.cells_machine_thp.reset();
  Plan plain = build_plan(std::nullopt, variants(), axes({"glibc"}, {"size_mix"}, {1}));
  EXPECT_EQ(plain.allocators[0].name, "glibc");
  EXPECT_EQ(plain.allocators[0].thp, "");
  EXPECT_FALSE(plain.as_json()["allocators"][0].contains("thp"));
}

TEST(Plan, SizePresetThenFileThenSetOverride) {
  Overrides o = axes({"glibc"}, {"size_mix"}, {1});
  EXPECT_EQ(build_plan(std::nullopt, variants(), o).cells[0].params.at("live_mib"), "64");
  o.size = "full";
  EXPECT_EQ(build_plan(std::nullopt, variants(), o).cells[0].params.at("live_mib"), "1024");
  MatrixFile f;
  f.path = "m.toml";
  f.params["size_mix"]["live_mib"] = {"8", "m.toml:3:1"};
  EXPECT_EQ(build_plan(f, variants(), o).cells[0].params.at("live_mib"), "8");
  o.sets = {"size_mix.live_mib=16"};
  EXPECT_EQ(build_plan(f, variants(), o).cells[0].params.at("live_mib"), "16");
}

TEST(Plan, LatencyEveryDefaultThenFileThenFlagAndARunThatDiffersIsAnotherMatrix) {
  Overrides o = axes({"glibc"}, {"size_mix"}, {1});
  Plan plain = build_plan(std::nullopt, variants(), o);
  EXPECT_EQ(plain.settings.latency_every, 64);
  MatrixFile f;
  f.path = "m.toml";
  f.latency_every = 0;
  EXPECT_EQ(build_plan(f, variants(), o).settings.latency_every, 0);
  o.latency_every = 16;
  Plan flagged = build_plan(f, variants(), o);
  EXPECT_EQ(flagged.settings.latency_every, 16);
  EXPECT_EQ(flagged.as_json()["latency_every"], 16);
  EXPECT_EQ(matrix_differences(plain.as_json(), flagged.as_json()), "latency_every: 64 recorded, 16 now");
  o.latency_every = -1;
  EXPECT_NE(error_of(f, o).find("--latency-every: must be in 0.."), std::string::npos) << error_of(f, o);
}

TEST(Plan, KeyChangesWithParamsAndEnvButNotWithOrder) {
  Overrides o = axes({"glibc"}, {"size_mix"}, {1});
  std::string k1 = build_plan(std::nullopt, variants(), o).cells[0].key();
  EXPECT_EQ(k1, build_plan(std::nullopt, variants(), o).cells[0].key());
  o.sets = {"size_mix.ops=5"};
  EXPECT_NE(k1, build_plan(std::nullopt, variants(), o).cells[0].key());
}

TEST(Plan, BadNamesAreErrorsWithChoices) {
  std::string e = error_of(std::nullopt, axes({"jemaloc"}, {"size_mix"}, {1}));
  EXPECT_NE(e.find("unknown allocator 'jemaloc'"), std::string::npos) << e;
  EXPECT_NE(e.find("jemalloc:bg"), std::string::npos) << e;
  e = error_of(std::nullopt, axes({"glibc"}, {"sizemix"}, {1}));
  EXPECT_NE(e.find("unknown workload 'sizemix'"), std::string::npos) << e;
  EXPECT_NE(e.find("size_mix"), std::string::npos) << e;
  Overrides o = axes({"glibc"}, {"size_mix"}, {1});
  o.sets = {"size_mix.live=3"};
  e = error_of(std::nullopt, o);
  EXPECT_NE(e.find("unknown parameter 'live'"), std::string::npos) << e;
  EXPECT_NE(e.find("live_mib"), std::string::npos) << e;
  o.sets = {"size_mix.live_mib=lots"};
  EXPECT_NE(error_of(std::nullopt, o).find("not an integer"), std::string::npos);
  o.sets = {"size_mix.sizes=16-8:1"};
  EXPECT_NE(error_of(std::nullopt, o).find("sizes"), std::string::npos);
  o.sets = {"nonsense"};
  EXPECT_NE(error_of(std::nullopt, o).find("workload.param=value"), std::string::npos);
  EXPECT_NE(error_of(std::nullopt, axes({"glibc", "glibc"}, {"size_mix"}, {1})).find("twice"), std::string::npos);
}

TEST(Plan, FileErrorsPointIntoTheFile) {
  MatrixFile f;
  f.path = "m.toml";
  f.params["size_mix"]["bogus"] = {"1", "m.toml:7:1"};
  std::string e = error_of(f, axes({"glibc"}, {"size_mix"}, {1}));
  EXPECT_NE(e.find("m.toml:7:1"), std::string::npos) << e;
  MatrixFile g;
  g.path = "g.toml";
  g.allocator_defs["mine"] = AllocatorDef{"mine", "jemalloc", "/nonexistent/libjemalloc.so.2", {}, "", "g.toml:4:1", ""};
  e = error_of(g, axes({"mine"}, {"size_mix"}, {1}));
  EXPECT_NE(e.find("g.toml:4:1"), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  g.allocator_defs["mine"] = AllocatorDef{"mine", "jemalloc", "", {{"PATH", "/x"}}, "", "g.toml:4:1", ""};
  EXPECT_NE(error_of(g, axes({"mine"}, {"size_mix"}, {1})).find("not an allocator setting"), std::string::npos);
  g.allocator_defs["mine"] = AllocatorDef{"mine", "nosuch", "", {}, "", "g.toml:4:1", ""};
  EXPECT_NE(error_of(g, axes({"mine"}, {"size_mix"}, {1})).find("unknown backend 'nosuch'"), std::string::npos);
}

TEST(Plan, DefaultsCoverEveryNonDiagnosticWorkload) {
  Overrides o;
  o.allocators = std::vector<std::string>{"glibc"};
  Plan p = build_plan(std::nullopt, variants(), o);
  for (const auto& c : p.cells) EXPECT_NE(c.workload, "fault_inject");
  EXPECT_EQ(p.settings.reps, 3);
  EXPECT_EQ(p.cells.size() % 3, 0u);
}

TEST(Plan, PinPolicyFromFlagsAndOldFoldersStillResume) {
  Overrides o;
  o.allocators = std::vector<std::string>{"glibc"};
  o.workloads = std::vector<std::string>{"size_mix"};
  Plan compact = build_plan(std::nullopt, variants(), o);
  EXPECT_EQ(compact.settings.pin.pin_text(), "compact");
  EXPECT_EQ(compact.as_json()["pin"], "compact");
  EXPECT_TRUE(compact.as_json()["nodes"].is_null());
  // A folder recorded before the policies says pin_threads: true is compact, false is none.
  nlohmann::json old = compact.as_json();
  old.erase("pin");
  old.erase("nodes");
  old["pin_threads"] = true;
  EXPECT_EQ(matrix_differences(old, compact.as_json()), "");
  o.pin = "none";
  Plan none = build_plan(std::nullopt, variants(), o);
  EXPECT_NE(matrix_differences(old, none.as_json()).find("pin: \"compact\" recorded, \"none\" now"), std::string::npos)
      << matrix_differences(old, none.as_json());
  o.pin = "scatter";
  o.nodes = "0";
  EXPECT_EQ(build_plan(std::nullopt, variants(), o).as_json()["nodes"], "0");
  o.pin = "none";
  EXPECT_THROW(build_plan(std::nullopt, variants(), o), ConfigError) << "pin none with nodes";
  o.pin = "x-y";
  o.nodes.reset();
  EXPECT_THROW(build_plan(std::nullopt, variants(), o), ConfigError);
}

TEST(Plan, ParametersAreReadOnceIntoTheirTypeAndSpelledOneWay) {
  Overrides o = axes({"glibc"}, {"hash_build"}, {1});
  const std::string key = build_plan(std::nullopt, variants(), o).cells[0].key();
  o.sets = {"hash_build.payload_max=16384"};  // the quick default, 16K, in bytes
  Plan p = build_plan(std::nullopt, variants(), o);
  EXPECT_EQ(p.cells[0].params.at("payload_max"), "16K");
  EXPECT_EQ(p.cells[0].key(), key);
  o.sets = {"hash_build.payload_fraction=0.1234567", "hash_build.keys=+007"};
  p = build_plan(std::nullopt, variants(), o);
  EXPECT_EQ(p.cells[0].params.at("payload_fraction"), "0.1234567");
  EXPECT_EQ(p.cells[0].params.at("keys"), "7");
}

TEST(Settings, EveryRowIsAFileKeyAFlagAndAFieldOfTheRecordedMatrix) {
  for (const auto& row : setting_rows()) {
    if (!(row.scope & kMatrixKey)) continue;
    EXPECT_NE(std::string(row.flag), "") << row.key << " has a matrix key but no flag";
    Plan p = build_plan(std::nullopt, variants(), axes({"glibc"}, {"size_mix"}, {1}));
    EXPECT_TRUE(p.as_json().contains(row.key)) << row.key;
  }
  // A recorded matrix reads back as the settings it was recorded from.
  Overrides o = axes({"glibc"}, {"size_mix"}, {1});
  o.sample_ms = 7;
  o.max_timeline_points = 99;
  o.node_figures = false;
  o.pin = "scatter";
  const Plan p = build_plan(std::nullopt, variants(), o);
  const Settings back = recorded_settings(p.as_json(), "meta.json matrix");
  EXPECT_EQ(settings_json(back, kMatrixKey), settings_json(p.settings, kMatrixKey));
  EXPECT_EQ(matrix_differences(p.as_json(), p.as_json()), "");
}

TEST(Settings, ACellDescriptionCarriesEverySettingACellUses) {
  // What the Slurm executor writes for each task and `allocmark cell` reads back: the cell's own
  // settings (keep_data, data_root: a Slurm task keeps a database when asked, under the folder's
  // data/) as the run chose them, not their defaults.
  Settings s;
  s.keep_data = true;
  s.data_root = "/results/run1/data";
  s.timeout_s = 42;
  s.sample_ms = 7;
  s.latency_every = 16;
  s.node_figures = false;
  const nlohmann::json described = settings_json(s, kCellSpec);
  for (const auto& row : setting_rows()) {
    if (row.scope & kCellSpec) {
      EXPECT_TRUE(described.contains(row.key)) << row.key;
    }
  }
  const Settings back = settings_from_json(described, kCellSpec, "cell.json: settings");
  EXPECT_TRUE(back.keep_data);
  EXPECT_EQ(back.data_root, "/results/run1/data");
  EXPECT_EQ(settings_json(back, kCellSpec), described);
}

TEST(Settings, OneMessageFormNamesWhereAndWhatIsExpected) {
  const SettingRow& sample = *find_setting("sample_ms");
  try {
    setting_from_flag(sample, "0");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--sample-ms: must be in 1..60000 (found '0')");
  }
  try {
    check_setting(sample, "10", "m.toml:3:1: 'sample_ms'");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "m.toml:3:1: 'sample_ms' must be an integer in 1..60000 (found \"10\")");
  }
  // A described cell without latency_every times as a run does: one default.
  EXPECT_EQ(settings_from_json(nlohmann::json::object(), kCellSpec, "spec").latency_every, kDefaultLatencyEvery);
  // A matrix recorded before call timing existed timed nothing.
  EXPECT_EQ(recorded_settings(nlohmann::json::object(), "meta.json matrix").latency_every, 0);
}

// A workload with threads of its own (replay: the trace's) takes no threads axis: one cell per
// allocator and repetition, with a note when the axis named other counts; a trace that is missing
// or not a trace is a plan error naming the file (exit 2, nothing run).
TEST(Plan, ReplayCellsRunTheTracesThreadsAndAMissingTraceIsAPlanError) {
  namespace tr = allocmark::trace;
  const std::string path = "/tmp/allocmark_plan_test_" + std::to_string(getpid()) + ".trace";
  tr::testing::write_one_block_per_thread(path, 3);

  Overrides o = axes({"glibc", "jemalloc:bg"}, {"size_mix", "replay"}, {1, 2});
  o.reps = 2;
  o.sets = {"replay.trace=" + path};
  Plan p = build_plan(std::nullopt, variants(), o);
  std::vector<std::string> replays;
  for (const auto& c : p.cells)
    if (c.workload == "replay") replays.push_back(c.label());
  EXPECT_EQ(replays, (std::vector<std::string>{"glibc replay t3 r1", "jemalloc:bg replay t3 r1", "glibc replay t3 r2",
                                               "jemalloc:bg replay t3 r2"}));
  EXPECT_EQ(p.cells.size(), 2u * (2u * 2u + 2u));
  bool noted = false;
  for (const auto& n : p.notes) noted |= n.find("replay runs its own 3 threads") != std::string::npos;
  EXPECT_TRUE(noted);

  o.threads = std::vector<int>{3};
  p = build_plan(std::nullopt, variants(), o);
  for (const auto& n : p.notes) EXPECT_EQ(n.find("replay runs its own"), std::string::npos) << n;

  // Default matrices leave replay out: it has no trace to run.
  Overrides d;
  d.allocators = std::vector<std::string>{"glibc"};
  for (const auto& c : build_plan(std::nullopt, variants(), d).cells) EXPECT_NE(c.workload, "replay");

  std::remove(path.c_str());
  o.reps = 1;
  EXPECT_NE(error_of(std::nullopt, o).find("replay.trace: " + path + " does not exist"), std::string::npos) << error_of(std::nullopt, o);
  o.sets.clear();
  EXPECT_EQ(error_of(std::nullopt, o), "workload replay: replay.trace: name a trace file (allocmark trace record)");
  std::ofstream(path) << "AMTRACE but not really";
  o.sets = {"replay.trace=" + path};
  const std::string corrupt = error_of(std::nullopt, o);
  EXPECT_NE(corrupt.find(path), std::string::npos) << corrupt;
  EXPECT_NE(corrupt.find("file offset"), std::string::npos) << corrupt;
  std::remove(path.c_str());
}

// [traces.NAME]: each trace is a parameter set of the replay workload (file relative to the matrix
// file, its name as `name`), run alone unless the matrix names workloads; --set replay.* reaches
// every trace; a table without a file, or with a bad parameter, is refused naming where it is.
TEST(Plan, TracesInAMatrixAreReplayCellsOfTheirOwn) {
  namespace tr = allocmark::trace;
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / ("plan_traces_" + std::to_string(getpid()))).lexically_normal().string();
  std::filesystem::create_directories(dir);
  tr::testing::write_one_block_per_thread(dir + "/a.trace", 1);
  tr::testing::write_one_block_per_thread(dir + "/b.trace", 2);
  auto matrix = [&](const std::string& text) {
    std::ofstream(dir + "/m.toml") << text;
    return load_matrix_file(dir + "/m.toml");
  };
  MatrixFile f = matrix(R"([matrix]
allocators = ["glibc", "jemalloc"]
reps = 1
[traces.svc-a]
file = "a.trace"
[traces.svc-b]
file = "b.trace"
speed = "recorded"
)");
  Overrides o;
  o.sets = {"replay.touch=none"};
  Plan p = build_plan(f, variants(), o);
  ASSERT_EQ(p.cells.size(), 4u);  // nothing but the traces: a matrix naming traces runs only them
  std::map<std::string, int> threads_of;
  for (const auto& c : p.cells) {
    EXPECT_EQ(c.workload, "replay");
    EXPECT_EQ(c.params.at("touch"), "none");
    threads_of[c.params.at("name")] = c.threads;
    EXPECT_EQ(c.params.at("trace"), dir + (c.params.at("name") == "svc-a" ? "/a.trace" : "/b.trace"));
    EXPECT_EQ(c.params.at("speed"), c.params.at("name") == "svc-b" ? "recorded" : "fast");
  }
  EXPECT_EQ(threads_of, (std::map<std::string, int>{{"svc-a", 1}, {"svc-b", 2}}));
  EXPECT_NE(p.cells[0].key(), p.cells[2].key());

  auto refused = [&](const std::string& text) {
    try {
      build_plan(matrix(text), variants(), Overrides{});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused("[traces.x]\nspeed = \"fast\"\n").find("m.toml:1:1: trace 'x' needs file = "), std::string::npos);
  const std::string bad_speed = refused("[traces.x]\nfile = \"a.trace\"\nspeed = \"warp\"\n");
  EXPECT_NE(bad_speed.find("trace x: replay.speed: 'warp' is not fast or recorded"), std::string::npos) << bad_speed;
  const std::string missing = refused("[traces.x]\nfile = \"gone.trace\"\n");
  EXPECT_NE(missing.find(dir + "/gone.trace"), std::string::npos) << missing;
  EXPECT_NE(refused("[traces.x]\nfile = \"a.trace\"\nlanes = 3\n").find("lanes"), std::string::npos);
  EXPECT_NE(refused("[traces.\"a b\"]\nfile = \"a.trace\"\n").find("trace name 'a b'"), std::string::npos);

  // A replay cell is its trace's contents (issue 41): the SHA-256 pinned at plan time is in the key
  // and in the recorded matrix, where every trace is an entry of its own; b.trace replaced at its
  // path is another matrix, named by the trace that changed.
  for (const auto& c : p.cells) EXPECT_EQ(c.params.at("trace_sha256").size(), 64u);
  EXPECT_EQ(p.as_json()["workloads"].size(), 2u);
  const std::string before_key = p.cells[1].params.at("name") == "svc-b" ? p.cells[1].key() : p.cells[3].key();
  tr::testing::write_one_block_per_thread(dir + "/b.trace", 3);
  Plan replaced = build_plan(f, variants(), o);
  const std::string after_key = replaced.cells[1].params.at("name") == "svc-b" ? replaced.cells[1].key() : replaced.cells[3].key();
  EXPECT_NE(before_key, after_key);
  const std::string differs = matrix_differences(p.as_json(), replaced.as_json());
  EXPECT_NE(differs.find("replay:svc-b trace_sha256"), std::string::npos) << differs;
  EXPECT_EQ(differs.find("svc-a"), std::string::npos) << differs;
  std::filesystem::remove_all(dir);
}

// Issue 43: NAME@VERSION[:VARIANT] runs a release built from source with the variant's settings,
// and composes with the thp axis (one grammar: jemalloc@5.2.1:bg@thp=never). The release here is a
// hand-made cache entry holding Debian's real libjemalloc (building one is tests/build_test.py's).
class PlanReleases : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    namespace rel = allocmark::allocators::releases;
    root_ = fs::temp_directory_path() / ("plan_releases-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "sources");
    ::setenv("ALLOCMARK_CACHE", (root_ / "cache").c_str(), 1);
    ::setenv("ALLOCMARK_SOURCES", (root_ / "sources").c_str(), 1);
    const rel::Recipe recipe = rel::load_recipe("jemalloc");
    const std::string source_sha(64, 'a');
    entry_ = root_ / "cache/builds" / ("jemalloc-5.2.1-" + rel::cache_key(source_sha, recipe.sha256, rel::compiler_identity()));
    fs::create_directories(entry_);
    fs::copy_file("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", entry_ / "libjemalloc.so.2");
    nlohmann::json j{{"release", {{"family", "jemalloc"}, {"version", "5.2.1"}}}, {"backend", "jemalloc"},
                     {"library", (entry_ / "libjemalloc.so.2").string()}, {"source_sha256", source_sha},
                     {"recipe_sha256", recipe.sha256}, {"compiler", rel::compiler_identity()},
                     {"log", (entry_ / "build.log").string()}};
    std::ofstream(entry_ / "build.json") << j.dump();
  }
  void TearDown() override {
    std::filesystem::remove_all(root_);
    ::unsetenv("ALLOCMARK_CACHE");
    ::unsetenv("ALLOCMARK_SOURCES");
  }
  std::filesystem::path root_, entry_;
};

TEST_F(PlanReleases, AReleaseComposesWithAVariantAndTheThpAxis) {
  Overrides o = axes({"jemalloc@5.2.1:bg", "jemalloc"}, {"size_mix"}, {1});
  o.reps = 1;
  o.thp = std::vector<std::string>{"never"};
  Plan p = build_plan(std::nullopt, variants(), o);
  ASSERT_EQ(p.cells.size(), 2u);
  const auto& a = p.cells[0].allocator;
  EXPECT_EQ(a.name, "jemalloc@5.2.1:bg@thp=never");
  EXPECT_EQ(a.backend, "jemalloc");
  EXPECT_EQ(a.library, (entry_ / "libjemalloc.so.2").string());
  EXPECT_EQ(a.env.at("MALLOC_CONF"), "background_thread:true");  // the variant's settings
  EXPECT_EQ(a.thp, "never");
  EXPECT_EQ(a.release.at("name"), "jemalloc@5.2.1");
  EXPECT_EQ(a.release.at("version"), "5.2.1");
  EXPECT_EQ(a.release.at("source_sha256"), std::string(64, 'a'));
  EXPECT_EQ(a.release.at("build"), entry_.string());
  EXPECT_EQ(p.cells[1].allocator.name, "jemalloc@thp=never");
  EXPECT_TRUE(p.cells[1].allocator.release.empty());
  EXPECT_NE(p.cells[0].key(), p.cells[1].key());
  // The record carries the release; a cell of the system's library carries none (records as before).
  EXPECT_EQ(allocmark::record::record_cell(p.cells[0])["release"]["version"], "5.2.1");
  EXPECT_FALSE(allocmark::record::record_cell(p.cells[1]).contains("release"));
}

TEST_F(PlanReleases, ReleasesOfAFamilyRunInVersionOrderWhereverTheMatrixNamesThem) {
  namespace fs = std::filesystem;
  // A second release beside 5.2.1: 5.10.0 sorts after it by its numbers, not its letters.
  const fs::path other = fs::path(entry_.string().replace(entry_.string().find("5.2.1"), 5, "5.10.0"));
  fs::create_directories(other);
  fs::copy_file(entry_ / "libjemalloc.so.2", other / "libjemalloc.so.2");
  std::string text;
  {
    std::ifstream in(entry_ / "build.json");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  nlohmann::json j = nlohmann::json::parse(text);
  j["release"]["version"] = "5.10.0";
  j["library"] = (other / "libjemalloc.so.2").string();
  std::ofstream(other / "build.json") << j.dump();
  Overrides o = axes({"jemalloc@5.10.0", "glibc", "jemalloc@5.2.1:bg", "jemalloc@5.2.1"}, {"size_mix"}, {1});
  o.reps = 1;
  Plan p = build_plan(std::nullopt, variants(), o);
  std::vector<std::string> names;
  for (const auto& a : p.allocators) names.push_back(a.name);
  EXPECT_EQ(names, (std::vector<std::string>{"jemalloc@5.2.1:bg", "glibc", "jemalloc@5.2.1", "jemalloc@5.10.0"}));
}

TEST_F(PlanReleases, ReleaseNamesThatCannotRunAreRefusedNamingWhy) {
  auto err = [&](std::vector<std::string> a, ReleasePolicy policy = {}) {
    Overrides o = axes(a, {"size_mix"}, {1});
    o.releases = policy;
    return error_of(std::nullopt, o);
  };
  EXPECT_NE(err({"jemalloc@5.2.0"}).find("jemalloc@5.2.0 is not built yet: `allocmark build jemalloc@5.2.0` builds it"),
            std::string::npos);
  ReleasePolicy no_build;
  no_build.refusal = ", or drop --no-build";
  EXPECT_NE(err({"jemalloc@5.2.0"}, no_build).find("or drop --no-build"), std::string::npos);
  EXPECT_NE(err({"jemalloc@"}).find("no version after '@'"), std::string::npos);
  EXPECT_NE(err({"glibc@2.36"}).find("glibc has no releases to build (recipes: jemalloc"), std::string::npos);
  EXPECT_NE(err({"jemalloc@latest"}).find("jemalloc@latest"), std::string::npos);
  EXPECT_NE(err({"snmalloc"}).find("snmalloc has no system library; name a release built from its source"),
            std::string::npos);
  EXPECT_NE(err({"tcmalloc@2.18.1:minimal"}).find("names its own library, and a release (@2.18.1) would replace it"),
            std::string::npos);
  EXPECT_NE(err({"nosuch@5.2.1"}).find("unknown allocator 'nosuch'"), std::string::npos);
  // A release that cannot be built (no source): the build's own error, naming where it looked.
  std::ostringstream progress;
  ReleasePolicy build{true, &progress, ""};
  const std::string e = err({"jemalloc@5.2.0"}, build);
  EXPECT_NE(e.find("jemalloc-5.2.0.tar.gz"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(root_ / "cache/builds/jemalloc-5.2.0")) << "nothing registered";
}

TEST_F(PlanReleases, DefaultMatricesLeaveOutBackendsThatOnlyRunFromSource) {
  Overrides o;
  o.workloads = std::vector<std::string>{"size_mix"};
  o.threads = std::vector<int>{1};
  Plan p = build_plan(std::nullopt, variants(), o);
  for (const auto& a : p.allocators) EXPECT_TRUE(a.backend != "snmalloc" && a.backend != "rpmalloc") << a.name;
  for (const auto& n : p.notes) EXPECT_EQ(n.find("snmalloc"), std::string::npos) << n;
}
