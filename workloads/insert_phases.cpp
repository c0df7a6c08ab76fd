// insert_phases: MyRocks under the Insert Benchmark (seed 004: peak RSS per benchmark step by
// jemalloc version and configuration, with a spike while secondary indexes are created). The
// allocations follow what RocksDB and MyRocks do in each step: memtable arenas in l.i0/l.i1, the
// Rdb_index_merge sort buffers and std::set nodes in l.x, a fixed-capacity block cache whose
// entries any thread evicts, queries with rate-limited writers, and idle steps with no allocation
// at all, so an allocator that only returns memory when called keeps it.
#include "workloads/insert_phases.h"
#include "workloads/call_latency.h"
#include "workloads/touch.h"
#include "workloads/refused.h"

#include "workloads/clock.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace allocmark::workloads {

namespace {

constexpr int kShards = 16;
constexpr std::size_t kMergeEntryBytes = 64;  // merge_heap_entry beside each chunk's buffer
constexpr std::size_t kWriteBatchHeader = 12;
constexpr std::size_t kEntryHeader = 4;  // tag and length varints per WriteBatch record

void* checked_malloc(std::size_t bytes) {
  void* p = workloads::allocate(bytes);
  if (!p) allocation_refused(bytes);
  return p;
}

inline uint64_t trace_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Block cache

BlockCache::BlockCache(uint64_t capacity, std::size_t min_block_bytes) {
  uint64_t per_shard = capacity / kShards;
  std::size_t max_entries = static_cast<std::size_t>(per_shard / charge_of(min_block_bytes)) + 2;
  std::size_t table = 4;
  while (table < 2 * max_entries) table <<= 1;
  for (int i = 0; i < kShards; ++i) {
    auto s = std::make_unique<Shard>();
    s->capacity = per_shard;
    s->entries.resize(max_entries);
    s->free_entries.reserve(max_entries);
    for (std::size_t e = max_entries; e-- > 0;) s->free_entries.push_back(static_cast<uint32_t>(e));
    s->table.assign(table, 0);
    shards_.push_back(std::move(s));
  }
}

uint64_t BlockCache::mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  return k ^ (k >> 33);
}

uint32_t BlockCache::find(Shard& s, uint64_t key) const {
  std::size_t mask = s.table.size() - 1;
  for (std::size_t i = (mix(key) >> 4) & mask;; i = (i + 1) & mask) {
    uint32_t v = s.table[i];
    if (v == 0) return 0;
    if (s.entries[v - 1].key == key) return v;
  }
}

void BlockCache::table_insert(Shard& s, uint64_t key, uint32_t entry) {
  std::size_t mask = s.table.size() - 1;
  std::size_t i = (mix(key) >> 4) & mask;
  while (s.table[i] != 0) i = (i + 1) & mask;
  s.table[i] = entry + 1;
}

// Linear probing with backward-shift deletion: no tombstones, so probes stay short however long
// the cache churns.
void BlockCache::table_erase(Shard& s, uint64_t key) {
  std::size_t mask = s.table.size() - 1;
  std::size_t i = (mix(key) >> 4) & mask;
  while (s.entries[s.table[i] - 1].key != key) i = (i + 1) & mask;
  std::size_t hole = i;
  for (std::size_t j = (hole + 1) & mask; s.table[j] != 0; j = (j + 1) & mask) {
    std::size_t home = (mix(s.entries[s.table[j] - 1].key) >> 4) & mask;
    bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      s.table[hole] = s.table[j];
      hole = j;
    }
  }
  s.table[hole] = 0;
}

bool BlockCache::read(uint64_t key, std::size_t data_bytes, LiveBytes::Local& live, Counters& c) {
  Shard& s = *shards_[mix(key) & (kShards - 1)];
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (uint32_t v = find(s, key)) {
      s.entries[v - 1].referenced = true;
      ++c[kCacheHits];
      return true;
    }
  }
  ++c[kCacheMisses];
  // The read happens outside the shard lock, as RocksDB reads and decompresses before inserting.
  void* data = checked_malloc(data_bytes);
  fill_block(data, static_cast<int>(key), data_bytes);
  void* handle = checked_malloc(kHandleBytes);
  fill_block(handle, 0, kHandleBytes);
  void* object = checked_malloc(kBlockObjectBytes);
  fill_block(object, 0, kBlockObjectBytes);
  std::size_t charge = charge_of(data_bytes);
  live.add(static_cast<int64_t>(charge));

  // Evicted entries are freed after the lock is dropped, by this thread.
  Entry victims[8];
  int nvictims = 0;
  bool raced = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (find(s, key)) {
      raced = true;  // another thread inserted it meanwhile: drop ours
    } else {
      while ((s.charge + charge > s.capacity || s.free_entries.empty()) && nvictims < 8) {
        Entry& e = s.entries[s.hand];
        s.hand = (s.hand + 1) % s.entries.size();
        if (!e.used) continue;
        if (e.referenced) {
          e.referenced = false;
          continue;
        }
        table_erase(s, e.key);
        s.charge -= charge_of(e.data_bytes);
        victims[nvictims++] = e;
        e = Entry{};
        s.free_entries.push_back(static_cast<uint32_t>(&e - s.entries.data()));
      }
      if (s.charge + charge <= s.capacity && !s.free_entries.empty()) {
        uint32_t idx = s.free_entries.back();
        s.free_entries.pop_back();
        s.entries[idx] = Entry{key, data, handle, object, static_cast<uint32_t>(data_bytes), false, true};
        table_insert(s, key, idx);
        s.charge += charge;
      } else {
        raced = true;  // could not make room within one sweep: serve the read without caching it
      }
    }
  }
  for (int i = 0; i < nvictims; ++i) {
    workloads::release(victims[i].data);
    workloads::release(victims[i].handle);
    workloads::release(victims[i].object);
    live.add(-static_cast<int64_t>(charge_of(victims[i].data_bytes)));
  }
  c[kCacheEvictions] += nvictims;
  if (raced) {
    workloads::release(data);
    workloads::release(handle);
    workloads::release(object);
    live.add(-static_cast<int64_t>(charge));
  }
  return false;
}

