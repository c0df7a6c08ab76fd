// The per-backend tables; each is defined in <backend>/native.cpp (internal to allocators/).
#pragma once

#include "allocators/backends.h"

namespace allocmark::allocators {

extern const Backend kGlibcBackend;
extern const Backend kJemallocBackend;
extern const Backend kTcmallocBackend;
extern const Backend kMimallocBackend;
extern const Backend kNumapBackend;
extern const Backend kSnmallocBackend;
extern const Backend kRpmallocBackend;

}  // namespace allocmark::allocators
