// Writing one byte per page makes an allocation resident the way an application that uses it
// would; without it RSS would only show what the allocator itself touched.
//
// How much of each block the models write is the `writes` setting (docs/workloads.md): all of it
// (as an application that fills what it allocates), its first cache lines or its first page (one
// that reserves more than it writes: vectors grown by doubling, buffers and hash tables sized
// ahead). The writes that stand for the application using a block go through touch_block and
// fill_block; those a model reads back (a hash table's slots, an arena's entries, a free list's
// links) are always made.
#pragma once

#include <cstddef>
#include <cstring>
#include <string_view>

namespace allocmark::workloads {

inline constexpr std::size_t kTouchPage = 4096;

enum class Writes { All, Lines, Page };
// The setting's words, in Writes' order (the settings table checks values against them).
inline constexpr const char* kWritesNames[] = {"all", "lines", "page"};
inline constexpr std::size_t kWritesLinesBytes = 256;  // `lines`: four cache lines of 64 bytes

namespace detail {
inline Writes writes = Writes::All;  // set once by the worker, before the workload is made
}

// False (nothing changed) for a word that is not one of kWritesNames.
inline bool set_writes(std::string_view name) {
  for (std::size_t i = 0; i < sizeof kWritesNames / sizeof *kWritesNames; ++i)
    if (name == kWritesNames[i]) {
      detail::writes = static_cast<Writes>(i);
      return true;
    }
  return false;
}
inline Writes writes() { return detail::writes; }

// The bytes, from its start, that a model writes of a block of `size`.
inline std::size_t written_bytes(std::size_t size) {
  switch (detail::writes) {
    case Writes::Lines:
      return size < kWritesLinesBytes ? size : kWritesLinesBytes;
    case Writes::Page:
      return size < kTouchPage ? size : kTouchPage;
    case Writes::All:
      break;
  }
  return size;
}

inline void touch_pages(void* p, std::size_t size, unsigned char value = 1) {
  if (size == 0) return;
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (std::size_t off = 0; off < size; off += kTouchPage) bytes[off] = value;
  bytes[size - 1] = value;
}

// A block of `size` just allocated, used as an application would: one byte in every page of what
// the `writes` setting says is written (all of it by default).
inline void touch_block(void* p, std::size_t size, unsigned char value = 1) { touch_pages(p, written_bytes(size), value); }

// The first `size` bytes of a block filled with `value`, as far as the `writes` setting says.
inline void fill_block(void* p, int value, std::size_t size) { std::memset(p, value, written_bytes(size)); }

// A consumer reads what it was handed; the returned sum keeps the reads from being optimised away.
inline unsigned read_pages(const void* p, std::size_t size) {
  auto* bytes = static_cast<const volatile unsigned char*>(p);
  unsigned sum = 0;
  for (std::size_t off = 0; off < size; off += kTouchPage) sum += bytes[off];
  return sum;
}

}  // namespace allocmark::workloads