uint64_t BlockCache::charged() const {
  uint64_t sum = 0;
  for (const auto& s : shards_) sum += s->charge;
  return sum;
}

void BlockCache::clear() {
  for (auto& s : shards_) {
    for (auto& e : s->entries) {
      if (!e.used) continue;
      workloads::release(e.data);
      workloads::release(e.handle);
      workloads::release(e.object);
      e = Entry{};
    }
    s->free_entries.clear();
    for (std::size_t e = s->entries.size(); e-- > 0;) s->free_entries.push_back(static_cast<uint32_t>(e));
    std::fill(s->table.begin(), s->table.end(), 0);
    s->charge = 0;
  }
}

// ---------------------------------------------------------------------------------------------
// Setup

const std::vector<std::string>& InsertPhases::phase_names() {
  static const std::vector<std::string> names{"l.i0", "l.x", "idle.x", "l.i1", "q100", "q500", "q1000", "idle.end"};
  return names;
}

namespace {
uint64_t scaled(const Params& p, const char* name) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(p.integer(name)) * p.real("scale")));
}
}  // namespace

InsertPhases::InsertPhases(const Params& p, int threads)
    : threads_(threads),
      clients_(threads > 1 ? threads - 1 : 1),
      rows_(scaled(p, "rows")),
      rows_i1_(scaled(p, "rows_i1")),
      rows_per_commit_(static_cast<std::size_t>(p.integer("rows_per_commit"))),
      entry_min_(static_cast<std::size_t>(p.integer("entry_min"))),
      entry_max_(static_cast<std::size_t>(p.integer("entry_max"))),
      write_buffer_(p.bytes("write_buffer")),
      arena_block_(std::min<std::size_t>(1 << 20, p.bytes("write_buffer") / 8)),
      max_write_buffers_(static_cast<int>(p.integer("max_write_buffers"))),
      flush_lag_(static_cast<int>(p.integer("flush_lag"))),
      indexes_(static_cast<int>(p.integer("indexes"))),
      indexes_at_load_(p.text("index_step") == "l.i0"),
      merge_buf_(p.bytes("merge_buf")),
      sort_limit_(static_cast<std::size_t>(std::llround(static_cast<double>(p.bytes("merge_buf")) * p.real("sort_fill")))),
      combine_read_(p.bytes("combine_read")),
      block_bytes_(p.bytes("block_bytes")),
      rows_per_block_(std::max<std::size_t>(1, p.bytes("block_bytes") / ((entry_min_ + entry_max_) / 2))),
      query_rows_(static_cast<std::size_t>(p.integer("query_rows"))),
      q_seconds_(p.real("q_seconds")),
      q_rate_scale_(p.real("q_rate_scale")),
      idle_s_(p.real("idle_s")),
      q_queries_(p.integer("q_queries")),
      thread_state_(threads),
      writer_rng_(static_cast<uint64_t>(p.integer("seed")) * 1000003 + 999983),
      cache_(static_cast<uint64_t>(static_cast<double>(p.bytes("block_cache")) * p.real("scale")), p.bytes("block_bytes")) {
  const uint64_t seed = static_cast<uint64_t>(p.integer("seed"));
  const std::size_t max_record = 2 + 40 + 8;  // length prefix, secondary key, primary key
  for (int c = 0; c < clients_; ++c) {
    auto t = std::make_unique<Table>();
    t->rng = Rng(seed * 1000003 + c);
    uint64_t rows = rows_ / clients_ + (static_cast<uint64_t>(c) < rows_ % clients_ ? 1 : 0);
    std::size_t max_chunks = static_cast<std::size_t>(rows * max_record / (sort_limit_ - max_record)) + 2;
    for (int i = 0; i < indexes_; ++i) {
      auto m = std::make_unique<IndexMerge>(&t->live);
      m->chunk_bytes.reserve(max_chunks);
      m->chunk_records.reserve(max_chunks);
      t->merges.push_back(std::move(m));
    }
    t->sources.reserve(max_chunks);
    tables_.push_back(std::move(t));
  }
  for (auto& ts : thread_state_) ts.batch.resize(rows_per_commit_ * 2 * (1 + indexes_));
  // MyRocks keeps every index in the default column family unless an index names its own.
  families_.resize(p.integer("index_families") ? 1 + indexes_ : 1);
  for (auto& f : families_) {
    f.memtables.resize(max_write_buffers_);
    for (auto& m : f.memtables) m.blocks.reserve(write_buffer_ / arena_block_ + 2);
    f.memtables[0].state = 1;
    f.immutable_queue.assign(max_write_buffers_, -1);
  }
  clients_done_.assign(phase_names().size(), 0);
  readers_done_ = std::make_unique<std::atomic<int>[]>(phase_names().size());
  queries_done_ = std::make_unique<std::atomic<uint64_t>[]>(phase_names().size());
  stats_ = std::make_unique<std::array<std::atomic<uint64_t>, kCounterCount>[]>(phase_names().size());
  for (std::size_t ph = 0; ph < phase_names().size(); ++ph) {
    readers_done_[ph] = 0;
    queries_done_[ph] = 0;
    for (auto& s : stats_[ph]) s = 0;
  }
}

