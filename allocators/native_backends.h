// The per-backend tables; each is defined in <backend>/native.cpp (internal to allocators/).
#pragma once

#include "allocators/backends.h"

#include <string>

namespace allocmark::allocators {

// The entries of a NativeApi for what an allocator does not offer (releases built from source
// whose builds export no statistics, no purge or no version call): "not exposed", never zeros.
inline nlohmann::json no_figures() { return nlohmann::json::object(); }
inline bool no_purge() { return false; }
inline std::string no_version() { return ""; }  // the release's build.json says it (`release`)

extern const Backend kGlibcBackend;
extern const Backend kJemallocBackend;
extern const Backend kTcmallocBackend;
extern const Backend kMimallocBackend;
extern const Backend kNumapBackend;
extern const Backend kSnmallocBackend;
extern const Backend kRpmallocBackend;

}  // namespace allocmark::allocators
