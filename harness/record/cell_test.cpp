// The cell codec (cell.h): every field survives the description, a bad description names its
// field, and the key and the record's fields are the ones results folders already hold.
#include "harness/record/cell.h"

#include <gtest/gtest.h>

namespace allocmark::record {
namespace {

using nlohmann::json;

const std::map<std::string, std::string> kSizeMixParams{{"live_mib", "64"}, {"ops", "20000"}, {"remote_free", "0.25"},
                                                        {"seed", "1"},       {"sizes", "16-256:60,256-4K:30,4K-64K:9,64K-1M:1"},
                                                        {"touch", "1"}};

// jemalloc:bg on the thp axis, as `run -a jemalloc:bg --thp never -w size_mix --set size_mix.ops=20000` plans it.
Cell jemalloc_cell() {
  Cell c;
  c.allocator.name = "jemalloc:bg@thp=never";
  c.allocator.backend = "jemalloc";
  c.allocator.library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  c.allocator.env = {{"MALLOC_CONF", "background_thread:true"}};
  c.allocator.description = "jemalloc with background threads";
  c.allocator.thp = "never";
  c.workload = "size_mix";
  c.threads = 2;
  c.rep = 1;
  c.params = kSizeMixParams;
  return c;
}

std::string error_of(const json& description) {
  try {
    cell_from_description(description);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CellCodec, EveryFieldSurvivesTheDescription) {
  const Cell c = jemalloc_cell();
  const Cell back = cell_from_description(cell_description(c));
  EXPECT_EQ(back.allocator.name, c.allocator.name);
  EXPECT_EQ(back.allocator.backend, c.allocator.backend);
  EXPECT_EQ(back.allocator.library, c.allocator.library);
  EXPECT_EQ(back.allocator.env, c.allocator.env);
  EXPECT_EQ(back.allocator.description, c.allocator.description);
  EXPECT_EQ(back.allocator.thp, c.allocator.thp);
  EXPECT_EQ(back.workload, c.workload);
  EXPECT_EQ(back.threads, c.threads);
  EXPECT_EQ(back.rep, c.rep);
  EXPECT_EQ(back.params, c.params);
  EXPECT_EQ(back.key(), c.key());
}

TEST(CellCodec, TheDescriptionIsTodays) {
  // What Slurm jobs already submitted read (DIR/slurm/sN/cells/I.json's "cell").
  const json expected = json::parse(R"({
    "allocator": {"backend": "jemalloc", "description": "jemalloc with background threads",
                  "env": {"MALLOC_CONF": "background_thread:true"},
                  "library": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "name": "jemalloc:bg@thp=never", "thp": "never"},
    "params": {"live_mib": "64", "ops": "20000", "remote_free": "0.25", "seed": "1",
               "sizes": "16-256:60,256-4K:30,4K-64K:9,64K-1M:1", "touch": "1"},
    "rep": 1, "threads": 2, "workload": "size_mix"})");
  EXPECT_EQ(cell_description(jemalloc_cell()), expected);
}

TEST(CellCodec, OptionalFieldsMayBeAbsentOrNull) {
  json d = cell_description(jemalloc_cell());
  d["allocator"].erase("library");
  d["allocator"].erase("env");
  d["allocator"]["thp"] = nullptr;
  const Cell back = cell_from_description(d);
  EXPECT_EQ(back.allocator.library, "");
  EXPECT_TRUE(back.allocator.env.empty());
  EXPECT_EQ(back.allocator.thp, "");
}

TEST(CellCodec, AMissingFieldIsAConfigErrorNamingIt) {
  for (const char* key : {"workload", "threads", "rep", "params", "allocator"}) {
    json d = cell_description(jemalloc_cell());
    d.erase(key);
    EXPECT_EQ(error_of(d), std::string("cell.") + key + ": missing");
  }
  for (const char* key : {"name", "backend"}) {
    json d = cell_description(jemalloc_cell());
    d["allocator"].erase(key);
    EXPECT_EQ(error_of(d), std::string("cell.allocator.") + key + ": missing");
  }
  EXPECT_EQ(error_of(json::array()), "cell: expected an object, found array");
}

TEST(CellCodec, AMistypedFieldIsAConfigErrorNamingIt) {
  json d = cell_description(jemalloc_cell());
  d["threads"] = "2";
  EXPECT_EQ(error_of(d), "cell.threads: expected an integer of at least 1, found \"2\"");
  d = cell_description(jemalloc_cell());
  d["rep"] = 0;
  EXPECT_EQ(error_of(d), "cell.rep: expected an integer of at least 1, found 0");
  d = cell_description(jemalloc_cell());
  d["allocator"]["library"] = 7;
  EXPECT_EQ(error_of(d), "cell.allocator.library: expected a string, found 7");
  d = cell_description(jemalloc_cell());
  d["params"]["ops"] = 20000;
  EXPECT_EQ(error_of(d), "cell.params.ops: expected a string, found 20000");
  d = cell_description(jemalloc_cell());
  d["allocator"]["env"] = "MALLOC_CONF=x";
  EXPECT_EQ(error_of(d), "cell.allocator.env: expected an object of strings, found \"MALLOC_CONF=x\"");
  d = cell_description(jemalloc_cell());
  d["allocator"]["thp"] = "sometimes";
  EXPECT_EQ(error_of(d), "cell.allocator.thp: 'sometimes' is not a transparent huge page mode (valid: never, madvise, always)");
  d = cell_description(jemalloc_cell());
  d["allocator"] = "jemalloc";
  EXPECT_EQ(error_of(d), "cell.allocator: expected an object, found string");
}

TEST(CellCodec, TheKeyIsTheOneResultsFoldersHold) {
  // Keys written by the code before the codec (results.jsonl of `allocmark run` at 91f8835).
  Cell c = jemalloc_cell();
  c.threads = 1;
  EXPECT_EQ(c.key(), "jemalloc:bg@thp=never/size_mix/t1/r1/c2914f42f4");
  c.allocator.name = "jemalloc:bg";
  c.allocator.thp = "";
  c.rep = 2;
  EXPECT_EQ(c.key(), "jemalloc:bg/size_mix/t1/r2/27b7c3c88b");
  Cell glibc;
  glibc.allocator = {"glibc", "glibc", "", {}, "the C library", false, ""};
  glibc.workload = "size_mix";
  glibc.rep = 1;
  glibc.params = kSizeMixParams;
  EXPECT_EQ(glibc.key(), "glibc/size_mix/t1/r1/ca55fbc2f7");
  glibc.allocator.description = "another description";  // not part of what was run
  EXPECT_EQ(glibc.key(), "glibc/size_mix/t1/r1/ca55fbc2f7");
  EXPECT_EQ(glibc.label(), "glibc size_mix t1 r1");
}

TEST(CellCodec, TheRecordFieldsAreTodays) {
  const json expected = json::parse(R"({
    "allocator": "jemalloc:bg@thp=never", "backend": "jemalloc", "env": {"MALLOC_CONF": "background_thread:true"},
    "params": {"live_mib": "64", "ops": "20000", "remote_free": "0.25", "seed": "1",
               "sizes": "16-256:60,256-4K:30,4K-64K:9,64K-1M:1", "touch": "1"},
    "preload": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "rep": 1, "thp": {"how": "prctl", "mode": "never"},
    "threads": 2, "workload": "size_mix"})");
  EXPECT_EQ(record_cell(jemalloc_cell()), expected);
  Cell off_axis = jemalloc_cell();
  off_axis.allocator.thp = "";
  EXPECT_FALSE(record_cell(off_axis).contains("thp"));  // it ran under meta.json's machine.thp_enabled
}

TEST(CellCodec, ARecordGivesBackItsCellAndKey) {
  json record = record_cell(jemalloc_cell());
  EXPECT_EQ(cell_of_record(record).key(), jemalloc_cell().key());
  record.erase("rep");
  record["params"]["ops"] = 20000;  // written by hand
  const Cell c = cell_of_record(record);
  EXPECT_EQ(c.rep, 0);
  EXPECT_EQ(c.params.at("ops"), "20000");
}

TEST(CellCodec, TheWorkerAndMetaEntriesAreTodays) {
  const Cell c = jemalloc_cell();
  EXPECT_EQ(worker_cell(c), json::parse(R"({"allocator": "jemalloc:bg@thp=never", "backend": "jemalloc",
    "library": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "workload": "size_mix", "threads": 2, "rep": 1,
    "params": {"live_mib": "64", "ops": "20000", "remote_free": "0.25", "seed": "1",
               "sizes": "16-256:60,256-4K:30,4K-64K:9,64K-1M:1", "touch": "1"}})"));
  EXPECT_EQ(meta_allocator(c.allocator), json::parse(R"({"name": "jemalloc:bg@thp=never", "backend": "jemalloc",
    "library": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "env": {"MALLOC_CONF": "background_thread:true"}, "thp": "never"})"));
  EXPECT_EQ(meta_workload(c), (json{{"name", "size_mix"}, {"params", c.params}}));
  ResolvedAllocator machine_thp = c.allocator;
  machine_thp.thp = "";
  EXPECT_FALSE(meta_allocator(machine_thp).contains("thp"));
}

TEST(CellCodec, AReaderFindsEachFieldUnderItsRecordKey) {
  const json record = record_cell(jemalloc_cell());
  EXPECT_EQ(record.at(record_key(CellField::library)), "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  EXPECT_EQ(record.at(record_key(CellField::allocator)), "jemalloc:bg@thp=never");
  EXPECT_EQ(record_key(CellField::description), nullptr);  // not recorded
  EXPECT_EQ(thp_how_in(record), "prctl");
  EXPECT_EQ(thp_how_in(record_cell(Cell{})), "");
}

TEST(CellCodec, TheWorkerReadsBackWhatItIsTold) {
  const Cell back = cell_of_worker(worker_cell(jemalloc_cell()));
  EXPECT_EQ(back.allocator.backend, "jemalloc");
  EXPECT_EQ(back.allocator.library, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  EXPECT_EQ(back.workload, "size_mix");
  EXPECT_EQ(back.threads, 2);
  EXPECT_EQ(back.params, kSizeMixParams);
  // A probe names the allocator only.
  const Cell probe = cell_of_worker(worker_cell(Cell{jemalloc_cell().allocator}));
  EXPECT_EQ(probe.allocator.backend, "jemalloc");
  EXPECT_TRUE(probe.params.empty());
}

TEST(CellCodec, TheGatesSetupIsTodays) {
  // GateCell::setups and a baseline's allocator_config + under_test.{env,params} hold these four.
  const json expected = json::parse(R"({"backend": "jemalloc", "library": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "env": {"MALLOC_CONF": "background_thread:true"},
    "params": {"live_mib": "64", "ops": "20000", "remote_free": "0.25", "seed": "1",
               "sizes": "16-256:60,256-4K:30,4K-64K:9,64K-1M:1", "touch": "1"}})");
  EXPECT_EQ(cell_setup(jemalloc_cell()), expected);
  EXPECT_EQ(texts_of(json::parse(R"({"ops": 20000, "seed": "1"})")),
            (std::map<std::string, std::string>{{"ops", "20000"}, {"seed", "1"}}));
  EXPECT_TRUE(texts_of(json()).empty());
}

TEST(CellCodec, MetaEntriesAndSetupsReadBack) {
  const Cell c = jemalloc_cell();
  const ResolvedAllocator a = allocator_of_meta(meta_allocator(c.allocator));
  EXPECT_EQ(meta_allocator(a), meta_allocator(c.allocator));  // name, backend, library, env, thp
  EXPECT_EQ(a.name, "jemalloc:bg@thp=never");
  EXPECT_EQ(a.thp, "never");
  const Cell w = workload_of_meta(meta_workload(c));
  EXPECT_EQ(w.workload, "size_mix");  // "name" of a workload entry: never the allocator's name
  EXPECT_EQ(w.allocator.name, "");
  EXPECT_EQ(w.params, kSizeMixParams);
  EXPECT_EQ(meta_key(CellField::workload), std::string("name"));
  EXPECT_EQ(meta_key(CellField::threads), nullptr);
  EXPECT_EQ(cell_setup(cell_of_setup(cell_setup(c))), cell_setup(c));
  EXPECT_EQ(allocator_of_meta(json("not an entry")).name, "");
}

}  // namespace
}  // namespace allocmark::record