InsertPhases::~InsertPhases() { teardown(); }

int InsertPhases::client_of(int thread) const { return threads_ == 1 ? 0 : thread - 1; }

uint64_t InsertPhases::block_key(int client, int index, uint64_t block) const {
  return (static_cast<uint64_t>(client) << 44) | (static_cast<uint64_t>(index) << 40) | block;
}

// RocksDB closes a data block once it passes block_size, so blocks are a little over it.
std::size_t InsertPhases::draw_block_bytes(Rng& rng) const { return block_bytes_ + rng.below(entry_max_); }

// ---------------------------------------------------------------------------------------------
// Writes: WriteBatch per commit, memtable arenas, flushes

void* InsertPhases::arena_alloc(ThreadContext& ctx, Memtable& m, std::size_t bytes) {
  if (m.blocks.empty() || m.block_used + bytes > arena_block_) {
    if (m.blocks.size() == m.blocks.capacity()) std::abort();  // bookkeeping sized too small: a bug
    void* b = checked_malloc(arena_block_);
    ctx.live.add(static_cast<int64_t>(arena_block_));
    m.blocks.push_back(b);
    m.block_used = 0;
    m.arena_bytes += arena_block_;
    arena_total_.fetch_add(static_cast<int64_t>(arena_block_), std::memory_order_relaxed);
  }
  void* p = static_cast<uint8_t*>(m.blocks.back()) + m.block_used;
  m.block_used += bytes;
  return p;
}

// A flush writes the memtable to an SST (reading every entry) and frees the whole arena.
void InsertPhases::free_memtable(ThreadContext& ctx, Memtable& m, Counters& c) {
  uint64_t sum = 0;
  for (void* b : m.blocks) {
    const auto* bytes = static_cast<const volatile uint8_t*>(b);
    for (std::size_t off = 0; off < arena_block_; off += 4096) sum += bytes[off];
    workloads::release(b);
    ctx.live.add(-static_cast<int64_t>(arena_block_));
  }
  arena_total_.fetch_sub(static_cast<int64_t>(m.arena_bytes), std::memory_order_relaxed);
  m.blocks.clear();
  m.block_used = 0;
  m.arena_bytes = 0;
  (void)sum;
  ++c[kFlushes];
}

// A full memtable becomes immutable. Once its family holds more than flush_lag immutable
// memtables, the oldest is flushed before this writer goes on (a write stall), so how many
// memtables are alive follows the writes alone, never how far a flush thread lags behind.
void InsertPhases::seal_active(ThreadContext& ctx, ColumnFamily& f, bool inline_flush, Counters& c) {
  f.memtables[f.active].state = 2;
  f.immutable_queue[(f.imm_head + f.imm_count) % max_write_buffers_] = f.active;
  ++f.imm_count;
  if (f.imm_count > static_cast<std::size_t>(flush_lag_)) flush_oldest(ctx, f, inline_flush, c);
  int next = 0;
  while (f.memtables[next].state != 0) ++next;
  f.memtables[next].state = 1;
  f.active = next;
}

// With a flush thread, it frees the memtable (blocks the writers allocated, freed by another
// thread, as in RocksDB) while the caller waits holding db_mu_, so no write overtakes the flush;
// without one (one thread, or the q phases' writer) the writer flushes it itself.
void InsertPhases::flush_oldest(ThreadContext& ctx, ColumnFamily& f, bool inline_flush, Counters& c) {
  Memtable& m = f.memtables[f.immutable_queue[f.imm_head]];
  if (inline_flush) {
    free_memtable(ctx, m, c);
  } else {
    std::unique_lock<std::mutex> lock(flush_mu_);
    flush_request_ = &m;
    flush_cv_.notify_all();
    flush_cv_.wait(lock, [&] { return flush_request_ == nullptr; });
  }
  m.state = 0;
  f.imm_head = (f.imm_head + 1) % max_write_buffers_;
  --f.imm_count;
}

