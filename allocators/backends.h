// The backend catalogue: one table per allocator, each defined beside its native reader in
// allocators/<backend>/native.cpp, listed once in backends.cpp. Adding a backend is one table
// (name, libraries, signature symbol, the environment it reads, its NativeApi, and how it says or
// hides a setting it cannot use) plus its native.cpp; the driver, the worker, the variant checks and the environment stripping all read
// these tables and nothing else.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <utility>

#include "allocators/native_api.h"

namespace allocmark::allocators {

// A variable whose malformed value the allocator ignores or misreads without a word: the form of a
// valid one.
struct EnvValueForm {
  std::string name;      // "MALLOC_ARENA_MAX"
  std::string pattern;   // ECMAScript regex the whole value must match
  std::string expected;  // "an unsigned integer (decimal, or 0x hex)", for the message
  // What the allocator does with a value of another form, for the message; "" is "would ignore
  // this value without a word" (glibc). gperftools reads the number a value starts with (0 where
  // none), so "banana" is not the default but 0.
  std::string otherwise = "";
};

struct Backend {
  std::string name;                    // "jemalloc"
  std::string summary;
  std::vector<std::string> sonames;    // candidates, most capable first (absolute paths allowed); empty: the C library itself
  std::string signature_symbol;        // exported only by this kind ("mallctl"); "" for glibc/generic
  std::string debian_package;          // where the library comes from, for error messages
  // Every environment variable the allocator reads (its documentation, checked against the strings
  // of Debian's library): exact names, and prefixes (ending in '_') that cover whole families.
  std::vector<std::string> env_names;
  std::vector<std::string> env_prefixes;
  const NativeApi* native = nullptr;   // the worker's reader of its own API; null: none (generic)
  // Set in every process of this backend (unless the variant sets it) so that a setting the
  // allocator cannot use stops it rather than running on defaults: a typo in a variant then fails
  // the run's preload probe (exit 2, the allocator's own message) before any cell runs. Not part
  // of the variant's environment (the cell key, the record's `env`).
  std::vector<std::pair<std::string, std::string>> strict_env;
  // The allocator's own line for a configuration it cannot use and then runs without (ECMAScript
  // regex, searched in each line it writes to standard error as it loads): the run's preload probe
  // fails on such a line, quoting it (exit 2 before any cell runs). "" where it says nothing.
  std::string invalid_config_line;
  // Values it reads and, when malformed, ignores or misreads silently: checked at plan time (exit 2
  // naming the variant and the variable) where the form is known.
  std::vector<EnvValueForm> env_value_forms;
  // No system library: only releases built from source (`allocmark build NAME@VERSION`,
  // allocators/releases/) run it, named NAME@VERSION; default matrices leave it out.
  bool from_source = false;
};

// "" when `value` of `name` has the form every backend that declares one for it expects, else
// "NAME=VALUE: expected ..." for the variant's message.
std::string env_value_problem(const std::string& name, const std::string& value);
// The first line of `output` (an allocator's standard error as it loaded) that `backend` uses to
// say its configuration is invalid; "" when none.
std::string invalid_config_line(const Backend& backend, const std::string& output);

const std::vector<const Backend*>& backends();
const Backend* find_backend(std::string_view name);
// Names of all backends, comma separated, for error messages.
std::string backend_names();

// Absolute path of the first soname found in the library directories, or nullopt.
std::optional<std::string> locate_library(const std::string& soname);
std::vector<std::string> library_dirs();

// True for a variable any backend reads, or LD_PRELOAD. The driver strips these from what it
// inherits, so that only a variant's own settings reach a worker and the results say what ran.
bool is_allocator_env(std::string_view name);
// "MALLOC_CONF, MALLOC_ARENA_MAX, ..., TCMALLOC_*, ..." for messages.
std::string allocator_env_summary();

}  // namespace allocmark::allocators
