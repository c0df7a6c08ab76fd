// insert_phases in-process: live bytes match the workload's own bookkeeping after every phase and
// go back to nothing, phases come in the benchmark's order, l.x really sorts in several chunks,
// and one seed gives one operation sequence.
#include "workloads/insert_phases.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include "workloads/test_support.h"

using namespace allocmark::workloads;

// Named after the file: its helpers and tests share a unity batch with other files (cmake/allocmark_build_speed.cmake).
namespace insert_phases_test {
namespace {
// Small enough for a test, shaped like the presets: l.x needs several sort chunks per index, the
// cache is far smaller than the data, memtables switch many times. Queries are counted, not
// timed, and the rate-limited writer is off, so every phase is deterministic.
Params small_params(int64_t seed = 1, std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> o{{"rows", "60000"},       {"rows_i1", "20000"},   {"write_buffer", "256K"},
                                       {"merge_buf", "256K"},   {"combine_read", "256K"}, {"block_cache", "1M"},
                                       {"q_queries", "2000"},   {"q_seconds", "0"},     {"q_rate_scale", "0"},
                                       {"idle_s", "0"},         {"seed", std::to_string(seed)}};
  for (auto& [k, v] : extra) o[k] = v;
  return test_support::preset("insert_phases", "quick", o);
}

struct PhasesRun {
  std::vector<test_support::PhaseOutcome> phases;
  std::vector<int64_t> held;  // the workload's own figure after each phase
};

// Reads the workload's own bookkeeping after each phase.
PhasesRun run_all(InsertPhases& w, LiveBytes& live, int threads) {
  PhasesRun r;
  r.phases = test_support::run_all_phases(w, live, threads, [&](std::size_t) { r.held.push_back(w.held_bytes()); });
  return r;
}
}  // namespace

TEST(InsertPhases, PhasesInDocumentedOrder) {
  InsertPhases w(small_params(), 1);
  EXPECT_EQ(w.phases(), (std::vector<std::string>{"l.i0", "l.x", "idle.x", "l.i1", "q100", "q500", "q1000", "idle.end"}));
  EXPECT_EQ(find_workload("insert_phases")->phases, w.phases());
}

TEST(InsertPhases, LiveBytesMatchBookkeepingAfterEveryPhase) {
  for (int threads : {1, 2, 3}) {
    InsertPhases w(small_params(), threads);
    LiveBytes live(threads);
    PhasesRun r = run_all(w, live, threads);
    for (std::size_t ph = 0; ph < r.phases.size(); ++ph)
      EXPECT_EQ(r.phases[ph].live_after, r.held[ph]) << "threads " << threads << " phase " << w.phases()[ph];
    // The load flushes every immutable memtable before it ends: only the active one is left (up to
    // write_buffer plus the block that passed it), and no cached block.
    EXPECT_GT(r.held[InsertPhases::kLoad], 0);
    EXPECT_LE(r.held[InsertPhases::kLoad], (256 << 10) + (256 << 10) / 8);
    // l.x holds two sort buffers per index at once (plus set nodes and cached blocks) and frees them.
    EXPECT_GT(r.phases[InsertPhases::kIndex].peak_live, 3 * 2 * (256 << 10));
    EXPECT_LT(r.held[InsertPhases::kIndex], r.phases[InsertPhases::kIndex].peak_live);
    // Idle phases neither allocate nor free.
    EXPECT_EQ(r.phases[InsertPhases::kIdleX].live_after, r.phases[InsertPhases::kIndex].live_after);
    EXPECT_EQ(r.phases[InsertPhases::kIdleEnd].live_after, r.phases[InsertPhases::kQ1000].live_after);
    EXPECT_EQ(r.phases[InsertPhases::kIdleX].ops, 0u);
    w.teardown();
    EXPECT_EQ(w.held_bytes(), 0);
  }
}

TEST(InsertPhases, HeapReturnsToWhereItStarted) {
  // A second accounting, independent of the workload's own: glibc's in-use bytes.
  struct mallinfo2 before = mallinfo2();
  {
    InsertPhases w(small_params(), 2);
    LiveBytes live(2);
    run_all(w, live, 2);
    w.teardown();
  }
  struct mallinfo2 after = mallinfo2();
  int64_t diff = static_cast<int64_t>(after.uordblks + after.hblkhd) - static_cast<int64_t>(before.uordblks + before.hblkhd);
  EXPECT_LT(std::llabs(diff), 64 << 10);
}

TEST(InsertPhases, PhasesDoWhatTheBenchmarkDoes) {
  InsertPhases w(small_params(), 2);
  LiveBytes live(2);
  PhasesRun r = run_all(w, live, 2);
  using P = InsertPhases;
  EXPECT_EQ(w.counter(P::kLoad, kRowsInserted), 60000u);
  EXPECT_GT(w.counter(P::kLoad, kFlushes), 5u);  // done by thread 0, the flush thread
  EXPECT_EQ(w.counter(P::kLoad, kCacheMisses), 0u);
  // Each index sorts in several chunks, and merges them with combine_read / chunks per chunk.
  uint64_t chunks = w.counter(P::kIndex, kSortChunks);
  EXPECT_GE(chunks, 3u * 5);
  EXPECT_EQ(w.counter(P::kIndex, kMergedRecords), 3u * 60000);
  EXPECT_LE(w.counter(P::kIndex, kChunkBufferBytes), (256u << 10) / 5);
  EXPECT_GT(w.counter(P::kIndex, kCacheEvictions), 0u);
  EXPECT_EQ(w.counter(P::kInsertDelete, kRowsInserted), 20000u);
  EXPECT_EQ(w.counter(P::kInsertDelete, kRowsDeleted), 20000u);
  EXPECT_EQ(w.counter(P::kQ100, kQueries), 2000u);
  EXPECT_GT(w.counter(P::kQ100, kCacheMisses), w.counter(P::kQ100, kCacheHits));
  EXPECT_EQ(r.phases[P::kQ100].ops, 2000u);
}

TEST(InsertPhases, EverySecondaryIndexHasItsOwnMemtablesFromLi1On) {
  // As RocksDB: one column family per secondary index, each with its own active memtable. With one
  // thread the client flushes inline and every family keeps its active memtable, so after l.i1 each
  // of the 4 families holds at least one arena block (write_buffer / 8), where one shared set held one.
  const int64_t write_buffer = 256 << 10, arena_block = write_buffer / 8;
  for (int threads : {1, 2}) {
    InsertPhases w(small_params(), threads);
    LiveBytes live(threads);
    std::vector<int64_t> memtables;
    std::vector<std::vector<int64_t>> per_family;
    test_support::run_all_phases(w, live, threads, [&](std::size_t) {
      memtables.push_back(w.memtable_bytes());
      per_family.emplace_back();
      for (std::size_t f = 0; f < w.column_families(); ++f) per_family.back().push_back(w.memtable_bytes(f));
    });
    ASSERT_EQ(w.column_families(), 4u);
    // l.i0 writes the primary key only, and l.x bulk-loads the indexes without memtables.
    EXPECT_LE(memtables[InsertPhases::kLoad], 4 * write_buffer) << threads;
    EXPECT_EQ(memtables[InsertPhases::kIndex], memtables[InsertPhases::kLoad]) << threads;
    for (std::size_t f = 1; f < 4; ++f) EXPECT_EQ(per_family[InsertPhases::kIndex][f], 0) << threads << " family " << f;
    if (threads == 1) {
      for (std::size_t f = 0; f < 4; ++f) EXPECT_GE(per_family[InsertPhases::kInsertDelete][f], arena_block) << "family " << f;
      EXPECT_GE(memtables[InsertPhases::kInsertDelete], 4 * arena_block);
    }
    // Each family may hold max_write_buffers memtables of write_buffer (plus the block that passed it).
    EXPECT_LE(memtables[InsertPhases::kInsertDelete], 4 * 4 * (write_buffer + arena_block)) << threads;
    EXPECT_GT(w.counter(InsertPhases::kInsertDelete, kFlushes), 0u) << threads;
    w.teardown();
    EXPECT_EQ(w.memtable_bytes(), 0);
  }
}

TEST(InsertPhases, IndexesShareThePrimaryKeysMemtablesWithIndexFamiliesOff) {
  // MyRocks' default layout: one column family, so at most max_write_buffers memtables in all.
  const int64_t write_buffer = 256 << 10, arena_block = write_buffer / 8;
  InsertPhases w(small_params(1, {{"index_families", "0"}}), 2);
  LiveBytes live(2);
  int64_t most = 0;
  test_support::run_all_phases(w, live, 2, [&](std::size_t) { most = std::max(most, w.memtable_bytes()); });
  EXPECT_EQ(w.column_families(), 1u);
  EXPECT_LE(most, 4 * (write_buffer + arena_block));
  EXPECT_EQ(w.counter(InsertPhases::kInsertDelete, kRowsDeleted), 20000u);
}

TEST(InsertPhases, IndexStepSaysWhichStepCreatesTheIndexes) {
  // The seed's second experiment: indexes created on the empty tables at the start of l.i0, which
  // then writes every index's entries through its memtables, and no l.x; the default is the benchmark's.
  const int64_t arena_block = (256 << 10) / 8;
  for (const std::string step : {"l.x", "l.i0"}) {
    InsertPhases w(small_params(1, {{"index_step", step}}), 1);
    LiveBytes live(1);
    std::vector<std::vector<int64_t>> per_family;
    auto phases = test_support::run_all_phases(w, live, 1, [&](std::size_t) {
      per_family.emplace_back();
      for (std::size_t f = 0; f < w.column_families(); ++f) per_family.back().push_back(w.memtable_bytes(f));
    });
    const bool at_load = step == "l.i0";
    EXPECT_EQ(w.counter(InsertPhases::kLoad, kRowsInserted), 60000u) << step;
    for (std::size_t f = 1; f < 4; ++f) {
      if (at_load) {
        EXPECT_GE(per_family[InsertPhases::kLoad][f], arena_block) << "family " << f;
      } else {
        EXPECT_EQ(per_family[InsertPhases::kLoad][f], 0) << "family " << f;
      }
    }
    EXPECT_EQ(w.counter(InsertPhases::kIndex, kSortChunks) > 0, !at_load) << step;
    EXPECT_EQ(w.counter(InsertPhases::kIndex, kMergedRecords), at_load ? 0u : 3u * 60000) << step;
    EXPECT_EQ(phases[InsertPhases::kIndex].ops, at_load ? 0u : 60000u) << step;
    if (at_load) {
      EXPECT_EQ(phases[InsertPhases::kIndex].live_after, phases[InsertPhases::kLoad].live_after);
    }
    // The later steps are the benchmark's either way.
    EXPECT_EQ(w.counter(InsertPhases::kInsertDelete, kRowsDeleted), 20000u) << step;
  }
}

TEST(InsertPhases, FlushLagSetsTheMemtablesAliveWhateverTheFlushThreadsSpeed) {
  // The writer waits for each flush it makes due, so the live set at the load's peak is the
  // schedule's: with flush_lag L, L immutable memtables plus the full active one, never more, and
  // the same in every run (before, it moved by up to three memtables with the flush thread's lag).
  const int64_t write_buffer = 256 << 10, arena_block = write_buffer / 8;
  for (int lag : {0, 3}) {
    std::vector<int64_t> peaks;
    for (int run = 0; run < 3; ++run) {
      InsertPhases w(small_params(1, {{"flush_lag", std::to_string(lag)}}), 2);
      LiveBytes live(2);
      PhasesRun r = run_all(w, live, 2);
      int64_t peak = r.phases[InsertPhases::kLoad].peak_live;
      EXPECT_GE(peak, (lag + 1) * write_buffer) << "flush_lag " << lag;
      EXPECT_LE(peak, (lag + 1) * (write_buffer + arena_block) + 64 * 1024) << "flush_lag " << lag;
      EXPECT_GT(w.counter(InsertPhases::kLoad, kFlushes), 5u);
      peaks.push_back(peak);
    }
    EXPECT_EQ(peaks[0], peaks[1]) << "flush_lag " << lag;
    EXPECT_EQ(peaks[0], peaks[2]) << "flush_lag " << lag;
  }
  EXPECT_NE(find_workload("insert_phases")->validate(small_params(1, {{"flush_lag", "4"}})), "");
  EXPECT_NE(find_workload("insert_phases")->validate(small_params(1, {{"flush_lag", "-1"}})), "");
}

TEST(InsertPhases, CountedQueryPhasesWriteTheirRowsWhateverTheSpeed) {
  // q_queries > 0: each reader runs exactly its queries and the writer writes exactly q_seconds'
  // worth of rows at the phase's rate (here 1000 x 1 x 1 table x 0.5 s = 500 in q1000), however
  // long the phase takes.
  InsertPhases w(small_params(1, {{"q_queries", "3000"}, {"q_seconds", "0.5"}, {"q_rate_scale", "1"}}), 2);
  LiveBytes live(2);
  PhasesRun r = run_all(w, live, 2);
  EXPECT_EQ(w.counter(InsertPhases::kQ100, kRowsInserted), 50u);
  EXPECT_EQ(w.counter(InsertPhases::kQ500, kRowsInserted), 250u);
  EXPECT_EQ(w.counter(InsertPhases::kQ1000, kRowsInserted), 500u);
  EXPECT_EQ(w.counter(InsertPhases::kQ1000, kRowsDeleted), 500u);
  EXPECT_EQ(r.phases[InsertPhases::kQ1000].ops, 3000u);
  EXPECT_EQ(r.phases[InsertPhases::kQ1000].live_after, r.held[InsertPhases::kQ1000]);
}

TEST(InsertPhases, SortFillCutsChunksAtThatFractionOfTheBuffer) {
  // sort_fill 0.25: the same records through buffers filled a quarter: four times the chunks, a
  // quarter of the set nodes at once, the same merge.
  auto run = [](const char* fill) {
    auto w = std::make_unique<InsertPhases>(small_params(1, {{"sort_fill", fill}}), 1);
    LiveBytes live(1);
    PhasesRun r = run_all(*w, live, 1);
    return std::make_pair(std::move(w), r);
  };
  auto [full, full_run] = run("1");
  auto [quarter, quarter_run] = run("0.25");
  uint64_t full_chunks = full->counter(InsertPhases::kIndex, kSortChunks);
  uint64_t quarter_chunks = quarter->counter(InsertPhases::kIndex, kSortChunks);
  EXPECT_GE(quarter_chunks, 4 * full_chunks - 3 * 3);  // each index's last chunk is partial in both
  EXPECT_LE(quarter_chunks, 4 * full_chunks + 3);
  EXPECT_EQ(quarter->counter(InsertPhases::kIndex, kMergedRecords), 3u * 60000);
  EXPECT_LT(quarter_run.phases[InsertPhases::kIndex].peak_live, full_run.phases[InsertPhases::kIndex].peak_live);
  EXPECT_EQ(quarter_run.phases[InsertPhases::kIndex].live_after, quarter_run.held[InsertPhases::kIndex]);
}

TEST(InsertPhases, RateLimitedWritersWrite) {
  // Timed q phases with writers: the writer's rows follow the rate (a lower bound only, never a timing).
  InsertPhases w(small_params(1, {{"q_queries", "0"}, {"q_seconds", "0.2"}, {"q_rate_scale", "1"}}), 2);
  LiveBytes live(2);
  PhasesRun r = run_all(w, live, 2);
  EXPECT_GE(w.counter(InsertPhases::kQ1000, kRowsInserted), 100u);
  EXPECT_EQ(w.counter(InsertPhases::kQ1000, kRowsDeleted), w.counter(InsertPhases::kQ1000, kRowsInserted));
  EXPECT_EQ(r.phases[InsertPhases::kIdleEnd].live_after, r.held[InsertPhases::kIdleEnd]);
}

TEST(InsertPhases, SameSeedSameSequence) {
  auto trace = [](int64_t seed, int threads) {
    InsertPhases w(small_params(seed), threads);
    LiveBytes live(threads);
    PhasesRun r = run_all(w, live, threads);
    std::vector<uint64_t> out;
    for (std::size_t ph = 0; ph < r.phases.size(); ++ph) {
      out.push_back(w.counter(ph, kTrace));
      out.push_back(r.phases[ph].ops);
      // With one client the cache sees one sequence, so even live figures repeat exactly, peaks
      // included: flushes happen when the writes make them due, whatever the flush thread's lag.
      if (threads <= 2) {
        out.push_back(static_cast<uint64_t>(r.phases[ph].live_after));
        out.push_back(static_cast<uint64_t>(r.phases[ph].peak_live));
      }
    }
    return out;
  };
  EXPECT_EQ(trace(3, 1), trace(3, 1));
  EXPECT_NE(trace(3, 1), trace(4, 1));
  EXPECT_EQ(trace(3, 2), trace(3, 2));
  EXPECT_EQ(trace(3, 3), trace(3, 3));
}

TEST(InsertPhases, ScaleMultipliesRows) {
  InsertPhases w(small_params(1, {{"scale", "0.5"}}), 1);
  LiveBytes live(1);
  run_all(w, live, 1);
  EXPECT_EQ(w.counter(InsertPhases::kLoad, kRowsInserted), 30000u);
  EXPECT_EQ(w.counter(InsertPhases::kInsertDelete, kRowsDeleted), 10000u);
}

TEST(InsertPhases, RejectsBadParameters) {
  const auto* info = find_workload("insert_phases");
  EXPECT_EQ(info->validate(small_params()), "");
  EXPECT_NE(info->validate(small_params(1, {{"entry_max", "40"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"max_write_buffers", "1"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"block_cache", "8K"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"scale", "0"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"sort_fill", "0"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"sort_fill", "1.5"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"sort_fill", "0.001"}})), "");  // 256K x 0.001 < 4K
  EXPECT_EQ(info->validate(small_params(1, {{"sort_fill", "0.0625"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"index_families", "2"}})), "");
  EXPECT_EQ(info->validate(small_params(1, {{"index_step", "l.i0"}})), "");
  EXPECT_NE(info->validate(small_params(1, {{"index_step", "l.i1"}})).find("index_step"), std::string::npos);
}

}  // namespace insert_phases_test
