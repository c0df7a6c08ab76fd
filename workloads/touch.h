// Writing one byte per page makes an allocation resident the way an application that uses it
// would; without it RSS would only show what the allocator itself touched.
#pragma once

#include <cstddef>

namespace allocmark::workloads {

inline constexpr std::size_t kTouchPage = 4096;

inline void touch_pages(void* p, std::size_t size) {
  if (size == 0) return;
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (std::size_t off = 0; off < size; off += kTouchPage) bytes[off] = 1;
  bytes[size - 1] = 1;
}

}  // namespace allocmark::workloads
