// The rocksdb workload's engine: Debian's librocksdb (the real storage engine) driven through the
// Insert Benchmark's steps (seed 004). Built as a module that only a rocksdb cell's worker loads,
// so librocksdb's static initialisers and pages never reach the baseline of any other workload.
//
// Each client thread owns one table (a key prefix): l.i0 appends rows in key order, l.x scans the
// table and fills one column family per secondary index through a sort buffer (with index_step =
// l.i0 the column families exist before the load, which writes their entries, and l.x does
// nothing), l.i1 inserts at the head and deletes from the tail, the q phases write at a fixed rate while reading. RocksDB's own
// threads (flush, compaction) run as they would in a server.
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "workloads/clock.h"
#include "workloads/rng.h"
#include "workloads/rocksdb/config.h"

namespace allocmark::workloads::rocksdb_workload {
namespace {

enum Phase : std::size_t { kLoad, kIndex, kIdleX, kInsertDelete, kQ100, kQ500, kQ1000, kIdleEnd };
enum Counter {
  kRowsInserted, kRowsDeleted, kCommits, kPointReads, kRangeReads, kRangeRows, kSortedRuns, kIndexEntries, kCounterCount
};
constexpr const char* kCounterNames[kCounterCount] = {"rows_inserted", "rows_deleted", "commits",     "point_reads",
                                                      "range_reads",   "range_rows",   "sorted_runs", "index_entries"};
constexpr std::size_t kPrimaryKeyBytes = 4 + 8;        // client, row number (big endian: key order = row order)
constexpr std::size_t kSecondaryKeyBytes = 4 + 8 + 8;  // client, indexed value, row number

// A 64-bit hash: one splitmix64 step of the value.
uint64_t mix(uint64_t k) { return Rng(k).next(); }

void put_be(char* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>(v >> (8 * (bytes - 1 - i)));
}

void check(const rocksdb::Status& s, const char* what) {
  // A failed write or read means the engine is broken, not that the allocator is slow: abort so
  // the cell is recorded as crashed with RocksDB's reason in its log.
  if (!s.ok()) {
    std::fprintf(stderr, "rocksdb workload: %s: %s\n", what, s.ToString().c_str());
    std::abort();
  }
}

rocksdb::CompressionType compression_of(const std::string& name) {
  if (name == "none") return rocksdb::kNoCompression;
  if (name == "snappy") return rocksdb::kSnappyCompression;
  if (name == "lz4") return rocksdb::kLZ4Compression;
  if (name == "zstd") return rocksdb::kZSTD;
  if (name == "zlib") return rocksdb::kZlibCompression;
  throw std::invalid_argument("unknown compression " + name);
}

class RocksdbWorkload final : public Workload {
 public:
  RocksdbWorkload(const Config& c, int threads) : c_(c), clients_(threads), tables_(threads) {
    rocksdb::BlockBasedTableOptions table;
    table.block_size = c.block_bytes;
    if (c.cache == "hyper_clock")
      table.block_cache = rocksdb::HyperClockCacheOptions(c.block_cache, c.block_bytes).MakeSharedCache();
    else
      table.block_cache = rocksdb::NewLRUCache(c.block_cache);
    cf_options_.write_buffer_size = c.write_buffer;
    cf_options_.max_write_buffer_number = c.max_write_buffers;
    cf_options_.compression = compression_of(c.compression);
    cf_options_.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    rocksdb::Options options(rocksdb::DBOptions(), cf_options_);
    options.create_if_missing = true;
    options.error_if_exists = true;  // a fresh folder per cell: an existing database is a harness bug
    options.max_background_jobs = c.background_jobs;
    options.info_log_level = rocksdb::WARN_LEVEL;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, c.data_dir, &db);
    if (!s.ok()) throw std::runtime_error("rocksdb: cannot open a database in " + c.data_dir + ": " + s.ToString());
    db_.reset(db);
    for (auto& counters : stats_)
      for (auto& v : counters) v = 0;
    for (int i = 0; i < clients_; ++i) {
      tables_[i].rng = Rng(c.seed * 1000003 + static_cast<uint64_t>(i));
      tables_[i].write_rng = Rng(c.seed * 1000003 + static_cast<uint64_t>(i) + 500009);
    }
  }

