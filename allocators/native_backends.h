// The per-backend NativeApi tables; each is defined in <backend>/native.cpp (internal to allocators/).
#pragma once

#include "allocators/native_api.h"

namespace allocmark::allocators {

extern const NativeApi kGlibcApi;
extern const NativeApi kJemallocApi;
extern const NativeApi kTcmallocApi;
extern const NativeApi kMimallocApi;
extern const NativeApi kNumapApi;

}  // namespace allocmark::allocators
