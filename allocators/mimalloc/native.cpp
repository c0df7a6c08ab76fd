// mimalloc: mi_process_info, mi_option_get, mi_collect (found with dlsym, never linked).
#include "allocators/dlsym.h"
#include "allocators/native_backends.h"

#include <mimalloc.h>

#include <iterator>
#include <string>
#include <utility>

namespace allocmark::allocators {
namespace {

// MI_MALLOC_VERSION / mi_version(): major*100 + minor*10 + patch up to 2.x (2.0.9 -> 209, 1.7.9 ->
// 179), major*10000 + minor*100 + patch from 3.x (3.4.3 -> 30403), whose minor and patch outgrew a digit.
std::string format_version(int v) {
  if (v >= 10000) return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  return std::to_string(v / 100) + "." + std::to_string((v % 100) / 10) + "." + std::to_string(v % 10);
}

// The mi_option_t enumerators of the header allocmark is built against, by the name mimalloc
// reads them under (environment MIMALLOC_<NAME>). The numbering changes between mimalloc versions,
// so it is only valid for a library whose mi_version() equals MI_MALLOC_VERSION.
#if MI_MALLOC_VERSION / 10 == 20  // the 2.0.x header
#define ALLOCMARK_MI_OPTION(name) {#name, mi_option_##name}
constexpr std::pair<const char*, mi_option_t> kOptions[] = {
    ALLOCMARK_MI_OPTION(show_errors),
    ALLOCMARK_MI_OPTION(show_stats),
    ALLOCMARK_MI_OPTION(verbose),
    ALLOCMARK_MI_OPTION(eager_commit),
    ALLOCMARK_MI_OPTION(deprecated_eager_region_commit),
    ALLOCMARK_MI_OPTION(deprecated_reset_decommits),
    ALLOCMARK_MI_OPTION(large_os_pages),
    ALLOCMARK_MI_OPTION(reserve_huge_os_pages),
    ALLOCMARK_MI_OPTION(reserve_huge_os_pages_at),
    ALLOCMARK_MI_OPTION(reserve_os_memory),
    ALLOCMARK_MI_OPTION(deprecated_segment_cache),
    ALLOCMARK_MI_OPTION(page_reset),
    ALLOCMARK_MI_OPTION(abandoned_page_decommit),
    ALLOCMARK_MI_OPTION(deprecated_segment_reset),
    ALLOCMARK_MI_OPTION(eager_commit_delay),
    ALLOCMARK_MI_OPTION(decommit_delay),
    ALLOCMARK_MI_OPTION(use_numa_nodes),
    ALLOCMARK_MI_OPTION(limit_os_alloc),
    ALLOCMARK_MI_OPTION(os_tag),
    ALLOCMARK_MI_OPTION(max_errors),
    ALLOCMARK_MI_OPTION(max_warnings),
    ALLOCMARK_MI_OPTION(max_segment_reclaim),
    ALLOCMARK_MI_OPTION(allow_decommit),
    ALLOCMARK_MI_OPTION(segment_decommit_delay),
    ALLOCMARK_MI_OPTION(decommit_extend_delay),
    ALLOCMARK_MI_OPTION(destroy_on_exit),
};
#undef ALLOCMARK_MI_OPTION
static_assert(std::size(kOptions) == _mi_option_last, "mimalloc.h has options this table lacks");
constexpr bool kHaveOptionTable = true;
#else
constexpr std::pair<const char*, mi_option_t> kOptions[1] = {};
constexpr bool kHaveOptionTable = false;
#endif

// mi_process_info's figures after the three times it also gives: the same eight size_t
// out-parameters with the same meaning on Linux in 1.8.9, 2.0.9, 2.2.7 and 3.4.3 (each release's
// src/stats.c and src/prim/unix/prim.c), so they are read from every release; no struct whose layout
// changes by version (mi_stats_t) is read. On Linux current_rss is only mimalloc's committed-bytes
// estimate (== current_commit), peak_rss is ru_maxrss (true peak RSS), page_faults is ru_majflt
// (major faults only). The committed counts are mimalloc's own int64 counters handed out as size_t:
// 2.2.7's went negative in a run (issue 43), which put_figure turns into a reason, not a number.
struct ProcessFigure {
  const char* name;
  bool bytes;
};
constexpr ProcessFigure kProcessFigures[] = {
    {"current_rss", true}, {"peak_rss", true}, {"current_commit", true}, {"peak_commit", true}, {"page_faults", false}};

nlohmann::json read_stats() {
  nlohmann::json s = nlohmann::json::object();
  auto* version = find_symbol<decltype(mi_version)>("mi_version");
  if (version == nullptr) return s;  // no mimalloc loaded: not exposed
  const std::string who = "mimalloc " + format_version(version());
  auto* info = find_symbol<decltype(mi_process_info)>("mi_process_info");
  if (info == nullptr) {  // releases before mi_process_info existed: say so per figure, never 0
    for (const auto& f : kProcessFigures) put_absent(s, f.name, who + " exports no mi_process_info");
    return s;
  }
  std::size_t elapsed = 0, user = 0, system = 0, v[std::size(kProcessFigures)] = {};
  info(&elapsed, &user, &system, &v[0], &v[1], &v[2], &v[3], &v[4]);
  for (std::size_t i = 0; i < std::size(kProcessFigures); ++i)
    put_figure(s, kProcessFigures[i].name, v[i], kProcessFigures[i].bytes, who);
  return s;
}

// mimalloc counts no lock contention.
nlohmann::json read_contention() { return nlohmann::json::object(); }

nlohmann::json read_options() {
  nlohmann::json o = nlohmann::json::object();
  auto* version = find_symbol<decltype(mi_version)>("mi_version");
  auto* get = find_symbol<decltype(mi_option_get)>("mi_option_get");
  if (version == nullptr || get == nullptr) return o;
  const int v = version();
  if (v == MI_MALLOC_VERSION && !kHaveOptionTable) {
    o["unverified"] = "allocmark has no option table for mimalloc " + format_version(v);
    return o;
  }
  if (v != MI_MALLOC_VERSION) {
    o["unverified"] = "mimalloc version " + format_version(v) +
                      " differs from the header allocmark was built against (" +
                      format_version(MI_MALLOC_VERSION) + ")";
    return o;
  }
  for (const auto& [name, option] : kOptions) o[name] = get(option);
  return o;
}

bool purge() {
  auto* collect = find_symbol<decltype(mi_collect)>("mi_collect");
  if (collect == nullptr) return false;
  collect(true);
  return true;
}

std::string version() {
  auto* v = find_symbol<decltype(mi_version)>("mi_version");
  return v != nullptr ? format_version(v()) : "";
}

}  // namespace

constexpr NativeApi kMimallocApi{"mimalloc", &read_stats, &read_contention, &read_options, &purge,
                             &version};

const Backend kMimallocBackend{
    "mimalloc", "Microsoft mimalloc", {"libmimalloc.so.2"}, "mi_version", "libmimalloc2.0",
    {}, {"MIMALLOC_"},  // every option is MIMALLOC_<NAME> (src/options.c)
    &kMimallocApi,
    {},
    // src/options.c, mi_option_init: it then keeps the option's default.
    "^mimalloc: warning: environment option .* has an invalid value"};

}  // namespace allocmark::allocators
