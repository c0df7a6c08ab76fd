// Writing one byte per page makes an allocation resident the way an application that uses it
// would; without it RSS would only show what the allocator itself touched.
#pragma once

#include <cstddef>

namespace allocmark::workloads {

inline constexpr std::size_t kTouchPage = 4096;

inline void touch_pages(void* p, std::size_t size, unsigned char value = 1) {
  if (size == 0) return;
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (std::size_t off = 0; off < size; off += kTouchPage) bytes[off] = value;
  bytes[size - 1] = value;
}

// A consumer reads what it was handed; the returned sum keeps the reads from being optimised away.
inline unsigned read_pages(const void* p, std::size_t size) {
  auto* bytes = static_cast<const volatile unsigned char*>(p);
  unsigned sum = 0;
  for (std::size_t off = 0; off < size; off += kTouchPage) sum += bytes[off];
  return sum;
}

}  // namespace allocmark::workloads
