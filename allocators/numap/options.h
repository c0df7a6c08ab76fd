// Layer 1, options: ONE table, read once from NUMAP_<NAME> environment variables (sizes take K, M,
// G or T suffixes, powers of 1024), like mimalloc's options.c. NUMAP_PRINT_OPTIONS=1 prints the
// effective values to stderr. A bad value is a message on stderr and abort(): never a silent default.
#pragma once

#include <cstddef>
#include <cstdint>

namespace numap {

enum class OptKind { kSize, kInt, kBool, kChoice, kPath };

struct OptionInfo {
  const char* name;      // without the NUMAP_ prefix
  OptKind kind;
  long long def;         // default (kChoice: index into choices)
  long long min, max;    // accepted range (kSize / kInt)
  const char* choices;   // kChoice: "purge|fail"
  const char* help;
};

enum class BeyondLimit { kPurge = 0, kFail = 1 };

// The effective values. Tests build one by hand; the preloaded library fills it from the environment.
struct Options {
  std::uint64_t capacity = 0;        // CAPACITY: bytes all nodes together may have mapped; 0 = unlimited
  std::uint64_t node_capacity = 0;   // NODE_CAPACITY: per node, capped by the kernel's free memory; 0 = that alone
  std::uint64_t class_span = 16ull << 30;  // CLASS_SPAN: address space reserved per (node, class)
  long long decay_ms = 1000;         // DECAY_MS: free pages older than this are advised away; 0 = never
  std::uint64_t next_below = 0;      // NEXT_BELOW: requests below go to the next allocator (velox: 3072)
  int numa = -1;                     // NUMA: -1 auto, 0 off, 1 on (even on one node)
  int distance_limit = 0;            // DISTANCE_LIMIT: farthest fallback distance; 0 = none
  BeyondLimit beyond_limit = BeyondLimit::kPurge;  // BEYOND_LIMIT: purge|fail
  bool thp = false;                  // THP: huge pages for classes that are multiples of 2 MiB
  bool tcache = true;                // TCACHE: per-thread caches for small objects
  std::uint64_t tcache_bytes = 32 << 10;  // TCACHE_BYTES: per thread and small class
  const char* sysfs_root = "/sys";   // SYSFS_ROOT: where devices/system/node lives (tests)
  bool print = false;                // PRINT_OPTIONS
  std::uint64_t page_cache_bytes = 512 << 10;  // PAGE_CACHE_BYTES: per thread, page chunks <= 256 KiB
  bool decay_thread = true;          // DECAY_THREAD: a background thread applies the decay while idle
  long long exchange_ms = 100;       // EXCHANGE_MS: fresh pages are paid for by other classes' pages idle this long; 0 = off
  bool stats_at_exit = false;        // STATS_AT_EXIT: one summary line on stderr when the process exits
  long long free_refresh_ms = 100;   // FREE_REFRESH_MS: node free memory re-read at most this often; 0 = never
  long long free_percent = 12;       // FREE_PERCENT: free resident pages kept per node, % of in use; 0 = no limit
  std::uint64_t free_floor = 8 << 20;  // FREE_FLOOR: free resident bytes a node may always keep
  std::uint64_t large_cache_bytes = 8 << 20;  // LARGE_CACHE_BYTES: cached chunks above 256 KiB, all threads, per node
};

const OptionInfo* option_table(std::size_t* count);

// Parses "123", "64K", "1g", "16M"; false on anything else or overflow.
bool parse_size(const char* text, std::uint64_t* out);

// Reads the environment (getenv only; no allocation). Aborts with a message on a bad value.
Options options_from_env();

// The value of option `index` in `o`, for printing and numap_option().
long long option_value(const Options& o, std::size_t index, const char** text);

void print_options(const Options& o);

}  // namespace numap