void InsertPhases::append_batch(ThreadContext& ctx, const uint8_t* wb, const uint16_t* sizes, std::size_t n,
                                std::size_t per_row, bool inline_flush, Counters& c) {
  std::lock_guard<std::mutex> lock(db_mu_);
  const uint8_t* src = wb + kWriteBatchHeader;
  for (std::size_t i = 0; i < n; ++i) {
    // The batch holds groups of per_row entries: the primary key's, then one per index.
    ColumnFamily& f = families_[families_.size() == 1 ? 0 : i % per_row];
    if (f.memtables[f.active].arena_bytes >= write_buffer_) {
      ++c[kMemtableSwitches];
      seal_active(ctx, f, inline_flush, c);
    }
    src += kEntryHeader;
    void* dst = arena_alloc(ctx, f.memtables[f.active], sizes[i]);
    std::memcpy(dst, src, sizes[i]);
    src += sizes[i];
  }
}

// Thread 0 of the write phases: serves flush requests until every client is done, then flushes
// what the families still hold immutable (oldest first), so each phase ends holding only the
// active memtables.
void InsertPhases::flush_loop(ThreadContext& ctx, std::size_t phase, Counters& c) {
  {
    std::unique_lock<std::mutex> lock(flush_mu_);
    for (;;) {
      flush_cv_.wait(lock, [&] { return flush_request_ != nullptr || clients_done_[phase] == clients_; });
      if (flush_request_ == nullptr) break;
      Memtable* m = flush_request_;
      lock.unlock();
      free_memtable(ctx, *m, c);
      lock.lock();
      flush_request_ = nullptr;
      flush_cv_.notify_all();
    }
  }
  flush_immutable(ctx, c);
}

void InsertPhases::flush_immutable(ThreadContext& ctx, Counters& c) {
  std::lock_guard<std::mutex> lock(db_mu_);
  for (auto& f : families_)
    while (f.imm_count > 0) flush_oldest(ctx, f, true, c);
}

void InsertPhases::client_done(std::size_t phase) {
  std::lock_guard<std::mutex> lock(flush_mu_);
  ++clients_done_[phase];
  flush_cv_.notify_all();
}

// Inserts `rows` rows at the table's head (primary key entry, plus one entry per secondary index
// once they exist) and, with `deletes`, deletes as many from its tail: the delete reads the row
// through the block cache, then writes a tombstone per index. One WriteBatch per commit.
uint64_t InsertPhases::write_rows(ThreadContext& ctx, ThreadState& ts, int client, Rng& rng, uint64_t rows,
                                  bool secondary, bool deletes, bool inline_flush, Counters& c, uint64_t& trace) {
  Table& t = *tables_[client];
  const std::size_t per_row = secondary ? 1 + indexes_ : 1;
  uint64_t done = 0;
  while (done < rows) {
    std::size_t batch_rows = static_cast<std::size_t>(std::min<uint64_t>(rows_per_commit_, rows - done));
    std::size_t n = 0, bytes = kWriteBatchHeader;
    for (std::size_t r = 0; r < batch_rows; ++r) {
      for (std::size_t e = 0; e < per_row; ++e) ts.batch[n++] = static_cast<uint16_t>(draw_entry(rng));
      if (deletes && t.tail < t.head) {
        uint64_t block = t.tail / rows_per_block_;
        std::size_t block_data = draw_block_bytes(rng);
        cache_.read(block_key(client, 0, block), block_data, ctx.live, c);
        trace = trace_mix(trace, block);
        ++t.tail;
        ++c[kRowsDeleted];
        for (std::size_t e = 0; e < per_row; ++e) ts.batch[n++] = static_cast<uint16_t>(draw_entry(rng));
      }
      ++t.head;
    }
    for (std::size_t i = 0; i < n; ++i) bytes += kEntryHeader + ts.batch[i];
    trace = trace_mix(trace, bytes);
    auto* wb = static_cast<uint8_t*>(checked_malloc(bytes));
    ctx.live.add(static_cast<int64_t>(bytes));
    fill_block(wb, static_cast<int>(n), bytes);
    append_batch(ctx, wb, ts.batch.data(), n, per_row, inline_flush, c);
    workloads::release(wb);
    ctx.live.add(-static_cast<int64_t>(bytes));
    c[kRowsInserted] += batch_rows;
    ++c[kCommits];
    done += batch_rows;
  }
  return done;
}

// ---------------------------------------------------------------------------------------------
// l.x: MyRocks inplace_populate_sk. One scan of the primary key feeds every new index's
// Rdb_index_merge; a sort buffer filled to sort_limit_ is written out in key order as one chunk and
// its set cleared; then each index is merged from its chunks with combine_read_size / chunks per
// chunk. Buffers are malloc'd whole and written only as far as records fill them, so a buffer the
// data never fills costs address space, not RSS.

