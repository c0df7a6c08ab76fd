// Layer 1, options: ONE table, read once from NUMAP_<NAME> environment variables (sizes take K, M,
// G or T suffixes, powers of 1024), like mimalloc's options.c. NUMAP_PRINT_OPTIONS=1 prints the
// effective values to stderr. A bad value or an unknown NUMAP_* name never kills the host program:
// it is one warning line on stderr and the default (counted: numap_stats' option_warnings), as
// glibc, jemalloc and mimalloc do; never a silent default. NUMAP_STRICT=1 (tests, CI) aborts instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace numap {

// kPowerOfTwo: a size that must also be a power of two.
enum class OptKind { kSize, kPowerOfTwo, kInt, kBool, kChoice, kPath };

enum class BeyondLimit { kPurge = 0, kFail = 1 };
// kChoice options: the accepted words, the value being the index (null-terminated).
inline constexpr const char* kBeyondLimitNames[] = {"purge", "fail", nullptr};
enum class Populate { kNone = 0, kAuto = 1, kAll = 2 };
inline constexpr const char* kPopulateNames[] = {"none", "auto", "all", nullptr};

// THE option table: each row is the name after NUMAP_, the Options member, its type, how it is
// parsed, its default, its accepted range (kSize / kInt), its words (kChoice) and its help. The
// Options struct, the table numap_option() and NUMAP_PRINT_OPTIONS list, the parser and the
// printer are all derived from it: adding an option is one row.
#define NUMAP_OPTIONS(X)                                                                                        \
  X(CAPACITY, capacity, std::uint64_t, kSize, 0, 0, 1ll << 50, nullptr,                                         \
    "bytes all nodes may have mapped (RSS cap); 0 = unlimited")                                                 \
  X(NODE_CAPACITY, node_capacity, std::uint64_t, kSize, 0, 0, 1ll << 50, nullptr,                               \
    "bytes per node, never above what the kernel has free there; 0 = what the kernel has free")                 \
  X(CLASS_SPAN, class_span, std::uint64_t, kPowerOfTwo, 16ull << 30, 256ll << 20, 1ll << 40, nullptr,           \
    "address space reserved per (node, class), a power of two")                                                 \
  X(DECAY_MS, decay_ms, long long, kInt, 1000, 0, 3600000, nullptr,                                             \
    "free pages idle longer than N ms are advised away (slow path, background thread); 0 = never")              \
  X(NEXT_BELOW, next_below, std::uint64_t, kSize, 0, 0, 1 << 20, nullptr,                                       \
    "requests below this size go to the next allocator (numap:velox uses 3072)")                                \
  X(NUMA, numa, int, kInt, -1, -1, 1, nullptr, "-1 auto (on with >1 usable node), 0 off, 1 on")                 \
  X(DISTANCE_LIMIT, distance_limit, int, kInt, 0, 0, 255, nullptr,                                              \
    "farthest node distance to fall back to; 0 = none")                                                         \
  X(BEYOND_LIMIT, beyond_limit, BeyondLimit, kChoice, BeyondLimit::kPurge, 0, 1, kBeyondLimitNames,             \
    "when no node within the limit has room")                                                                   \
  X(THP, thp, bool, kBool, false, 0, 1, nullptr, "transparent huge pages for 2 MiB-multiple classes")           \
  X(THP_EVERY_CLASS, thp_every_class, bool, kBool, false, 0, 1, nullptr,                                        \
    "implies THP, and asks for huge pages on every class's span too (small slabs, page classes): a fill "     \
    "faults 2 MiB at a time, as mimalloc 3 does (faster fills, higher peak; giving back part of one splits it; " \
    "their charges stay in pages, so CAPACITY no longer bounds RSS exactly)")                                   \
  X(TCACHE, tcache, bool, kBool, true, 0, 1, nullptr, "per-thread caches for small objects")                    \
  X(TCACHE_BYTES, tcache_bytes, std::uint64_t, kSize, 32 << 10, 1 << 10, 1 << 24, nullptr,                      \
    "thread cache bytes per small class: each list's base limit (TCACHE_BYTES / size, 4..512 objects)")        \
  X(TCACHE_BUDGET, tcache_budget, std::uint64_t, kSize, 4 << 20, 0, 1 << 30, nullptr,                           \
    "the most bytes ONE thread's small-object lists may grow past their base limits, all classes together "     \
    "(each miss grows its class by half, up to 8192 objects), claimed from TCACHE_TOTAL; 0 = fixed limits")      \
  X(TCACHE_TOTAL, tcache_total, std::uint64_t, kSize, 8 << 20, 0, 1ll << 40, nullptr,                           \
    "bytes ALL threads' small-object lists together may grow past their base limits (a shared pool each "      \
    "thread claims from, up to TCACHE_BUDGET, and gives back as its lists shrink or it exits); 0 = fixed limits") \
  X(EXIT_TRANSFER, exit_transfer, bool, kBool, true, 0, 1, nullptr,                                            \
    "an exiting thread's small-object lists go to the transfer caches in batches for the next thread's "       \
    "refills (within the transfer caches' bound), the rest into the slabs; 0 = all into the slabs")             \
  X(HANDOFF_BYTES, handoff_bytes, std::uint64_t, kSize, 16 << 20, 0, 1ll << 30, nullptr,                      \
    "bytes of whole small-object batches per (node, class) that a thread freeing a class it does not "        \
    "allocate (a consumer) hands to the next refill without a lock, ahead of the transfer caches; batches "    \
    "nobody takes for HANDOFF_MS go back to their slabs; 0 = off")                                           \
  X(HANDOFF_MS, handoff_ms, long long, kInt, 50, 0, 3600000, nullptr,                                           \
    "ms a handoff's batches may wait with no refill taking any before they go back to their slabs (the next "  \
    "push or a background pass drains them); 0 = only a decay pass period's look")                             \
  X(SYSFS_ROOT, sysfs_root, const char*, kPath, "/sys", 0, 0, nullptr, "sysfs root for the topology (tests)")   \
  X(PRINT_OPTIONS, print, bool, kBool, false, 0, 1, nullptr, "print effective options to stderr at start")      \
  X(PAGE_CACHE_BYTES, page_cache_bytes, std::uint64_t, kSize, 512 << 10, 0, 1ll << 30, nullptr,                 \
    "per-thread cache of page-class chunks up to 256 KiB (charged bytes); 0 = off")                             \
  X(DECAY_THREAD, decay_thread, bool, kBool, true, 0, 1, nullptr,                                               \
    "a background thread applies DECAY_MS while the program does not allocate")                                 \
  X(EXCHANGE_MS, exchange_ms, long long, kInt, 100, 0, 3600000, nullptr,                                        \
    "before touching fresh pages, advise away as many bytes of other classes' pages idle this long; 0 = off")   \
  X(MOVE_PIECES, move_pieces, long long, kInt, 8192, 0, 1 << 20, nullptr,                                     \
    "before touching fresh pages, move other classes' free resident pages in (mremap, no refault); at most "    \
    "this many moved pieces exist at once (each up to two more /proc/self/maps entries); 0 = never")            \
  X(STATS_AT_EXIT, stats_at_exit, bool, kBool, false, 0, 1, nullptr,                                            \
    "print one line of numap's counters to stderr at exit")                                                     \
  X(FREE_REFRESH_MS, free_refresh_ms, long long, kInt, 100, 0, 60000, nullptr,                                  \
    "re-read each node's free memory (less watermarks) at most this often (ms, slow path); 0 = never (MemTotal)") \
  X(FREE_PERCENT, free_percent, long long, kInt, 12, 0, 100000, nullptr,                                        \
    "free resident pages a node keeps, in percent of its in-use bytes; above it (and FREE_FLOOR) the oldest "   \
    "are advised away at once; 0 = no limit")                                                                   \
  X(FREE_FLOOR, free_floor, std::uint64_t, kSize, 8 << 20, 0, 1ll << 40, nullptr,                               \
    "free resident bytes a node may always keep, whatever FREE_PERCENT says")                                   \
  X(PURGE_DELAY_MS, purge_delay_ms, long long, kInt, 30, -1, 10000, nullptr,                                   \
    "free() never advises pages away: free pages over FREE_PERCENT are queued and given back this many ms "     \
    "later by the background thread (without it, by later allocation slow paths, about 2 MiB per call); "      \
    "-1 = inside the free that finds them (numap v4)")                                                          \
  X(LARGE_CACHE_BYTES, large_cache_bytes, std::uint64_t, kSize, 8 << 20, 0, 1ll << 40, nullptr,                 \
    "chunks of 320 KiB-4 MiB all threads together may keep in their caches, per node (one per class and "      \
    "thread; free pages for FREE_PERCENT); 0 = none")                                                           \
  X(POPULATE, populate, Populate, kChoice, Populate::kAuto, 0, 2, kPopulateNames,                              \
    "fresh pages numap hands out are made resident in one call (MADV_POPULATE_WRITE) instead of one fault "    \
    "per page: auto = only those the program's own writes show it will write: each new slab of a small class " \
    "of objects up to 4 KiB holding 1 MiB of slabs on its node, and a fresh page chunk as far as the free "    \
    "limit gave back resident pages on its node within DECAY_MS, when nearly all it gave back was resident; "  \
    "all = also every class's slabs and the requested pages of every page chunk (programs that write all "     \
    "they allocate); none")                                                                                    \
  X(STRICT, strict, bool, kBool, false, 0, 1, nullptr,                                                          \
    "abort() on an unknown NUMAP_* name or a value numap cannot use, instead of a warning and the default") \
  X(BIND_CAPACITY, bind_capacity, bool, kBool, true, 0, 1, nullptr,                                             \
    "memory strictly bound (MPOL_BIND, cpuset mems) with NUMA placement off: the bound nodes' free memory "     \
    "less watermarks is a capacity (ENOMEM past it, not the kernel's OOM kill); 0 = none")

