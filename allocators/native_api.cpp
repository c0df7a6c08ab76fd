#include "allocators/native_api.h"

#include "allocators/native_backends.h"

#include <array>
#include <stdexcept>
#include <string>

namespace allocmark::allocators {

const NativeApi& native_api(std::string_view backend) {
  static const std::array<const NativeApi*, 5> kAll = {&kGlibcApi, &kJemallocApi, &kTcmallocApi,
                                                       &kMimallocApi, &kNumapApi};
  for (const NativeApi* api : kAll) {
    if (api->backend == backend) return *api;
  }
  throw std::out_of_range("unknown allocator backend: '" + std::string(backend) + "'");
}

}  // namespace allocmark::allocators
