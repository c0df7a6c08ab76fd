// snmalloc (github.com/microsoft/snmalloc): a release built from source (`allocmark build
// snmalloc@0.7.5`; allocators/snmalloc/recipe.toml), no Debian package. Its preload library, the
// snmallocshim target, exports the C and C++ allocation functions only: get_malloc_info_v1 (its one
// statistic, coarse usage) is in malloc-extensions.cc, which the shim does not build. So allocmark
// reads nothing native from it and says so (empty objects), never zeros.
#include "allocators/native_backends.h"

#include <string>

namespace allocmark::allocators {
namespace {

nlohmann::json empty() { return nlohmann::json::object(); }
bool purge() { return false; }
// No version call: the release's build.json says it (the record's `release`).
std::string version() { return ""; }

}  // namespace

constexpr NativeApi kSnmallocApi{"snmalloc", &empty, &empty, &empty, &purge, &version};

const Backend kSnmallocBackend{
    "snmalloc", "snmalloc (Microsoft Research), message-passing frees, built from a pinned release", {},
    "__malloc_end_pointer", "",
    {}, {},  // configured at compile time (CMake options): it reads no variable in 0.7.5
    &kSnmallocApi, {}, "", {}, /*from_source=*/true};

}  // namespace allocmark::allocators
