#include "harness/runner/environment.h"

#include "allocators/backends.h"

extern char** environ;

namespace allocmark::runner {

namespace {
bool strip(const std::string& entry) {
  return allocators::is_allocator_env(entry.substr(0, entry.find('=')));
}
}  // namespace

std::vector<std::string> worker_environment(const matrix::ResolvedAllocator& allocator) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (!strip(*e)) env.emplace_back(*e);
  if (!allocator.library.empty()) env.push_back("LD_PRELOAD=" + allocator.library);
  for (const auto& [k, v] : allocator.env) env.push_back(k + "=" + v);
  if (const allocators::Backend* backend = allocators::find_backend(allocator.backend))
    for (const auto& [k, v] : backend->strict_env)
      if (!allocator.env.count(k)) env.push_back(k + "=" + v);
  return env;
}

std::vector<std::string> stripped_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e)
    if (strip(*e)) out.emplace_back(*e);
  return out;
}

}  // namespace allocmark::runner
