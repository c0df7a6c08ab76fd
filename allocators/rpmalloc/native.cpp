// rpmalloc (github.com/mjansson/rpmalloc): a release built from source (`allocmark build
// rpmalloc@1.4.5`; allocators/rpmalloc/recipe.toml), no Debian package. Its API found with dlsym.
#include "allocators/dlsym.h"
#include "allocators/native_backends.h"

#include <cstddef>
#include <string>

namespace allocmark::allocators {
namespace {

// rpmalloc.h's rpmalloc_global_statistics_t (1.4.x), copied rather than included: no header of an
// allocator built from source is on the include path.
struct GlobalStatistics {
  std::size_t mapped, mapped_peak, cached, huge_alloc, huge_alloc_peak, mapped_total, unmapped_total;
};

// Only `cached` is filled by every build; the others need ENABLE_STATISTICS=1, which the recipe's
// release build (rpmalloc's own default) leaves off, and read 0 without it: they are left out
// rather than reported as 0.
nlohmann::json read_stats() {
  nlohmann::json s = nlohmann::json::object();
  auto* stats = find_symbol<void(GlobalStatistics*)>("rpmalloc_global_statistics");
  if (stats == nullptr) return s;
  GlobalStatistics g{};
  stats(&g);
  s["cached"] = g.cached;
  return s;
}

}  // namespace

// No purge: rpmalloc_thread_collect only frees what other threads handed back to this one.
constexpr NativeApi kRpmallocApi{"rpmalloc", &read_stats, &no_figures, &no_figures, &no_purge, &no_version};

const Backend kRpmallocBackend{
    "rpmalloc", "rpmalloc (Mattias Jansson), built from a pinned release", {}, "rpmalloc_initialize", "",
    {}, {},  // configured at compile time only (rpmalloc.c's ENABLE_* macros): it reads no variable
    &kRpmallocApi, {}, "", {}, /*from_source=*/true};

}  // namespace allocmark::allocators