void InsertPhases::sort_out(IndexMerge& m, Counters& c) {
  std::size_t out = 0;
  for (const Rec& r : m.records) {
    std::memcpy(m.output + out, r.key - 2, r.len + 2);
    out += r.len + 2;
  }
  m.chunk_bytes.push_back(out);  // reserved in the constructor for the most chunks possible
  m.chunk_records.push_back(m.records.size());
  m.records.clear();
  m.used = 0;
  ++c[kSortChunks];
}

uint64_t InsertPhases::merge_index(ThreadContext& ctx, Table& t, IndexMerge& m, Counters& c) {
  const std::size_t chunks = m.chunk_bytes.size();
  if (chunks == 0) return 0;
  std::size_t buf = std::max<std::size_t>(4096, std::min(merge_buf_, combine_read_ / chunks));
  c[kChunkBufferBytes] = std::max<uint64_t>(c[kChunkBufferBytes], buf);
  std::vector<MergeSource>& sources = t.sources;
  sources.clear();
  for (std::size_t k = 0; k < chunks; ++k) {
    MergeSource s{checked_malloc(kMergeEntryBytes), static_cast<uint8_t*>(checked_malloc(buf)), m.chunk_bytes[k],
             m.chunk_records[k], 0, 0, 0};
    ctx.live.add(static_cast<int64_t>(kMergeEntryBytes + buf));
    fill_block(s.entry, 0, kMergeEntryBytes);
    s.filled = std::min<uint64_t>(buf, s.left_bytes);
    fill_block(s.buf, 1, s.filled);  // the first read of the chunk from the temporary file
    s.step = std::max<uint64_t>(1, s.left_bytes / std::max<uint64_t>(1, s.left_records));
    sources.push_back(s);
  }
  uint64_t merged = 0, sum = 0;
  std::size_t active = sources.size();
  while (active > 0) {
    // The chunk holding the smallest key: merge order is data dependent, modelled as a random pick.
    std::size_t k = t.rng.below(active);
    MergeSource& s = sources[k];
    sum += s.buf[s.pos];
    s.pos += s.step;
    s.left_bytes -= std::min(s.left_bytes, s.step);
    --s.left_records;
    ++merged;
    if (s.left_records == 0) {
      workloads::release(s.buf);
      workloads::release(s.entry);
      ctx.live.add(-static_cast<int64_t>(kMergeEntryBytes + buf));
      sources[k] = sources[--active];
      continue;
    }
    if (s.pos >= s.filled) {
      s.filled = std::min<uint64_t>(buf, std::max<uint64_t>(s.left_bytes, 1));
      fill_block(s.buf, static_cast<int>(sum), s.filled);
      s.pos = 0;
    }
  }
  m.chunk_bytes.clear();
  m.chunk_records.clear();
  c[kMergedRecords] += merged;
  return merged;
}

uint64_t InsertPhases::build_indexes(ThreadContext& ctx, int client, Counters& c, uint64_t& trace) {
  Table& t = *tables_[client];
  for (auto& m : t.merges) {
    m->unsorted = static_cast<uint8_t*>(checked_malloc(merge_buf_));
    m->output = static_cast<uint8_t*>(checked_malloc(merge_buf_));
    ctx.live.add(static_cast<int64_t>(2 * merge_buf_));
    merge_total_.fetch_add(static_cast<int64_t>(2 * merge_buf_), std::memory_order_relaxed);
    m->used = 0;
  }
  uint64_t scanned = 0;
  for (uint64_t row = t.tail; row < t.head; ++row) {
    if (row == t.tail || row % rows_per_block_ == 0) {
      std::size_t block_data = draw_block_bytes(t.rng);
      cache_.read(block_key(client, 0, row / rows_per_block_), block_data, ctx.live, c);
    }
    for (auto& m : t.merges) {
      uint32_t len = static_cast<uint32_t>(20 + t.rng.below(21) + 8);
      if (m->used + len + 2 > sort_limit_) sort_out(*m, c);
      uint8_t* rec = m->unsorted + m->used;
      rec[0] = static_cast<uint8_t>(len);
      rec[1] = static_cast<uint8_t>(len >> 8);
      uint64_t key = t.rng.next();
      trace = trace_mix(trace, key);
      for (int b = 0; b < 8; ++b) rec[2 + b] = static_cast<uint8_t>(key >> (56 - 8 * b));  // big endian: memcmp order
      std::memset(rec + 10, static_cast<int>(row), len - 8);
      m->records.insert(Rec{rec + 2, len, key});
      m->used += len + 2;
    }
    ++scanned;
  }
  for (auto& m : t.merges) {
    if (!m->records.empty()) sort_out(*m, c);
    merge_index(ctx, t, *m, c);
  }
  for (auto& m : t.merges) {
    workloads::release(m->unsorted);
    workloads::release(m->output);
    m->unsorted = m->output = nullptr;
    ctx.live.add(-static_cast<int64_t>(2 * merge_buf_));
    merge_total_.fetch_sub(static_cast<int64_t>(2 * merge_buf_), std::memory_order_relaxed);
  }
  return scanned;
}

// ---------------------------------------------------------------------------------------------
// q100/q500/q1000: short range scans on a random secondary index (mostly cache misses: the
// database is larger than the cache), while a writer inserts and deletes at a fixed rate.

