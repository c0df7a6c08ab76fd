// What the rocksdb workload's registration (workloads/rocksdb.cpp, in every binary) hands the
// engine module (workloads/rocksdb/engine.cpp, linked against librocksdb and loaded only by the
// worker of a rocksdb cell): parsed parameters, so the module needs no harness symbol.
#pragma once

#include <cstdint>
#include <string>

#include "workloads/workload.h"

namespace allocmark::workloads::rocksdb_workload {

struct Config {
  uint64_t rows = 0;     // loaded by l.i0, over all clients
  uint64_t rows_i1 = 0;  // inserted at the head, and as many deleted from the tail, by l.i1
  int rows_per_commit = 100;
  int value_bytes = 64;
  int indexes = 3;
  bool indexes_at_load = false;  // index_step = l.i0: created before the load, which maintains them; no l.x
  uint64_t write_buffer = 0;
  int max_write_buffers = 4;
  int background_jobs = 2;
  uint64_t block_cache = 0;
  std::string cache;        // lru | hyper_clock
  std::string compression;  // none | snappy | lz4 | zstd | zlib
  uint64_t block_bytes = 8192;
  uint64_t sort_buffer = 0;  // per client and index, during l.x
  int query_rows = 10;
  double q_seconds = 1;
  double q_rate_scale = 1;
  double idle_s = 1;
  uint64_t seed = 1;
  std::string data_dir;  // the database folder; created by the engine, removed by the driver
};

// The engine's one exported symbol. Returns nullptr and fills `error` when the database cannot be
// opened.
using CreateFn = Workload* (*)(const Config& config, int threads, std::string& error);
inline constexpr const char* kCreateSymbol = "allocmark_rocksdb_create";

inline const std::vector<std::string>& phase_names() {
  static const std::vector<std::string> names{"l.i0", "l.x", "idle.x", "l.i1", "q100", "q500", "q1000", "idle.end"};
  return names;
}

}  // namespace allocmark::workloads::rocksdb_workload
