// insert_phases: the memory behaviour of MyRocks running the Insert Benchmark (seed 004), phase by
// phase as the benchmark names them. See docs/workloads/insert_phases.md for the model.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "workloads/rng.h"
#include "workloads/workload.h"

namespace allocmark::workloads {

// Allocates std::set nodes with plain operator new and counts their bytes into the live counter of
// the thread currently working on the owning table (the slot is re-pointed at each phase start).
template <class T>
class CountedAllocator {
 public:
  using value_type = T;
  explicit CountedAllocator(LiveBytes::Local** live) : live_(live) {}
  template <class U>
  CountedAllocator(const CountedAllocator<U>& other) : live_(other.slot()) {}
  T* allocate(std::size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    (*live_)->add(static_cast<int64_t>(n * sizeof(T)));
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    ::operator delete(p);
    (*live_)->add(-static_cast<int64_t>(n * sizeof(T)));
  }
  LiveBytes::Local** slot() const { return live_; }
  template <class U>
  bool operator==(const CountedAllocator<U>& o) const { return live_ == o.slot(); }

 private:
  LiveBytes::Local** live_;
};

// Per-phase counters, summed over threads (each thread adds its own at the end of its share).
enum Counter : int {
  kRowsInserted, kRowsDeleted, kCommits, kMemtableSwitches, kFlushes,
  kCacheHits, kCacheMisses, kCacheEvictions, kQueries, kSortChunks, kMergedRecords,
  kChunkBufferBytes,  // largest merge chunk buffer (max, not sum)
  kTrace,             // order-independent hash of the operation choices (tests compare it)
  kCounterCount
};
using Counters = std::array<uint64_t, kCounterCount>;

// RocksDB-style block cache at a fixed capacity: CLOCK eviction (as in the Hyper Clock Cache) in
// mutex-protected shards. A miss allocates the block's contents, a handle and a block object; the
// thread that inserts evicts, so a block is often freed by another thread than the one that read it.
class BlockCache {
 public:
  static constexpr std::size_t kHandleBytes = 80;
  static constexpr std::size_t kBlockObjectBytes = 72;

  BlockCache(uint64_t capacity, std::size_t min_block_bytes);
  // Returns true on a hit. `data_bytes` is drawn by the caller whether it hits or not, so the
  // caller's random sequence does not depend on the cache's state.
  bool read(uint64_t key, std::size_t data_bytes, LiveBytes::Local& live, Counters& c);
  uint64_t charged() const;
  void clear();  // teardown only: frees without accounting

 private:
  struct Entry {
    uint64_t key = 0;
    void* data = nullptr;
    void* handle = nullptr;
    void* object = nullptr;
    uint32_t data_bytes = 0;
    bool referenced = false;
    bool used = false;
  };
  struct alignas(64) Shard {
    std::mutex mu;
    std::vector<Entry> entries;
    std::vector<uint32_t> free_entries;
    std::vector<uint32_t> table;  // open addressing: entry index + 1, 0 = empty
    uint64_t capacity = 0;
    uint64_t charge = 0;
    std::size_t hand = 0;
  };
  static uint64_t mix(uint64_t k);
  static std::size_t charge_of(std::size_t data_bytes) { return data_bytes + kHandleBytes + kBlockObjectBytes; }
  uint32_t find(Shard& s, uint64_t key) const;  // entry index + 1 or 0
  void table_insert(Shard& s, uint64_t key, uint32_t entry);
  void table_erase(Shard& s, uint64_t key);

  std::vector<std::unique_ptr<Shard>> shards_;
};

class InsertPhases final : public Workload {
 public:
  enum Phase : std::size_t { kLoad, kIndex, kIdleX, kInsertDelete, kQ100, kQ500, kQ1000, kIdleEnd };
  static const std::vector<std::string>& phase_names();

  InsertPhases(const Params& params, int threads);
  ~InsertPhases() override;
  const std::vector<std::string>& phases() const override { return phase_names(); }
  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override;
  void teardown() override;
  nlohmann::json phase_metrics(std::size_t phase) override;

  // For tests, valid between phases: bytes the workload holds by its own bookkeeping (memtable
  // arenas, cached blocks, index-build buffers and set nodes), and a phase's counters.
  int64_t held_bytes() const;
  int64_t memtable_bytes() const { return arena_total_.load(); }
  std::size_t column_families() const { return families_.size(); }
  int64_t memtable_bytes(std::size_t family) const {
    int64_t sum = 0;
    for (const auto& m : families_[family].memtables) sum += static_cast<int64_t>(m.arena_bytes);
    return sum;
  }
  uint64_t counter(std::size_t phase, Counter c) const { return stats_[phase][c].load(); }
  int clients() const { return clients_; }

