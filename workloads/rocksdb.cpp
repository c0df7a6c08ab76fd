// rocksdb: the real RocksDB (Debian's librocksdb) through the Insert Benchmark's steps (seed 004),
// beside insert_phases, which models the same steps. This file is the registration every binary
// sees (parameters, validation, phases); the engine lives in a module linked against librocksdb
// (workloads/rocksdb/engine.cpp) that the worker loads only for a rocksdb cell, so no other
// workload's process carries RocksDB's code, static initialisers or threads.
#include <dlfcn.h>

#include <stdexcept>

#include "workloads/rocksdb/config.h"
#include "workloads/workload.h"

namespace allocmark::workloads {
namespace {

namespace rw = rocksdb_workload;

rw::Config config_of(const Params& p, const WorkloadEnv& env) {
  rw::Config c;
  c.rows = static_cast<uint64_t>(p.integer("rows"));
  c.rows_i1 = static_cast<uint64_t>(p.integer("rows_i1"));
  c.rows_per_commit = static_cast<int>(p.integer("rows_per_commit"));
  c.value_bytes = static_cast<int>(p.integer("value_bytes"));
  c.indexes = static_cast<int>(p.integer("indexes"));
  c.indexes_at_load = p.text("index_step") == "l.i0";
  c.write_buffer = p.bytes("write_buffer");
  c.max_write_buffers = static_cast<int>(p.integer("max_write_buffers"));
  c.background_jobs = static_cast<int>(p.integer("background_jobs"));
  c.block_cache = p.bytes("block_cache");
  c.cache = p.text("cache");
  c.compression = p.text("compression");
  c.block_bytes = p.bytes("block_bytes");
  c.sort_buffer = p.bytes("sort_buffer");
  c.query_rows = static_cast<int>(p.integer("query_rows"));
  c.q_seconds = p.real("q_seconds");
  c.q_rate_scale = p.real("q_rate_scale");
  c.idle_s = p.real("idle_s");
  c.seed = static_cast<uint64_t>(p.integer("seed"));
  c.data_dir = env.data_dir;
  return c;
}

std::unique_ptr<Workload> make(const Params& p, int threads, const WorkloadEnv& env) {
  if (env.data_dir.empty()) throw std::runtime_error("rocksdb: the worker was given no data folder for the database");
  // RTLD_NOW: a module built against another librocksdb fails here, before any phase, not mid-run.
  void* module = ::dlopen(ALLOCMARK_ROCKSDB_MODULE, RTLD_NOW | RTLD_LOCAL);
  if (!module)
    throw std::runtime_error(std::string("rocksdb: cannot load the engine module ") + ALLOCMARK_ROCKSDB_MODULE + ": " +
                             ::dlerror() + " (build the allocmark_rocksdb target; needs librocksdb-dev)");
  auto create = reinterpret_cast<rw::CreateFn>(::dlsym(module, rw::kCreateSymbol));
  if (!create) throw std::runtime_error(std::string("rocksdb: ") + ALLOCMARK_ROCKSDB_MODULE + " lacks " + rw::kCreateSymbol);
  std::string error;
  Workload* w = create(config_of(p, env), threads, error);
  if (!w) throw std::runtime_error(error);
  return std::unique_ptr<Workload>(w);  // the module stays loaded: its code runs the destructor
}

std::string validate(const Params& p) {
  if (p.integer("rows") < 1 || p.integer("rows_i1") < 0) return "rows must be >= 1 and rows_i1 >= 0";
  if (p.integer("rows_per_commit") < 1 || p.integer("rows_per_commit") > 100000) return "rows_per_commit must be 1..100000";
  if (p.integer("value_bytes") < 8 || p.integer("value_bytes") > 65536) return "value_bytes must be 8..65536";
  if (p.integer("indexes") < 1 || p.integer("indexes") > 15) return "indexes must be 1..15";
  if (p.text("index_step") != "l.x" && p.text("index_step") != "l.i0")
    return "index_step must be l.x or l.i0, not '" + p.text("index_step") + "'";
  if (p.bytes("write_buffer") < 64 * 1024) return "write_buffer must be >= 64K";
  if (p.integer("max_write_buffers") < 2 || p.integer("max_write_buffers") > 64) return "max_write_buffers must be 2..64";
  if (p.integer("background_jobs") < 1 || p.integer("background_jobs") > 64) return "background_jobs must be 1..64";
  if (p.text("cache") != "lru" && p.text("cache") != "hyper_clock")
    return "cache must be lru (LRUCache) or hyper_clock (HyperClockCache), not '" + p.text("cache") + "'";
  const std::string& z = p.text("compression");
  if (z != "none" && z != "snappy" && z != "lz4" && z != "zstd" && z != "zlib")
    return "compression must be none, snappy, lz4, zstd or zlib, not '" + z + "'";
  if (p.bytes("block_bytes") < 1024 || p.bytes("block_bytes") > (4u << 20)) return "block_bytes must be 1K..4M";
  if (p.bytes("block_cache") < 2 * p.bytes("block_bytes")) return "block_cache must hold at least two blocks";
  if (p.bytes("sort_buffer") < 64 * 1024 || p.bytes("sort_buffer") > (uint64_t{16} << 30)) return "sort_buffer must be 64K..16G";
  if (p.integer("query_rows") < 1) return "query_rows must be >= 1";
  if (p.real("q_seconds") < 0 || p.real("idle_s") < 0 || p.real("q_rate_scale") < 0)
    return "q_seconds, idle_s and q_rate_scale must be >= 0";
  return "";
}

WorkloadInfo info() {
  WorkloadInfo w{
      "rocksdb",
      "the real RocksDB (librocksdb) through the Insert Benchmark: load, create secondary indexes (column families "
      "via sort buffers), idle, insert+delete, rate-limited writers with point and range readers, idle",
      rw::phase_names(),
      {
          {"rows", ParamType::Int, "100000", "8000000", "rows loaded by l.i0 over all client threads (full: the seed's 8 x 50M scaled to one machine)"},
          {"rows_i1", ParamType::Int, "50000", "16000000", "rows inserted at the head, and as many deleted from the tail, by l.i1"},
          {"rows_per_commit", ParamType::Int, "100", "100", "rows per commit (one WriteBatch each)"},
          {"value_bytes", ParamType::Int, "64", "64", "row value size"},
          {"indexes", ParamType::Int, "3", "3", "secondary indexes (column families) created by index_step"},
          {"index_step", ParamType::String, "l.x", "l.x",
           "the step that creates the secondary indexes: l.x (after the load, by a scan through sort buffers: the "
           "benchmark) or l.i0 (on the empty tables at the start of the load, which then writes every index's entries; "
           "l.x does nothing: the seed's second experiment)"},
          {"write_buffer", ParamType::Bytes, "8M", "64M", "memtable size per column family (write_buffer_size)"},
          {"max_write_buffers", ParamType::Int, "4", "4", "memtables per column family (max_write_buffer_number)"},
          {"background_jobs", ParamType::Int, "2", "4", "RocksDB flush and compaction threads (max_background_jobs)"},
          {"block_cache", ParamType::Bytes, "32M", "2G", "block cache capacity"},
          {"cache", ParamType::String, "lru", "lru", "block cache type: lru (LRUCache) or hyper_clock (HyperClockCache)"},
          {"compression", ParamType::String, "lz4", "lz4", "SST compression: none, snappy, lz4, zstd, zlib"},
          {"block_bytes", ParamType::Bytes, "8K", "8K", "data block size"},
          {"sort_buffer", ParamType::Bytes, "16M", "64M", "l.x sort buffer per client and index (rocksdb_merge_buf_size)"},
          {"query_rows", ParamType::Int, "10", "10", "entries per range read"},
          {"q_seconds", ParamType::Float, "1", "300", "length of each q phase"},
          {"q_rate_scale", ParamType::Float, "10", "1", "multiplies the q phases' 100/500/1000 rows/s per client"},
          {"idle_s", ParamType::Float, "1", "30", "length of each idle phase (idle.x, idle.end)"},
      },
      make,
      validate,
  };
  // RocksDB allocates inside a library we do not instrument; its own memory figures are in each
  // phase's workload_metrics instead (docs/workloads/rocksdb.md).
  w.tracks_live_bytes = false;
  w.ops_per_s_not_a_speed = [](const Params&, std::string_view phase) -> std::string {
    return phase.substr(0, 1) == "q" ? "runs for q_seconds: rate-limited writers, and readers in the time left" : "";
  };
  return w;
}

const bool registered = register_workload(info());

}  // namespace
}  // namespace allocmark::workloads
