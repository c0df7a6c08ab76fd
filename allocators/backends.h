// Driver-side description of each allocator backend: data, not code. A backend is found by its
// library's file name in the system library directories; what makes a library "of this kind" is
// a symbol only that allocator exports, which the worker checks after preloading it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace allocmark::allocators {

struct Backend {
  std::string name;                    // "jemalloc"
  std::string summary;
  std::vector<std::string> sonames;    // candidates, most capable first (absolute paths allowed); empty: the C library itself
  std::string signature_symbol;        // exported only by this kind ("mallctl"); "" for glibc/generic
  std::string debian_package;          // where the library comes from, for error messages
};

const std::vector<Backend>& backends();
const Backend* find_backend(std::string_view name);
// Names of all backends, comma separated, for error messages.
std::string backend_names();

// Absolute path of the first soname found in the library directories, or nullopt.
std::optional<std::string> locate_library(const std::string& soname);
std::vector<std::string> library_dirs();

// Environment variables that steer an allocator. The driver strips them from what it inherits, so
// that only a variant's own settings reach a worker and the results say exactly what ran.
bool is_allocator_env(std::string_view name);

}  // namespace allocmark::allocators