 private:
  struct Memtable {
    std::vector<void*> blocks;
    std::size_t block_used = 0;
    uint64_t arena_bytes = 0;
    int state = 0;  // 0 free, 1 active, 2 immutable
  };
  // A column family's memtables, as RocksDB keeps them per column family: the primary key's and one
  // per secondary index, each with its own active memtable, write_buffer_size and
  // max_write_buffer_number.
  struct ColumnFamily {
    std::vector<Memtable> memtables;
    int active = 0;
    std::vector<int> immutable_queue;  // FIFO ring of memtable indices
    std::size_t imm_head = 0, imm_count = 0;
  };
  // 24 bytes like MyRocks' merge_record (block pointer, key length, comparator pointer); the
  // comparator's slot holds the key's first 8 bytes instead, so most comparisons stay in the node.
  struct Rec {
    const uint8_t* key;
    uint32_t len;
    uint64_t prefix;
  };
  struct RecLess {
    bool operator()(const Rec& a, const Rec& b) const {
      if (a.prefix != b.prefix) return a.prefix < b.prefix;
      int c = std::memcmp(a.key, b.key, a.len < b.len ? a.len : b.len);
      return c < 0 || (c == 0 && a.len < b.len);
    }
  };
  using RecSet = std::set<Rec, RecLess, CountedAllocator<Rec>>;
  // MyRocks' Rdb_index_merge for one new secondary index.
  struct IndexMerge {
    explicit IndexMerge(LiveBytes::Local** live) : records(RecLess{}, CountedAllocator<Rec>(live)) {}
    uint8_t* unsorted = nullptr;  // records as the scan produces them
    uint8_t* output = nullptr;    // a sorted chunk on its way to the temporary file
    std::size_t used = 0;
    RecSet records;               // one node per record, in key order
    std::vector<uint64_t> chunk_bytes, chunk_records;
  };
  // One chunk being merged: its merge_heap_entry, its read buffer and what is left to read.
  struct MergeSource {
    void* entry;
    uint8_t* buf;
    uint64_t left_bytes, left_records, pos, filled, step;
  };
  // One benchmark client's table: rows [tail, head) exist.
  struct Table {
    LiveBytes::Local* live = nullptr;  // counter of the thread running this client now
    Rng rng;
    uint64_t head = 0, tail = 0;
    std::vector<std::unique_ptr<IndexMerge>> merges;
    std::vector<MergeSource> sources;  // reserved for the most chunks an index can have
  };
  struct alignas(64) ThreadState {
    std::vector<uint16_t> batch;  // entry sizes of the commit being built
  };

  int client_of(int thread) const;  // -1: the background (flush / rate-limited writer) thread
  uint64_t block_key(int client, int index, uint64_t block) const;
  std::size_t draw_block_bytes(Rng& rng) const;
  std::size_t draw_entry(Rng& rng) const { return entry_min_ + rng.below(entry_max_ - entry_min_ + 1); }

  uint64_t write_rows(ThreadContext& ctx, ThreadState& ts, int client, Rng& rng, uint64_t rows, bool secondary,
                      bool deletes, bool inline_flush, Counters& c, uint64_t& trace);
  void append_batch(ThreadContext& ctx, const uint8_t* wb, const uint16_t* sizes, std::size_t n, std::size_t per_row,
                    bool inline_flush, Counters& c);
  void* arena_alloc(ThreadContext& ctx, Memtable& m, std::size_t bytes);
  void free_memtable(ThreadContext& ctx, Memtable& m, Counters& c);
  void seal_active(ThreadContext& ctx, ColumnFamily& f, bool inline_flush, Counters& c);
  void flush_oldest(ThreadContext& ctx, ColumnFamily& f, bool inline_flush, Counters& c);
  void flush_loop(ThreadContext& ctx, std::size_t phase, Counters& c);
  void flush_immutable(ThreadContext& ctx, Counters& c);
  void client_done(std::size_t phase);

  uint64_t build_indexes(ThreadContext& ctx, int client, Counters& c, uint64_t& trace);
  void sort_out(IndexMerge& m, Counters& c);
  uint64_t merge_index(ThreadContext& ctx, Table& t, IndexMerge& m, Counters& c);

  uint64_t query(ThreadContext& ctx, int client, Counters& c, uint64_t& trace);
  uint64_t run_queries(ThreadContext& ctx, std::size_t phase, int thread_client, Counters& c, uint64_t& trace);
  void idle(double seconds) const;

  // Parameters after scale.
  int threads_, clients_;
  uint64_t rows_, rows_i1_;
  std::size_t rows_per_commit_, entry_min_, entry_max_;
  std::size_t write_buffer_, arena_block_;
  int max_write_buffers_, flush_lag_, indexes_;
  bool indexes_at_load_;  // index_step = l.i0
  std::size_t merge_buf_, sort_limit_, combine_read_, block_bytes_, rows_per_block_, query_rows_;
  double q_seconds_, q_rate_scale_, idle_s_;
  int64_t q_queries_;

  std::vector<std::unique_ptr<Table>> tables_;
  std::vector<ThreadState> thread_state_;
  Rng writer_rng_;  // the rate-limited writer of the q phases
  BlockCache cache_;

  // Column family 0 is the primary key, 1..indexes the secondary indexes (written from l.i1 on;
  // l.x bulk-loads them without memtables; with index_step = l.i0 written from l.i0 on). Per family one memtable is active, the others
  // immutable until a flush frees them. db_mu_ guards the families; a writer holds it while the
  // flush thread frees the memtable it handed over, so no other write overtakes a flush.
  std::mutex db_mu_;
  std::vector<ColumnFamily> families_;
  // The hand-over to the flush thread: one memtable at a time, guarded by flush_mu_.
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  Memtable* flush_request_ = nullptr;
  std::atomic<int64_t> arena_total_{0};
  std::atomic<int64_t> merge_total_{0};  // index-build buffers (not set nodes), for held_bytes
  std::vector<int> clients_done_;          // per phase, guarded by flush_mu_
  std::unique_ptr<std::atomic<int>[]> readers_done_;  // per phase
  std::unique_ptr<std::atomic<uint64_t>[]> queries_done_;  // per q phase, over all readers

  std::unique_ptr<std::array<std::atomic<uint64_t>, kCounterCount>[]> stats_;
  LiveBytes teardown_live_{1};
};

}  // namespace allocmark::workloads