uint64_t InsertPhases::query(ThreadContext& ctx, int client, Counters& c, uint64_t& trace) {
  Table& t = *tables_[client];
  Rng& rng = t.rng;
  std::size_t iter_bytes = 256 + rng.below(769);  // iterator and read state
  void* iter = checked_malloc(iter_bytes);
  fill_block(iter, 0, iter_bytes);
  ctx.live.add(static_cast<int64_t>(iter_bytes));
  int index = 1 + static_cast<int>(rng.below(static_cast<uint64_t>(indexes_)));
  uint64_t blocks = std::max<uint64_t>(1, (t.head - t.tail) / rows_per_block_);
  uint64_t block = rng.below(blocks);
  bool straddles = rng.below(rows_per_block_) < query_rows_;
  std::size_t d1 = draw_block_bytes(rng), d2 = draw_block_bytes(rng);
  trace = trace_mix(trace, block_key(client, index, block));
  cache_.read(block_key(client, index, block), d1, ctx.live, c);
  if (straddles) cache_.read(block_key(client, index, (block + 1) % blocks), d2, ctx.live, c);
  std::size_t result_bytes = query_rows_ * draw_entry(rng);
  void* result = checked_malloc(result_bytes);
  fill_block(result, 1, result_bytes);
  workloads::release(result);
  workloads::release(iter);
  ctx.live.add(-static_cast<int64_t>(iter_bytes));
  ++c[kQueries];
  return 1;
}

// The writer inserts (and deletes) the seed's 100/500/1000 rows/s per table x q_rate_scale for
// q_seconds' worth of rows. Counted (q_queries > 0): each reader runs q_queries queries and the
// writer keeps pace with the readers' progress, so a phase does the same work in the same
// proportions on any machine and its live set does not follow the machine's speed. Timed
// (q_queries = 0, the seed's clock): readers and writer follow wall time for q_seconds.
uint64_t InsertPhases::run_queries(ThreadContext& ctx, std::size_t phase, int client, Counters& c, uint64_t& trace) {
  static constexpr double kRates[] = {100, 500, 1000};
  constexpr uint64_t kProgressEvery = 64;  // queries between a reader's updates of the shared count
  const uint64_t rows_due = static_cast<uint64_t>(std::llround(kRates[phase - kQ100] * q_rate_scale_ * clients_ * q_seconds_));
  const bool counted = q_queries_ > 0;
  const uint64_t all_queries = counted ? static_cast<uint64_t>(q_queries_) * clients_ : 0;
  const bool reader = client >= 0;
  const bool writer = threads_ == 1 || client < 0;
  const double start = now_s();
  uint64_t written = 0, queries = 0, published = 0;
  int next_table = 0;
  auto write_up_to = [&](uint64_t due) {
    while (written < due) {
      uint64_t n = std::min<uint64_t>(rows_per_commit_, due - written);
      written += write_rows(ctx, thread_state_[ctx.index], next_table, writer_rng_, n, true, true, true, c, trace);
      next_table = (next_table + 1) % clients_;
    }
  };
  auto due_by_now = [&](double elapsed) -> uint64_t {
    if (counted) return rows_due * queries_done_[phase].load(std::memory_order_relaxed) / all_queries;
    return q_seconds_ > 0 ? static_cast<uint64_t>(static_cast<double>(rows_due) * std::min(1.0, elapsed / q_seconds_)) : rows_due;
  };
  auto finished = [&](double elapsed) {
    if (!reader) return readers_done_[phase].load() == clients_;
    return counted ? queries >= static_cast<uint64_t>(q_queries_) : elapsed >= q_seconds_;
  };
  for (;;) {
    double elapsed = now_s() - start;
    if (finished(elapsed)) break;
    if (writer) write_up_to(due_by_now(elapsed));
    if (reader) {
      queries += query(ctx, client, c, trace);
      if (queries - published == kProgressEvery) {
        queries_done_[phase].fetch_add(kProgressEvery, std::memory_order_relaxed);
        published = queries;
      }
    } else {
      sleep_s(0.001);
    }
  }
  if (reader) {
    queries_done_[phase].fetch_add(queries - published, std::memory_order_relaxed);
    readers_done_[phase].fetch_add(1);
  }
  if (writer) {
    write_up_to(rows_due);
    flush_immutable(ctx, c);
  }
  return queries;
}

void InsertPhases::idle(double seconds) const {
  // Nothing is allocated or freed: whatever the allocator returns now, it returns on its own.
  double end = now_s() + seconds;
  for (double now = now_s(); now < end; now = now_s()) sleep_s(std::min(0.1, end - now));
}

// ---------------------------------------------------------------------------------------------

