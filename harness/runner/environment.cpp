#include "harness/runner/environment.h"

#include "allocators/backends.h"
#include "harness/metrics/proc.h"
#include "harness/runner/process.h"

extern char** environ;

namespace allocmark::runner {

namespace {
bool strip(const std::string& entry) {
  return allocators::is_allocator_env(entry.substr(0, entry.find('=')));
}
}  // namespace

void apply_thp_mode(const matrix::ResolvedAllocator& allocator, SpawnOptions& options) {
  if (allocator.thp.empty()) return;
  // The record says how the cell got its mode (thp_obtained_by): the same rule decides it here.
  if (record::thp_obtained_by(allocator.thp) == record::kThpHowPrctl) {
    options.thp_disable = true;
    return;
  }
  const std::string here = metrics::thp_enabled_mode();
  if (here != allocator.thp)
    options.refuse = "this cell runs under transparent huge pages '" + allocator.thp + "', but this host's mode is '" + here +
                     "' (/sys/kernel/mm/transparent_hugepage/enabled); only 'never' is set per cell";
}

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