// Each row's index in the table (numap_option's order): OptionIndex::CLASS_SPAN.
enum class OptionIndex : std::size_t {
#define NUMAP_OPTION_INDEX(name, member, type, kind, def, min, max, choices, help) name,
  NUMAP_OPTIONS(NUMAP_OPTION_INDEX)
#undef NUMAP_OPTION_INDEX
};

// The effective values. Tests build one by hand; the preloaded library fills it from the environment.
struct Options {
#define NUMAP_OPTION_MEMBER(name, member, type, kind, def, min, max, choices, help) type member = def;
  NUMAP_OPTIONS(NUMAP_OPTION_MEMBER)
#undef NUMAP_OPTION_MEMBER
  // Not an option: how many NUMAP_* settings numap warned about and replaced (numap_stats'
  // option_warnings).
  std::uint32_t warnings = 0;
};

struct OptionInfo {
  const char* name;      // without the NUMAP_ prefix
  OptKind kind;
  long long def;         // default (kChoice: index into choices; kPath: 0)
  long long min, max;    // accepted range (kSize / kInt)
  const char* const* choices;  // kChoice: the words, null-terminated
  const char* help;
};

const OptionInfo* option_table(std::size_t* count);

// Parses "123", "64K", "1g", "16M"; false on anything else or overflow.
bool parse_size(const char* text, std::uint64_t* out);

// Reads the environment (getenv only; no allocation). An unknown NUMAP_* name or a bad value is
// one warning line, ignored (the default stays); NUMAP_STRICT=1 (read first) aborts instead.
Options options_from_env();

// A setting numap cannot use as given after all (the arena's reservation refused at this
// NUMAP_CLASS_SPAN): `asked` holds the value tried, `o` what numap uses instead; writes the one
// warning line "numap: NUMAP_<NAME>=<asked's value>: <problem>; using <o's value>" and counts it
// in o->warnings, or under NUMAP_STRICT=1 says so and aborts, as options_from_env does.
void option_fallback(Options* o, OptionIndex option, const Options& asked, const char* problem);

// The value of option `index` in `o`, for printing and numap_option().
long long option_value(const Options& o, std::size_t index, const char** text);

void print_options(const Options& o);

}  // namespace numap