  ~RocksdbWorkload() override { teardown(); }

  const std::vector<std::string>& phases() const override { return phase_names(); }

  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override {
    Counters n{};
    uint64_t ops = 0;
    switch (phase) {
      case kLoad:
        if (c_.indexes_at_load) std::call_once(indexes_created_, [this] { create_indexes(); });
        ops = insert_rows(ctx.index, share(c_.rows, ctx.index), c_.indexes_at_load, false, n);
        break;
      case kIndex:
        if (c_.indexes_at_load) break;  // the load wrote them
        std::call_once(indexes_created_, [this] { create_indexes(); });
        ops = build_indexes(ctx.index, n);
        break;
      case kInsertDelete:
        ops = insert_rows(ctx.index, share(c_.rows_i1, ctx.index), true, true, n);
        break;
      case kQ100:
      case kQ500:
      case kQ1000:
        ops = run_queries(phase, ctx.index, n);
        break;
      case kIdleX:
      case kIdleEnd:
        // Nothing is asked of RocksDB; its background threads finish flushes and compactions.
        sleep_s(c_.idle_s);
        break;
    }
    for (int i = 0; i < kCounterCount; ++i) stats_[phase][i].fetch_add(n[i], std::memory_order_relaxed);
    return ops;
  }

  // RocksDB's own account of its memory, read once the phase has ended (the properties take
  // locks and build strings, so they stay out of the measured interval).
  nlohmann::json phase_metrics(std::size_t phase) override {
    nlohmann::json out = nlohmann::json::object();
    for (int i = 0; i < kCounterCount; ++i)
      if (uint64_t v = stats_[phase][i].load()) out[kCounterNames[i]] = v;
    uint64_t cache = 0, pinned = 0, memtables = 0, readers = 0, sst = 0;
    db_->GetIntProperty(rocksdb::DB::Properties::kBlockCacheUsage, &cache);
    db_->GetIntProperty(rocksdb::DB::Properties::kBlockCachePinnedUsage, &pinned);
    db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &memtables);
    db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateTableReadersMem, &readers);
    db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kTotalSstFilesSize, &sst);
    out["block_cache_usage_bytes"] = cache;
    out["block_cache_pinned_usage_bytes"] = pinned;
    out["memtables_bytes"] = memtables;
    out["table_readers_bytes"] = readers;
    out["rocksdb_accounted_bytes"] = cache + memtables + readers;
    out["sst_files_bytes"] = sst;
    return out;
  }

  void teardown() override {
    if (!db_) return;
    for (auto* h : indexes_) db_->DestroyColumnFamilyHandle(h);
    indexes_.clear();
    db_->Close();
    db_.reset();
  }

 private:
  using Counters = std::array<uint64_t, kCounterCount>;

  // Per client: rows [tail, head) exist; the generators are only touched by the owning thread.
  struct alignas(64) Table {
    uint64_t head = 0, tail = 0;
    Rng rng;        // queries
    Rng write_rng;  // values
  };

  uint64_t share(uint64_t total, int client) const {
    return total / clients_ + (static_cast<uint64_t>(client) < total % clients_ ? 1 : 0);
  }

  static void primary_key(char* out, int client, uint64_t row) {
    put_be(out, static_cast<uint64_t>(client), 4);
    put_be(out + 4, row, 8);
  }
  // The indexed value of a row is a function of (seed, index, client, row), so l.i1 deletes the
  // right index entries without reading them, as a secondary index maintained on the row would.
  uint64_t indexed_value(int index, int client, uint64_t row) const {
    return mix(c_.seed ^ mix((static_cast<uint64_t>(index) << 56) ^ (static_cast<uint64_t>(client) << 40) ^ row));
  }
  void secondary_key(char* out, int index, int client, uint64_t row) const {
    put_be(out, static_cast<uint64_t>(client), 4);
    put_be(out + 4, indexed_value(index, client, row), 8);
    put_be(out + 12, row, 8);
  }

  void create_indexes() {
    for (int i = 0; i < c_.indexes; ++i) {
      rocksdb::ColumnFamilyHandle* h = nullptr;
      check(db_->CreateColumnFamily(cf_options_, "sk" + std::to_string(i + 1), &h), "create column family");
      indexes_.push_back(h);
    }
  }

  // l.i0 (append, no index yet) and l.i1 (append and delete from the tail, indexes maintained):
  // one WriteBatch per commit of rows_per_commit rows, as the benchmark's clients commit.
  uint64_t insert_rows(int client, uint64_t rows, bool with_indexes, bool deletes, Counters& n) {
    Table& t = tables_[client];
    rocksdb::WriteBatch batch;
    std::string value(static_cast<std::size_t>(c_.value_bytes), '\0');
    std::string old_value;
    char key[kSecondaryKeyBytes];
    uint64_t done = 0;
    while (done < rows) {
      uint64_t in_batch = std::min<uint64_t>(static_cast<uint64_t>(c_.rows_per_commit), rows - done);
      batch.Clear();
      for (uint64_t r = 0; r < in_batch; ++r) {
        uint64_t row = t.head++;
        for (std::size_t b = 0; b + 8 <= value.size(); b += 8) {
          uint64_t v = t.write_rng.next();
          std::memcpy(&value[b], &v, 8);
        }
        primary_key(key, client, row);
        batch.Put(rocksdb::Slice(key, kPrimaryKeyBytes), value);
        if (with_indexes)
          for (int i = 0; i < static_cast<int>(indexes_.size()); ++i) {
            secondary_key(key, i, client, row);
            batch.Put(indexes_[i], rocksdb::Slice(key, kSecondaryKeyBytes), rocksdb::Slice());
            ++n[kIndexEntries];
          }
        if (deletes && t.tail < row) {
          uint64_t victim = t.tail++;
          primary_key(key, client, victim);
          // The benchmark's delete reads the row first (through the block cache).
          db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key, kPrimaryKeyBytes), &old_value).PermitUncheckedError();
          batch.Delete(rocksdb::Slice(key, kPrimaryKeyBytes));
          for (int i = 0; i < static_cast<int>(indexes_.size()); ++i) {
            secondary_key(key, i, client, victim);
            batch.Delete(indexes_[i], rocksdb::Slice(key, kSecondaryKeyBytes));
          }
          ++n[kRowsDeleted];
          ++n[kPointReads];
        }
      }
      check(db_->Write(write_options_, &batch), "write");
      n[kRowsInserted] += in_batch;
      ++n[kCommits];
      done += in_batch;
    }
    return done;
  }

  // l.x: one scan of the client's rows feeds a sort buffer per index; a full buffer is sorted and
  // written to the index's column family in key order (MyRocks' Rdb_index_merge sorts in buffers
  // of rocksdb_merge_buf_size before it bulk-loads), then reused.
  uint64_t build_indexes(int client, Counters& n) {
    const std::size_t capacity = std::max<std::size_t>(1, c_.sort_buffer / kSecondaryKeyBytes);
    struct SortBuffer {
      char* keys = nullptr;
      std::vector<uint32_t> order;
      std::size_t used = 0;
    };
    std::vector<SortBuffer> buffers(indexes_.size());
    for (auto& b : buffers) {
      b.keys = static_cast<char*>(std::malloc(capacity * kSecondaryKeyBytes));
      if (!b.keys) std::abort();
      b.order.reserve(capacity);
    }
    rocksdb::WriteBatch batch;
    auto write_out = [&](int index) {
      SortBuffer& b = buffers[index];
      b.order.clear();
      for (uint32_t i = 0; i < b.used; ++i) b.order.push_back(i);
      std::sort(b.order.begin(), b.order.end(), [&](uint32_t x, uint32_t y) {
        return std::memcmp(b.keys + x * kSecondaryKeyBytes, b.keys + y * kSecondaryKeyBytes, kSecondaryKeyBytes) < 0;
      });
      batch.Clear();
      for (std::size_t i = 0; i < b.order.size(); ++i) {
        batch.Put(indexes_[index], rocksdb::Slice(b.keys + b.order[i] * kSecondaryKeyBytes, kSecondaryKeyBytes), rocksdb::Slice());
        ++n[kIndexEntries];
        if (batch.Count() >= 1000 || i + 1 == b.order.size()) {
          check(db_->Write(write_options_, &batch), "index write");
          ++n[kCommits];
          batch.Clear();
        }
      }
      b.used = 0;
      ++n[kSortedRuns];
    };

    Table& t = tables_[client];
    char lower[kPrimaryKeyBytes], upper[kPrimaryKeyBytes];
    primary_key(lower, client, t.tail);
    primary_key(upper, client + 1, 0);
    rocksdb::Slice upper_bound(upper, kPrimaryKeyBytes);
    rocksdb::ReadOptions scan;
    scan.iterate_upper_bound = &upper_bound;
    scan.fill_cache = false;  // a full scan, as MyRocks' index build reads
    uint64_t scanned = 0;
    {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(scan));
      for (it->Seek(rocksdb::Slice(lower, kPrimaryKeyBytes)); it->Valid(); it->Next()) {
        const char* k = it->key().data();
        uint64_t row = 0;
        for (int b = 4; b < 12; ++b) row = (row << 8) | static_cast<uint8_t>(k[b]);
        for (int i = 0; i < static_cast<int>(buffers.size()); ++i) {
          if (buffers[i].used == capacity) write_out(i);
          secondary_key(buffers[i].keys + buffers[i].used * kSecondaryKeyBytes, i, client, row);
          ++buffers[i].used;
        }
        ++scanned;
      }
      check(it->status(), "index scan");
    }
    for (int i = 0; i < static_cast<int>(buffers.size()); ++i)
      if (buffers[i].used > 0) write_out(i);
    for (auto& b : buffers) std::free(b.keys);
    return scanned;
  }

  // q100/q500/q1000: each client writes its table at the step's rate (inserts at the head and
  // deletes at the tail, as l.i1) and, between writes, alternates a point read of a random live
  // row and a range read of query_rows entries on a random secondary index.
  uint64_t run_queries(std::size_t phase, int client, Counters& n) {
    static constexpr double kRates[] = {100, 500, 1000};
    const double rate = kRates[phase - kQ100] * c_.q_rate_scale;
    Table& t = tables_[client];
    const double start = now_s();
    uint64_t written = 0, queries = 0;
    std::string value;
    char key[kSecondaryKeyBytes], bound[kSecondaryKeyBytes];
    put_be(bound, static_cast<uint64_t>(client) + 1, 4);
    std::memset(bound + 4, 0, sizeof bound - 4);
    rocksdb::Slice upper_bound(bound, 4);
    for (double elapsed = 0; elapsed < c_.q_seconds; elapsed = now_s() - start) {
      uint64_t due = static_cast<uint64_t>(elapsed * rate);
      if (due > written) written += insert_rows(client, due - written, true, true, n);
      uint64_t live = t.head - t.tail;
      if (live == 0) continue;
      uint64_t r = t.rng.next();
      if (queries % 2 == 0 || indexes_.empty()) {
        primary_key(key, client, t.tail + r % live);
        db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key, kPrimaryKeyBytes), &value).PermitUncheckedError();
        ++n[kPointReads];
      } else {
        int index = static_cast<int>(r % indexes_.size());
        put_be(key, static_cast<uint64_t>(client), 4);
        put_be(key + 4, t.rng.next(), 8);
        rocksdb::ReadOptions ro;
        ro.iterate_upper_bound = &upper_bound;
        std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, indexes_[index]));
        int got = 0;
        for (it->Seek(rocksdb::Slice(key, 12)); it->Valid() && got < c_.query_rows; it->Next()) ++got;
        n[kRangeRows] += static_cast<uint64_t>(got);
        ++n[kRangeReads];
      }
      ++queries;
    }
    return queries;
  }

  Config c_;
  int clients_;
  std::vector<Table> tables_;
  rocksdb::ColumnFamilyOptions cf_options_;
  rocksdb::WriteOptions write_options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> indexes_;
  std::once_flag indexes_created_;
  std::array<std::array<std::atomic<uint64_t>, kCounterCount>, 8> stats_;
};

}  // namespace
}  // namespace allocmark::workloads::rocksdb_workload

extern "C" __attribute__((visibility("default"))) allocmark::workloads::Workload* allocmark_rocksdb_create(
    const allocmark::workloads::rocksdb_workload::Config& config, int threads, std::string& error) {
  try {
    return new allocmark::workloads::rocksdb_workload::RocksdbWorkload(config, threads);
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}
