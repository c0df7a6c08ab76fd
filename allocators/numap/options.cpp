#include "allocators/numap/options.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocators/numap/os.h"

namespace numap {
namespace {

constexpr long long kG = 1ll << 30;

const OptionInfo kTable[] = {
    {"CAPACITY", OptKind::kSize, 0, 0, 1ll << 50, nullptr,
     "bytes all nodes may have mapped (RSS cap); 0 = unlimited"},
    {"NODE_CAPACITY", OptKind::kSize, 0, 0, 1ll << 50, nullptr,
     "bytes per node, never above what the kernel has free there; 0 = what the kernel has free"},
    {"CLASS_SPAN", OptKind::kSize, 16 * kG, 256ll << 20, 1ll << 40, nullptr,
     "address space reserved per (node, class), a power of two"},
    {"DECAY_MS", OptKind::kInt, 1000, 0, 3600000, nullptr,
     "free pages idle longer than N ms are advised away (slow path, background thread); 0 = never"},
    {"NEXT_BELOW", OptKind::kSize, 0, 0, 1 << 20, nullptr,
     "requests below this size go to the next allocator (numap:velox uses 3072)"},
    {"NUMA", OptKind::kInt, -1, -1, 1, nullptr, "-1 auto (on with >1 usable node), 0 off, 1 on"},
    {"DISTANCE_LIMIT", OptKind::kInt, 0, 0, 255, nullptr, "farthest node distance to fall back to; 0 = none"},
    {"BEYOND_LIMIT", OptKind::kChoice, 0, 0, 1, "purge|fail", "when no node within the limit has room"},
    {"THP", OptKind::kBool, 0, 0, 1, nullptr, "transparent huge pages for 2 MiB-multiple classes"},
    {"TCACHE", OptKind::kBool, 1, 0, 1, nullptr, "per-thread caches for small objects"},
    {"TCACHE_BYTES", OptKind::kSize, 32 << 10, 1 << 10, 1 << 24, nullptr, "thread cache bytes per small class"},
    {"SYSFS_ROOT", OptKind::kPath, 0, 0, 0, nullptr, "sysfs root for the topology (tests)"},
    {"PRINT_OPTIONS", OptKind::kBool, 0, 0, 1, nullptr, "print effective options to stderr at start"},
    {"PAGE_CACHE_BYTES", OptKind::kSize, 512 << 10, 0, 1ll << 30, nullptr,
     "per-thread cache of page-class chunks up to 256 KiB (charged bytes); 0 = off"},
    {"DECAY_THREAD", OptKind::kBool, 1, 0, 1, nullptr,
     "a background thread applies DECAY_MS while the program does not allocate"},
    {"EXCHANGE_MS", OptKind::kInt, 100, 0, 3600000, nullptr,
     "before touching fresh pages, advise away as many bytes of other classes' pages idle this long; 0 = off"},
    {"STATS_AT_EXIT", OptKind::kBool, 0, 0, 1, nullptr, "print one line of numap's counters to stderr at exit"},
    {"FREE_REFRESH_MS", OptKind::kInt, 100, 0, 60000, nullptr,
     "re-read each node's free memory (less watermarks) at most this often (ms, slow path); 0 = never (MemTotal)"},
    {"FREE_PERCENT", OptKind::kInt, 12, 0, 100000, nullptr,
     "free resident pages a node keeps, in percent of its in-use bytes; above it (and FREE_FLOOR) the oldest are advised away at once; 0 = no limit"},
    {"FREE_FLOOR", OptKind::kSize, 8 << 20, 0, 1ll << 40, nullptr,
     "free resident bytes a node may always keep, whatever FREE_PERCENT says"},
    {"LARGE_CACHE_BYTES", OptKind::kSize, 8 << 20, 0, 1ll << 40, nullptr,
     "chunks of 320 KiB-4 MiB all threads together may keep in their caches, per node (one per class and thread; free pages for FREE_PERCENT); 0 = none"},
};
constexpr std::size_t kCount = sizeof kTable / sizeof kTable[0];

[[noreturn]] void bad(const OptionInfo& info, const char* value, const char* expected) {
  write_stderr("numap: NUMAP_");
  write_stderr(info.name);
  write_stderr("='");
  write_stderr(value);
  write_stderr("': ");
  write_stderr(expected);
  write_stderr("\n");
  ::abort();
}

bool parse_int(const char* text, long long* out) {
  const char* p = text;
  bool neg = false;
  if (*p == '-') {
    neg = true;
    ++p;
  }
  if (*p < '0' || *p > '9') return false;
  long long v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (1ll << 55)) return false;
    v = v * 10 + (*p - '0');
  }
  if (*p != '\0') return false;
  *out = neg ? -v : v;
  return true;
}

// Parses and range-checks one option, aborting with a message on anything wrong.
long long read_one(const OptionInfo& info, const char* value) {
  long long v = 0;
  switch (info.kind) {
    case OptKind::kSize: {
      std::uint64_t s = 0;
      if (!parse_size(value, &s)) bad(info, value, "not a size (digits with an optional K, M, G or T suffix)");
      v = static_cast<long long>(s);
      break;
    }
    case OptKind::kInt:
      if (!parse_int(value, &v)) bad(info, value, "not an integer");
      break;
    case OptKind::kBool:
      if (strcmp(value, "1") == 0 || strcmp(value, "true") == 0) return 1;
      if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0) return 0;
      bad(info, value, "expected 0, 1, true or false");
    case OptKind::kChoice: {
      const char* c = info.choices;
      for (long long i = 0; *c != '\0'; ++i) {
        const char* end = strchr(c, '|');
        std::size_t len = end ? static_cast<std::size_t>(end - c) : strlen(c);
        if (strlen(value) == len && strncmp(value, c, len) == 0) return i;
        c += len + (end ? 1 : 0);
      }
      bad(info, value, "expected one of purge|fail");
    }
    case OptKind::kPath:
      if (value[0] != '/') bad(info, value, "expected an absolute path");
      return 0;
  }
  if (v < info.min || v > info.max) bad(info, value, "out of range");
  return v;
}

}  // namespace

