// The one dlsym lookup pattern shared by the per-allocator readers (internal to allocators/).
#pragma once

#include <dlfcn.h>

#include <type_traits>

namespace allocmark::allocators {

// Looks `name` up among everything already loaded (the LD_PRELOADed allocator first), at call time.
// Null when no loaded object exports it. Use with the header's own declaration where there is one,
// e.g. find_symbol<decltype(mallinfo2)>("mallinfo2"), so a signature mismatch fails to compile.
template <class Fn>
Fn* find_symbol(const char* name) {
  static_assert(std::is_function_v<Fn>, "find_symbol<Fn>: Fn must be a function type");
  return reinterpret_cast<Fn*>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace allocmark::allocators
