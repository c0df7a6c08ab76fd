#include "allocators/backends.h"

#include <unistd.h>

namespace allocmark::allocators {

const std::vector<Backend>& backends() {
  static const std::vector<Backend> table{
      {"glibc", "the C library's ptmalloc2 (per-thread arenas)", {}, "", "libc6"},
      {"jemalloc", "jemalloc (Debian's build, stats compiled in)", {"libjemalloc.so.2"}, "mallctl", "libjemalloc2"},
      {"tcmalloc", "gperftools tcmalloc", {"libtcmalloc.so.4", "libtcmalloc_minimal.so.4"},
       "MallocExtension_GetNumericProperty", "libgoogle-perftools4"},
      {"mimalloc", "Microsoft mimalloc", {"libmimalloc.so.2"}, "mi_version", "libmimalloc2.0"},
      {"numap", "in-tree NUMA-aware mmap size-class allocator (allocators/numap)",
       {"libnumap.so", ALLOCMARK_NUMAP_LIBRARY}, "numap_stats", "(built in this tree: make numap)"},
      {"generic", "any other malloc replacement named by library path; no native statistics", {}, "", ""},
  };
  return table;
}

const Backend* find_backend(std::string_view name) {
  for (const auto& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

std::string backend_names() {
  std::string out;
  for (const auto& b : backends()) out += (out.empty() ? "" : ", ") + b.name;
  return out;
}

std::vector<std::string> library_dirs() {
#if defined(__x86_64__)
  const char* multiarch = "/usr/lib/x86_64-linux-gnu";
#elif defined(__aarch64__)
  const char* multiarch = "/usr/lib/aarch64-linux-gnu";
#else
  const char* multiarch = "/usr/lib";
#endif
  return {multiarch, "/usr/local/lib", "/usr/lib64", "/usr/lib", "/lib"};
}

std::optional<std::string> locate_library(const std::string& soname) {
  if (!soname.empty() && soname[0] == '/') {  // an absolute path (the in-tree numap build)
    if (::access(soname.c_str(), R_OK) == 0) return soname;
    return std::nullopt;
  }
  for (const auto& dir : library_dirs()) {
    std::string path = dir + "/" + soname;
    if (::access(path.c_str(), R_OK) == 0) return path;
  }
  return std::nullopt;
}

bool is_allocator_env(std::string_view name) {
  for (std::string_view prefix : {"MALLOC_", "JE_MALLOC_", "TCMALLOC_", "MIMALLOC_", "NUMAP_"})
    if (name.substr(0, prefix.size()) == prefix) return true;
  return name == "GLIBC_TUNABLES" || name == "LD_PRELOAD";
}

}  // namespace allocmark::allocators