const OptionInfo* option_table(std::size_t* count) {
  *count = kCount;
  return kTable;
}

bool parse_size(const char* text, std::uint64_t* out) {
  const char* p = text;
  if (*p < '0' || *p > '9') return false;
  std::uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (1ull << 50)) return false;
    v = v * 10 + static_cast<std::uint64_t>(*p - '0');
  }
  int shift = 0;
  switch (*p) {
    case '\0': break;
    case 'k': case 'K': shift = 10; ++p; break;
    case 'm': case 'M': shift = 20; ++p; break;
    case 'g': case 'G': shift = 30; ++p; break;
    case 't': case 'T': shift = 40; ++p; break;
    default: return false;
  }
  if (*p == 'i' && shift != 0) ++p;  // "64Ki", "64KiB"
  if ((*p == 'b' || *p == 'B') && shift != 0) ++p;
  if (*p != '\0') return false;
  if (shift != 0 && v > (~0ull >> shift)) return false;
  *out = v << shift;
  return true;
}

Options options_from_env() {
  Options o;
  char name[64];
  for (std::size_t i = 0; i < kCount; ++i) {
    const OptionInfo& info = kTable[i];
    strcpy(name, "NUMAP_");
    strcat(name, info.name);
    const char* value = ::getenv(name);
    if (value == nullptr) continue;
    long long v = read_one(info, value);
    switch (i) {
      case 0: o.capacity = static_cast<std::uint64_t>(v); break;
      case 1: o.node_capacity = static_cast<std::uint64_t>(v); break;
      case 2:
        if ((v & (v - 1)) != 0) bad(info, value, "not a power of two");
        o.class_span = static_cast<std::uint64_t>(v);
        break;
      case 3: o.decay_ms = v; break;
      case 4: o.next_below = static_cast<std::uint64_t>(v); break;
      case 5: o.numa = static_cast<int>(v); break;
      case 6: o.distance_limit = static_cast<int>(v); break;
      case 7: o.beyond_limit = static_cast<BeyondLimit>(v); break;
      case 8: o.thp = v != 0; break;
      case 9: o.tcache = v != 0; break;
      case 10: o.tcache_bytes = static_cast<std::uint64_t>(v); break;
      case 11: o.sysfs_root = value; break;
      case 12: o.print = v != 0; break;
      case 13: o.page_cache_bytes = static_cast<std::uint64_t>(v); break;
      case 14: o.decay_thread = v != 0; break;
      case 15: o.exchange_ms = v; break;
      case 16: o.stats_at_exit = v != 0; break;
      case 17: o.free_refresh_ms = v; break;
      case 18: o.free_percent = v; break;
      case 19: o.free_floor = static_cast<std::uint64_t>(v); break;
      case 20: o.large_cache_bytes = static_cast<std::uint64_t>(v); break;
    }
  }
  // Unknown NUMAP_* names are typos that would otherwise be silently ignored.

  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "NUMAP_", 6) != 0) continue;
    const char* n = *e + 6;
    const char* eq = strchr(n, '=');
    std::size_t len = eq ? static_cast<std::size_t>(eq - n) : strlen(n);
    bool known = false;
    for (std::size_t i = 0; i < kCount; ++i)
      if (strlen(kTable[i].name) == len && strncmp(kTable[i].name, n, len) == 0) known = true;
    if (!known) {
      write_stderr("numap: unknown option ");
      write_stderr(*e);
      write_stderr(" (NUMAP_PRINT_OPTIONS=1 lists them)\n");
      ::abort();
    }
  }
  return o;
}

long long option_value(const Options& o, std::size_t index, const char** text) {
  *text = nullptr;
  switch (index) {
    case 0: return static_cast<long long>(o.capacity);
    case 1: return static_cast<long long>(o.node_capacity);
    case 2: return static_cast<long long>(o.class_span);
    case 3: return o.decay_ms;
    case 4: return static_cast<long long>(o.next_below);
    case 5: return o.numa;
    case 6: return o.distance_limit;
    case 7: *text = o.beyond_limit == BeyondLimit::kPurge ? "purge" : "fail"; return static_cast<long long>(o.beyond_limit);
    case 8: return o.thp;
    case 9: return o.tcache;
    case 10: return static_cast<long long>(o.tcache_bytes);
    case 11: *text = o.sysfs_root; return 0;
    case 12: return o.print;
    case 13: return static_cast<long long>(o.page_cache_bytes);
    case 14: return o.decay_thread;
    case 15: return o.exchange_ms;
    case 16: return o.stats_at_exit;
    case 17: return o.free_refresh_ms;
    case 18: return o.free_percent;
    case 19: return static_cast<long long>(o.free_floor);
    case 20: return static_cast<long long>(o.large_cache_bytes);
  }
  return 0;
}

void print_options(const Options& o) {
  for (std::size_t i = 0; i < kCount; ++i) {
    const char* text = nullptr;
    long long v = option_value(o, i, &text);
    write_stderr("numap: NUMAP_");
    write_stderr(kTable[i].name);
    write_stderr("=");
    if (text != nullptr) {
      write_stderr(text);
    } else if (v < 0) {
      write_stderr("-");
      write_stderr_u64(static_cast<std::uint64_t>(-v));
    } else {
      write_stderr_u64(static_cast<std::uint64_t>(v));
    }
    write_stderr("  # ");
    write_stderr(kTable[i].help);
    write_stderr("\n");
  }
}

}  // namespace numap