uint64_t InsertPhases::run_phase(std::size_t phase, ThreadContext& ctx) {
  const int client = client_of(ctx.index);
  if (client >= 0) tables_[client]->live = &ctx.live;
  Counters c{};
  uint64_t trace = 0, ops = 0;
  switch (phase) {
    case kLoad:
    case kInsertDelete: {
      const bool load = phase == kLoad;
      if (client < 0) {
        flush_loop(ctx, phase, c);
        break;
      }
      Table& t = *tables_[client];
      uint64_t total = load ? rows_ : rows_i1_;
      uint64_t rows = total / clients_ + (static_cast<uint64_t>(client) < total % clients_ ? 1 : 0);
      ops = write_rows(ctx, thread_state_[ctx.index], client, t.rng, rows, !load || indexes_at_load_, !load,
                       threads_ == 1, c, trace);
      if (threads_ == 1) flush_immutable(ctx, c);
      client_done(phase);
      break;
    }
    case kIndex:
      // With index_step = l.i0 the load already wrote the indexes: there is nothing to create.
      if (client >= 0 && !indexes_at_load_) ops = build_indexes(ctx, client, c, trace);
      break;
    case kIdleX:
    case kIdleEnd:
      idle(idle_s_);
      break;
    case kQ100:
    case kQ500:
    case kQ1000:
      ops = run_queries(ctx, phase, client, c, trace);
      break;
  }
  c[kTrace] = trace;
  auto& s = stats_[phase];
  for (int i = 0; i < kCounterCount; ++i) {
    if (i == kChunkBufferBytes) {
      uint64_t seen = s[i].load();
      while (c[i] > seen && !s[i].compare_exchange_weak(seen, c[i])) {
      }
    } else {
      s[i].fetch_add(c[i]);
    }
  }
  // Pending deltas reach the shared total before the phase barrier, so each phase ends exact.
  ctx.live.flush();
  return ops;
}

int64_t InsertPhases::held_bytes() const {
  return arena_total_.load() + static_cast<int64_t>(cache_.charged()) + merge_total_.load();
}

nlohmann::json InsertPhases::phase_metrics(std::size_t phase) {
  static const char* names[kCounterCount] = {
      "rows_inserted", "rows_deleted", "commits", "memtable_switches", "flushes",
      "cache_hits", "cache_misses", "cache_evictions", "queries", "sort_chunks", "merged_records",
      "merge_chunk_buffer_bytes", "trace"};
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < kCounterCount; ++i)
    if (i != kTrace && stats_[phase][i].load() != 0) out[names[i]] = stats_[phase][i].load();
  out["block_cache_bytes"] = cache_.charged();
  out["memtable_bytes"] = arena_total_.load();
  return out;
}

void InsertPhases::teardown() {
  LiveBytes::Local& sink = teardown_live_.local(0);
  Counters unused{};
  ThreadContext ctx{0, 1, sink};
  for (auto& t : tables_) {
    t->live = &sink;
    for (auto& m : t->merges) {
      m->records.clear();
      workloads::release(m->unsorted);
      workloads::release(m->output);
      m->unsorted = m->output = nullptr;
    }
  }
  merge_total_ = 0;
  for (auto& f : families_)
    for (auto& m : f.memtables)
      if (!m.blocks.empty()) free_memtable(ctx, m, unused);
  cache_.clear();
}

// ---------------------------------------------------------------------------------------------

namespace {
// What a ParamType cannot say about the parameters (run in the driver before any cell).
std::string validate_params(const Params& p) {
  if (p.real("scale") <= 0) return "scale must be > 0";
  if (p.integer("rows") < 0 || p.integer("rows_i1") < 0) return "rows and rows_i1 must be >= 0";
  if (p.integer("rows_per_commit") < 1) return "rows_per_commit must be >= 1";
  if (p.integer("entry_min") < 16 || p.integer("entry_max") < p.integer("entry_min") || p.integer("entry_max") > 4096)
    return "entries need 16 <= entry_min <= entry_max <= 4096";
  if (p.bytes("write_buffer") < 64 * 1024) return "write_buffer must be >= 64K";
  if (static_cast<uint64_t>(p.integer("entry_max")) * 4 > std::min<uint64_t>(1 << 20, p.bytes("write_buffer") / 8))
    return "entry_max must be at most a quarter of the arena block (write_buffer/8, at most 1M)";
  if (p.integer("max_write_buffers") < 2 || p.integer("max_write_buffers") > 64) return "max_write_buffers must be 2..64";
  if (p.integer("flush_lag") < 0 || p.integer("flush_lag") >= p.integer("max_write_buffers"))
    return "flush_lag must be 0..max_write_buffers - 1";
  if (p.integer("indexes") < 1 || p.integer("indexes") > 15) return "indexes must be 1..15";
  if (p.integer("index_families") != 0 && p.integer("index_families") != 1) return "index_families must be 0 or 1";
  if (p.text("index_step") != "l.x" && p.text("index_step") != "l.i0")
    return "index_step must be l.x or l.i0, not '" + p.text("index_step") + "'";
  if (p.bytes("merge_buf") < 64 * 1024) return "merge_buf must be >= 64K";
  if (!(p.real("sort_fill") > 0 && p.real("sort_fill") <= 1)) return "sort_fill must be in (0, 1]";
  if (static_cast<double>(p.bytes("merge_buf")) * p.real("sort_fill") < 4096)
    return "merge_buf x sort_fill must be >= 4K (a chunk must hold records)";
  if (p.bytes("combine_read") < 4096) return "combine_read must be >= 4K";
  if (p.bytes("block_bytes") < 1024 || p.bytes("block_bytes") > (1 << 20)) return "block_bytes must be 1K..1M";
  if (p.bytes("block_cache") * p.real("scale") < 16.0 * 2 * p.bytes("block_bytes"))
    return "block_cache x scale must hold at least two blocks per shard (32 blocks)";
  if (p.integer("query_rows") < 1) return "query_rows must be >= 1";
  if (p.real("q_seconds") < 0 || p.real("idle_s") < 0 || p.real("q_rate_scale") < 0)
    return "q_seconds, idle_s and q_rate_scale must be >= 0";
  if (p.integer("q_queries") < 0) return "q_queries must be >= 0";
  return "";
}
}  // namespace

