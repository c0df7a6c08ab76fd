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
    &kTcmallocApi};

}  // namespace allocmark::allocators
