// numap: numap_stats / numap_option / numap_purge / numap_version (found with dlsym, never linked).
// Statistics: totals as flat keys, then "nodes" (per node) and "classes" (per node and size class,
// only those ever used), so a phase's alloc_stats say where the pages are.
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "allocators/dlsym.h"
#include "allocators/native_backends.h"
#include "allocators/numap/counters.h"
#include "allocators/numap/include/numap.h"

namespace allocmark::allocators {
namespace {

using StatsFn = decltype(numap_stats);

bool read_all(struct numap_stats& s, std::vector<numap_class_stats>& classes) {
  auto* fn = find_symbol<StatsFn>("numap_stats");
  if (fn == nullptr) return false;
  s = {};
  s.struct_size = sizeof s;
  std::size_t n = fn(&s, nullptr, 0);
  classes.resize(n);
  n = fn(&s, classes.data(), classes.size());
  classes.resize(std::min(n, classes.size()));
  return s.version != 0;
}

std::string class_name(const numap_class_stats& c) {
  const char* kind = c.kind == 0 ? "small" : c.kind == 2 ? "slabs" : "page";
  return "node" + std::to_string(c.node) + "." + kind + "." + std::to_string(c.size);
}

nlohmann::json read_stats() {
  nlohmann::json out = nlohmann::json::object();
  struct numap_stats s;
  std::vector<numap_class_stats> classes;
  if (!read_all(s, classes)) return out;
  // A library built before a total existed fills a shorter struct (struct_size is its own size):
  // a total past its end is left out, not reported as 0 (comparing against an older build).
#define NUMAP_ALLOC_STATS_KEY(name, counted_by, exit_line, alloc_stats) \
  NUMAP_WHEN(alloc_stats, if (offsetof(struct numap_stats, name) + sizeof s.name <= s.struct_size) out[#name] = s.name;)
  NUMAP_TOTALS(NUMAP_ALLOC_STATS_KEY)
#undef NUMAP_ALLOC_STATS_KEY
  nlohmann::json fallback = nlohmann::json::object();
  for (int i = 0; i < NUMAP_MAX_DISTANCES; ++i)
    if (s.fallback_distance[i] != 0) fallback[std::to_string(s.fallback_distance[i])] = s.fallback_count[i];
  out["fallback_by_distance"] = fallback;
  nlohmann::json nodes = nlohmann::json::object();
  for (uint32_t i = 0; i < s.nodes && i < NUMAP_MAX_NODES; ++i) {
    const numap_node_stats& n = s.node[i];
    nodes[std::to_string(i)] = {{"os_node", n.os_node},           {"capacity_bytes", n.capacity_bytes},
                                {"in_use_bytes", n.in_use_bytes}, {"mapped_bytes", n.mapped_bytes},
                                {"advised_bytes", n.advised_bytes}, {"fallback_in", n.fallback_in}};
  }
  out["nodes"] = nodes;
  nlohmann::json per = nlohmann::json::object();
  for (const auto& c : classes) {
    if (c.allocs == 0 && c.mapped_bytes == 0) continue;
    per[class_name(c)] = {{"in_use_bytes", c.in_use_bytes}, {"mapped_bytes", c.mapped_bytes},
                          {"advised_bytes", c.advised_bytes}, {"allocs", c.allocs}, {"frees", c.frees}};
  }
  out["classes"] = per;
  return out;
}

nlohmann::json read_contention() {
  struct numap_stats s;
  std::vector<numap_class_stats> classes;
  if (!read_all(s, classes)) return nlohmann::json::object();
  nlohmann::json mutexes = nlohmann::json::object();
  for (const auto& c : classes) {
    if (c.lock_acquisitions == 0) continue;
    mutexes[class_name(c)] = {{"num_ops", c.lock_acquisitions}, {"num_wait", c.lock_contended},
                              {"total_wait_ns", c.lock_wait_ns}};
  }
  return {{"num_ops", s.lock_acquisitions},
          {"num_wait", s.lock_contended},
          {"total_wait_ns", s.lock_wait_ns},
          {"mutexes", std::move(mutexes)}};
}

nlohmann::json read_options() {
  nlohmann::json o = nlohmann::json::object();
  auto* fn = find_symbol<decltype(numap_option)>("numap_option");
  if (fn == nullptr) return o;
  const char* name = nullptr;
  const char* text = nullptr;
  long long value = 0;
  for (std::size_t i = 0; fn(i, &name, &value, &text) != 0; ++i) {
    std::string key(name);
    for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (text != nullptr) o[key] = text; else o[key] = value;
  }
  return o;
}

bool purge() {
  auto* fn = find_symbol<decltype(numap_purge)>("numap_purge");
  if (fn == nullptr) return false;
  fn();
  return true;
}

std::string version() {
  auto* fn = find_symbol<decltype(numap_version)>("numap_version");
  return fn != nullptr ? fn() : "";
}

std::size_t explain_refusal(char* buf, std::size_t n, std::size_t asked) {
  // Resolved at the first call, which the worker makes before the workload starts (dlsym then).
  static StatsFn* const fn = find_symbol<StatsFn>("numap_stats");
  if (fn == nullptr || n == 0) return 0;
  struct numap_stats s = {};
  s.struct_size = sizeof s;
  fn(&s, nullptr, 0);
  if (s.capacity_bytes == 0 || s.enomem == 0) return 0;  // refused for another reason (the kernel's)
  const char* set = std::getenv("NUMAP_CAPACITY");
  char what[64];
  if (asked != 0) std::snprintf(what, sizeof what, "a request of %zu bytes", asked);
  else std::snprintf(what, sizeof what, "a request (operator new: its size not reported)");
  const int len = std::snprintf(buf, n,
                                "numap's capacity was exhausted: NUMAP_CAPACITY=%s allows %llu bytes, %llu were "
                                "charged (%llu in use) when %s was refused (ENOMEM); raise NUMAP_CAPACITY above "
                                "the workload's peak",
                                set != nullptr ? set : "(unset)", static_cast<unsigned long long>(s.capacity_bytes),
                                static_cast<unsigned long long>(s.mapped_bytes),
                                static_cast<unsigned long long>(s.in_use_bytes), what);
  return len <= 0 ? 0 : static_cast<std::size_t>(len) < n ? static_cast<std::size_t>(len) : n - 1;
}

}  // namespace

constexpr NativeApi kNumapApi{"numap", &read_stats, &read_contention, &read_options, &purge, &version,
                              &explain_refusal};

const Backend kNumapBackend{
    "numap", "in-tree NUMA-aware mmap size-class allocator (allocators/numap)",
    {"libnumap.so", ALLOCMARK_NUMAP_LIBRARY}, "numap_stats", "(built in this tree: make numap)",
    {}, {"NUMAP_"},  // allocators/numap/options.cpp: one options table, NUMAP_<NAME>
    &kNumapApi,
    // A host program gets a warning and the default for a bad NUMAP_* setting; a benchmark must not.
    {{"NUMAP_STRICT", "1"}}};

}  // namespace allocmark::allocators