static const bool registered = register_workload([] {
  WorkloadInfo w{
    "insert_phases",
    "MyRocks under the Insert Benchmark: load (memtables), create 3 secondary indexes (sort buffers), idle, "
    "insert+delete and rate-limited queries over a block cache, idle",
    InsertPhases::phase_names(),
    {
        {"scale", ParamType::Float, "1", "1", "multiplies rows, rows_i1 and block_cache"},
        {"rows", ParamType::Int, "500000", "400000000", "rows loaded by l.i0, over all tables (full: 8 tables x 50M)"},
        {"rows_i1", ParamType::Int, "200000", "800000000",
         "rows inserted, and as many deleted, by l.i1 over all tables (full: 8 x 100M)"},
        {"rows_per_commit", ParamType::Int, "100", "100", "rows per commit (one WriteBatch each)"},
        {"entry_min", ParamType::Int, "50", "50", "smallest memtable entry, bytes"},
        {"entry_max", ParamType::Int, "90", "90", "largest memtable entry, bytes"},
        {"write_buffer", ParamType::Bytes, "8M", "32M", "memtable size (write_buffer_size); arena blocks are min(1M, this/8)"},
        {"max_write_buffers", ParamType::Int, "4", "4", "memtables per column family (max_write_buffer_number)"},
        {"flush_lag", ParamType::Int, "0", "0",
         "immutable memtables a column family keeps before its oldest is flushed, the writer waiting for that flush "
         "(0: flushes keep up with writes; max_write_buffers - 1: RocksDB's bound, write_buffer x max_write_buffers "
         "per family)"},
        {"index_families", ParamType::Int, "1", "1",
         "1: each secondary index in its own column family with its own memtables (the rocksdb workload; MyRocks with "
         "per-index cfname); 0: every index in the primary key's column family (MyRocks' default)"},
        {"indexes", ParamType::Int, "3", "3", "secondary indexes created by index_step"},
        {"index_step", ParamType::String, "l.x", "l.x",
         "the step that creates the secondary indexes: l.x (after the load, by a scan through sort buffers: the "
         "benchmark) or l.i0 (on the empty tables at the start of the load, which then writes every index's entries; "
         "l.x does nothing: the seed's second experiment)"},
        {"merge_buf", ParamType::Bytes, "4M", "64M", "sort buffer per index, twice (rocksdb_merge_buf_size)"},
        {"sort_fill", ParamType::Float, "1", "1",
         "fraction of each sort buffer a chunk fills before it is sorted out; the rest is allocated, never touched "
         "(1: full buffers, as the seed's ~2 GB per index through 64M buffers)"},
        {"combine_read", ParamType::Bytes, "4M", "64M",
         "merge read budget per index, split over its chunks (rocksdb_merge_combine_read_size)"},
        {"block_bytes", ParamType::Bytes, "8K", "8K", "data block size"},
        {"block_cache", ParamType::Bytes, "32M", "4G", "block cache capacity (not given by the seed; our choice)"},
        {"query_rows", ParamType::Int, "10", "10", "rows per range query"},
        {"q_seconds", ParamType::Float, "1", "1800",
         "the q phases' length in the seed's terms: the writer writes q_seconds' worth of rows at the phase's rate; "
         "with q_queries = 0 also the phase's wall time"},
        {"q_queries", ParamType::Int, "500000", "0",
         "queries per reader in each q phase, the writer keeping pace with the readers (the same work on any machine); "
         "0: queries run for q_seconds of wall time (the seed's clock)"},
        {"q_rate_scale", ParamType::Float, "10", "1", "multiplies the q phases' 100/500/1000 rows/s per table"},
        {"idle_s", ParamType::Float, "2", "30", "length of each idle phase (idle.x, idle.end)"},
    },
    [](const Params& p, int threads, const WorkloadEnv&) { return std::make_unique<InsertPhases>(p, threads); },
    validate_params,
  };
  w.ops_per_s_not_a_speed = [](const Params& p, std::string_view phase) -> std::string {
    if (phase.substr(0, 1) != "q" || p.integer("q_queries") != 0) return "";
    return "q_queries = 0: the queries run for q_seconds of wall time beside a rate-limited writer";
  };
  return w;
}());

}  // namespace allocmark::workloads
