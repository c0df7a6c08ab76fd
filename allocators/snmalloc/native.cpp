// snmalloc (github.com/microsoft/snmalloc): a release built from source (`allocmark build
// snmalloc@0.7.5`; allocators/snmalloc/recipe.toml), no Debian package. Its preload library, the
// snmallocshim target, exports the C and C++ allocation functions only: get_malloc_info_v1 (its one
// statistic, coarse usage) is in malloc-extensions.cc, which the shim does not build. So allocmark
// reads nothing native from it and says so (empty objects), never zeros.
#include "allocators/native_backends.h"

namespace allocmark::allocators {

constexpr NativeApi kSnmallocApi{"snmalloc", &no_figures, &no_figures, &no_figures, &no_purge, &no_version};

const Backend kSnmallocBackend{
    "snmalloc", "snmalloc (Microsoft Research), message-passing frees, built from a pinned release", {},
    "__malloc_end_pointer", "",
    {}, {},  // configured at compile time (CMake options): it reads no variable in 0.7.5
    &kSnmallocApi, {}, "", {}, /*from_source=*/true};

}  // namespace allocmark::allocators
