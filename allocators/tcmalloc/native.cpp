// gperftools tcmalloc: the C MallocExtension entry points (found with dlsym, never linked).
#include "allocators/dlsym.h"
#include "allocators/native_backends.h"

#include <gperftools/malloc_extension_c.h>
#include <gperftools/tcmalloc.h>

#include <cstdlib>

namespace allocmark::allocators {
namespace {

using GetPropertyFn = decltype(MallocExtension_GetNumericProperty);

// Adds each property the library knows (GetNumericProperty returns true) under its own name.
nlohmann::json read_properties(std::initializer_list<const char*> names) {
  nlohmann::json out = nlohmann::json::object();
  auto* get = find_symbol<GetPropertyFn>("MallocExtension_GetNumericProperty");
  if (get == nullptr) return out;
  for (const char* name : names) {
    std::size_t value = 0;
    if (get(name, &value)) out[name] = value;
  }
  return out;
}

nlohmann::json read_stats() {
  return read_properties({"generic.current_allocated_bytes", "generic.heap_size",
                          "generic.total_physical_bytes", "tcmalloc.pageheap_free_bytes",
                          "tcmalloc.pageheap_unmapped_bytes", "tcmalloc.central_cache_free_bytes",
                          "tcmalloc.transfer_cache_free_bytes", "tcmalloc.thread_cache_free_bytes",
                          "tcmalloc.current_total_thread_cache_bytes",
                          "tcmalloc.max_total_thread_cache_bytes"});
}

// gperftools (2.10) counts no lock contention: its spinlocks keep no statistics.
nlohmann::json read_contention() { return nlohmann::json::object(); }

nlohmann::json read_options() {
  // tcmalloc.aggressive_memory_decommit comes from TCMALLOC_AGGRESSIVE_DECOMMIT,
  // tcmalloc.max_total_thread_cache_bytes from TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES.
  nlohmann::json o =
      read_properties({"tcmalloc.aggressive_memory_decommit", "tcmalloc.max_total_thread_cache_bytes"});
  if (o.empty()) return o;  // not tcmalloc
  // The release rate is readable only through the C++ MallocExtension::GetMemoryReleaseRate();
  // gperftools has no C entry point for it, so report what the environment asked for.
  const char* rate = std::getenv("TCMALLOC_RELEASE_RATE");
  o["TCMALLOC_RELEASE_RATE"] = rate != nullptr ? nlohmann::json(rate) : nlohmann::json(nullptr);
  return o;
}

bool purge() {
  auto* release = find_symbol<decltype(MallocExtension_ReleaseFreeMemory)>("MallocExtension_ReleaseFreeMemory");
  if (release == nullptr) return false;
  release();
  return true;
}

std::string version() {
  auto* v = find_symbol<decltype(tc_version)>("tc_version");
  if (v == nullptr) return "";
  const char* s = v(nullptr, nullptr, nullptr);
  return s != nullptr ? s : "";
}

// The forms of gperftools' values (EnvValueForm): what strtol (an int), strtoll and strtod read whole.
constexpr const char* kInt = "-?[0-9]{1,9}";
constexpr const char* kIntText = "a decimal integer of at most 9 digits (no 0x, no unit)";
constexpr const char* kInt64 = "-?[0-9]{1,18}";
constexpr const char* kInt64Text = "a decimal integer of at most 18 digits (no 0x, no unit)";
constexpr const char* kDecimal = "[0-9]+(\\.[0-9]*)?([eE][-+]?[0-9]+)?|\\.[0-9]+([eE][-+]?[0-9]+)?";
constexpr const char* kDecimalText = "a decimal number (1.5, 10, 1e1)";
constexpr const char* kSwitch = "[01]|true|false|TRUE|FALSE|True|False|yes|no|YES|NO|Yes|No";
constexpr const char* kSwitchText = "a switch: 1, 0, true, false, yes or no";
constexpr const char* kReadsItsLeadingNumber = "would read only the number it starts with (0 where none), without a word";
constexpr const char* kReadsItsFirstLetter = "would read it as true only where it starts with t, T, y, Y or 1, without a word";

}  // namespace

constexpr NativeApi kTcmallocApi{"tcmalloc", &read_stats, &read_contention, &read_options, &purge,
                             &version};

const Backend kTcmallocBackend{
    "tcmalloc", "gperftools tcmalloc", {"libtcmalloc.so.4", "libtcmalloc_minimal.so.4"},
    "MallocExtension_GetNumericProperty", "libgoogle-perftools4",
    // gperftools' README and docs (tcmalloc, heap profiler, heap checker, CPU profiler), checked
    // against the strings of Debian's libtcmalloc.so.4: the heap profiler and checker alone make a
    // cell 100x slower and write profile files.
    {"HEAPPROFILE", "HEAPPROFILESIGNAL", "HEAPCHECK", "MALLOCSTATS", "PERFTOOLS_VERBOSE", "PPROF_PATH",
     "CPUPROFILE", "GLIBCPP_FORCE_NEW", "GLIBCXX_FORCE_NEW"},
    {"TCMALLOC_", "HEAP_PROFILE_", "HEAP_CHECK_", "CPUPROFILE_", "PERFTOOLS_"},
    &kTcmallocApi,
    {},
    // gperftools prints nothing for a value it cannot read, and does not ignore it either
    // (src/base/commandlineflags.h, 2.10 and 2.18.1 alike): a number is read with strtol, strtoll or
    // strtod and no check of where the number ends, so "banana" and "0x10" are 0 and "64MB" is 64;
    // a switch is true for a value starting with t, T, y, Y or 1 and false for any other.
    // TCMALLOC_RELEASE_RATE=banana is rate 0 (never give memory back), and
    // TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=banana the smallest cache (512 KiB, seen on Debian's).
    "",
    {{"TCMALLOC_RELEASE_RATE", kDecimal, kDecimalText, kReadsItsLeadingNumber},
     {"TCMALLOC_HEAP_LIMIT_MB", kInt, kIntText, kReadsItsLeadingNumber},
     {"TCMALLOC_TRANSFER_NUM_OBJ", kInt, kIntText, kReadsItsLeadingNumber},
     {"TCMALLOC_MEMFS_LIMIT_MB", kInt, kIntText, kReadsItsLeadingNumber},
     {"TCMALLOC_DEVMEM_START", kInt, kIntText, kReadsItsLeadingNumber},
     {"TCMALLOC_DEVMEM_LIMIT", kInt, kIntText, kReadsItsLeadingNumber},
     {"TCMALLOC_MAX_FREE_QUEUE_SIZE", kInt, kIntText, kReadsItsLeadingNumber},
     {"TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", kInt64, kInt64Text, kReadsItsLeadingNumber},
     {"TCMALLOC_SAMPLE_PARAMETER", kInt64, kInt64Text, kReadsItsLeadingNumber},
     {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", kInt64, kInt64Text, kReadsItsLeadingNumber},
     {"TCMALLOC_OVERRIDE_PAGESIZE", kInt64, kInt64Text, kReadsItsLeadingNumber},
     {"TCMALLOC_AGGRESSIVE_DECOMMIT", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_SKIP_SBRK", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_SKIP_MMAP", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_DISABLE_MEMORY_RELEASE", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_MEMFS_ABORT_ON_FAIL", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_MEMFS_IGNORE_MMAP_FAIL", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_MEMFS_MAP_PRIVATE", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_MEMFS_DISABLE_FALLBACK", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_STACKTRACE_METHOD_VERBOSE", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_TRACE", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_PAGE_FENCE", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_PAGE_FENCE_NEVER_RECLAIM", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_PAGE_FENCE_READABLE", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_RECLAIM_MEMORY", kSwitch, kSwitchText, kReadsItsFirstLetter},
     {"TCMALLOC_SYMBOLIZE_STACKTRACE", kSwitch, kSwitchText, kReadsItsFirstLetter}}};

}  // namespace allocmark::allocators
