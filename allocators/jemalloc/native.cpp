// jemalloc: everything through mallctl (found with dlsym, never linked). Names checked against
// jemalloc 5.3 (doc/jemalloc.xml.in, src/ctl.c, include/jemalloc/internal/mutex_prof.h) and, for
// releases built from source (docs/versions.md), 4.x's; a name this build's mallctl rejects is
// skipped, so a figure an old release lacks is absent from the record, never 0.
#include "allocators/dlsym.h"
#include "allocators/native_backends.h"

#include <jemalloc/jemalloc.h>
#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

// MALLCTL_ARENAS_ALL as text: "<i>" in stats.arenas.<i>.* / arena.<i>.* meaning all arenas merged.
#define ALLOCMARK_JE_ALL_ARENAS "4096"
static_assert(MALLCTL_ARENAS_ALL == 4096, "update ALLOCMARK_JE_ALL_ARENAS");

namespace allocmark::allocators {
namespace {

using MallctlFn = decltype(mallctl);

MallctlFn* find_mallctl() { return find_symbol<MallctlFn>("mallctl"); }

template <class T>
std::optional<T> get(MallctlFn* ctl, const std::string& name) {
  T value{};
  std::size_t size = sizeof(value);
  if (ctl(name.c_str(), &value, &size, nullptr, 0) != 0 || size != sizeof(value)) return std::nullopt;
  return value;
}

// Statistics are snapshots taken at the last "epoch" write.
void refresh(MallctlFn* ctl) {
  std::uint64_t epoch = 1;
  std::size_t size = sizeof(epoch);
  ctl("epoch", &epoch, &size, &epoch, sizeof(epoch));
}

template <class T>
void put(nlohmann::json& out, const char* key, std::optional<T> v) {
  if (v) out[key] = *v;
}

nlohmann::json read_stats() {
  nlohmann::json s = nlohmann::json::object();
  MallctlFn* ctl = find_mallctl();
  if (ctl == nullptr) return s;
  refresh(ctl);
  for (const char* name : {"stats.allocated", "stats.active", "stats.metadata", "stats.resident",
                           "stats.mapped", "stats.retained"}) {
    put(s, name, get<std::size_t>(ctl, name));
  }
  put(s, "arenas.narenas", get<unsigned>(ctl, "arenas.narenas"));
  return s;
}

// One mutex's profiling counters (stats.mutexes.<name>.*, stats.arenas.<i>.mutexes.<name>.*,
// stats.arenas.<i>.bins.<j>.mutex.*).
struct MutexStats {
  std::uint64_t num_ops = 0;
  std::uint64_t num_wait = 0;
  std::uint64_t num_spin_acq = 0;
  std::uint64_t num_owner_switch = 0;
  std::uint64_t total_wait_ns = 0;
  std::uint64_t max_wait_ns = 0;
  std::uint32_t max_num_thds = 0;

  void merge(const MutexStats& o) {
    num_ops += o.num_ops;
    num_wait += o.num_wait;
    num_spin_acq += o.num_spin_acq;
    num_owner_switch += o.num_owner_switch;
    total_wait_ns += o.total_wait_ns;
    max_wait_ns = std::max(max_wait_ns, o.max_wait_ns);
    max_num_thds = std::max(max_num_thds, o.max_num_thds);
  }

  nlohmann::json to_json() const {
    return {{"num_ops", num_ops},           {"num_wait", num_wait},
            {"num_spin_acq", num_spin_acq}, {"num_owner_switch", num_owner_switch},
            {"total_wait_ns", total_wait_ns}, {"max_wait_ns", max_wait_ns},
            {"max_num_thds", max_num_thds}};
  }
};

// nullopt when mallctl does not know the mutex (e.g. a name another jemalloc version lacks).
std::optional<MutexStats> read_mutex(MallctlFn* ctl, const std::string& prefix) {
  auto ops = get<std::uint64_t>(ctl, prefix + ".num_ops");
  if (!ops) return std::nullopt;
  MutexStats m;
  m.num_ops = *ops;
  m.num_wait = get<std::uint64_t>(ctl, prefix + ".num_wait").value_or(0);
  m.num_spin_acq = get<std::uint64_t>(ctl, prefix + ".num_spin_acq").value_or(0);
  m.num_owner_switch = get<std::uint64_t>(ctl, prefix + ".num_owner_switch").value_or(0);
  m.total_wait_ns = get<std::uint64_t>(ctl, prefix + ".total_wait_time").value_or(0);
  m.max_wait_ns = get<std::uint64_t>(ctl, prefix + ".max_wait_time").value_or(0);
  m.max_num_thds = get<std::uint32_t>(ctl, prefix + ".max_num_thds").value_or(0);
  return m;
}

// MUTEX_PROF_GLOBAL_MUTEXES and MUTEX_PROF_ARENA_MUTEXES of jemalloc 5.3.
constexpr const char* kGlobalMutexes[] = {
    "background_thread", "max_per_bg_thd",    "ctl",              "prof",      "prof_thds_data",
    "prof_dump",         "prof_recent_alloc", "prof_recent_dump", "prof_stats"};
constexpr const char* kArenaMutexes[] = {
    "large",       "extent_avail", "extents_dirty", "extents_muzzy", "extents_retained", "decay_dirty",
    "decay_muzzy", "base",         "tcache_list",   "hpa_shard",     "hpa_shard_grow",   "hpa_sec"};

nlohmann::json read_contention() {
  MallctlFn* ctl = find_mallctl();
  if (ctl == nullptr) return nlohmann::json::object();
  refresh(ctl);

  MutexStats total;
  nlohmann::json mutexes = nlohmann::json::object();
  bool known = false;  // whether this release profiles its mutexes at all (5.1 and later)
  auto add = [&](const std::string& name, const MutexStats& m) {
    known = true;
    if (m.num_ops == 0) return;
    total.merge(m);
    mutexes[name] = m.to_json();
  };
  for (const char* name : kGlobalMutexes) {
    if (auto m = read_mutex(ctl, std::string("stats.mutexes.") + name)) add(name, *m);
  }
  const std::string arena_prefix = "stats.arenas." ALLOCMARK_JE_ALL_ARENAS;
  for (const char* name : kArenaMutexes) {
    if (auto m = read_mutex(ctl, arena_prefix + ".mutexes." + name)) add(name, *m);
  }
  // The per-size-class bin locks, summed into one entry.
  MutexStats bins;
  const unsigned nbins = get<unsigned>(ctl, "arenas.nbins").value_or(0);
  for (unsigned j = 0; j < nbins; ++j) {
    if (auto m = read_mutex(ctl, arena_prefix + ".bins." + std::to_string(j) + ".mutex")) bins.merge(*m);
  }
  if (nbins != 0 && read_mutex(ctl, arena_prefix + ".bins.0.mutex")) add("bins", bins);
  // A release without mutex profiling (jemalloc 4.x, 5.0) counts nothing: say so (an empty object,
  // as for an allocator without counters) rather than report zero waits.
  if (!known) return nlohmann::json::object();

  return {{"num_ops", total.num_ops},
          {"num_wait", total.num_wait},
          {"total_wait_ns", total.total_wait_ns},
          {"mutexes", std::move(mutexes)}};
}

nlohmann::json read_options() {
  nlohmann::json o = nlohmann::json::object();
  MallctlFn* ctl = find_mallctl();
  if (ctl == nullptr) return o;
  put(o, "opt.background_thread", get<bool>(ctl, "opt.background_thread"));
  put(o, "background_thread", get<bool>(ctl, "background_thread"));  // current state
  put(o, "opt.dirty_decay_ms", get<ssize_t>(ctl, "opt.dirty_decay_ms"));
  put(o, "opt.muzzy_decay_ms", get<ssize_t>(ctl, "opt.muzzy_decay_ms"));
  // jemalloc 4.x's purging options, which 5.0 replaced by the two decays above.
  put(o, "opt.decay_time", get<ssize_t>(ctl, "opt.decay_time"));
  put(o, "opt.lg_dirty_mult", get<ssize_t>(ctl, "opt.lg_dirty_mult"));
  put(o, "opt.narenas", get<unsigned>(ctl, "opt.narenas"));
  put(o, "opt.tcache", get<bool>(ctl, "opt.tcache"));
  for (const char* name : {"opt.metadata_thp", "opt.thp", "opt.percpu_arena", "opt.purge"}) {
    auto s = get<const char*>(ctl, name);
    if (s && *s != nullptr) o[name] = std::string(*s);
  }
  return o;
}

bool purge() {
  MallctlFn* ctl = find_mallctl();
  if (ctl == nullptr) return false;
  if (ctl("arena." ALLOCMARK_JE_ALL_ARENAS ".purge", nullptr, nullptr, nullptr, 0) == 0) return true;
  // jemalloc 4.x named all arenas by their count (arena.<narenas>.purge); 5.0 made it 4096.
  const auto narenas = get<unsigned>(ctl, "arenas.narenas");
  return narenas && ctl(("arena." + std::to_string(*narenas) + ".purge").c_str(), nullptr, nullptr, nullptr, 0) == 0;
}

std::string version() {
  MallctlFn* ctl = find_mallctl();
  if (ctl == nullptr) return "";
  auto v = get<const char*>(ctl, "version");
  return v && *v != nullptr ? *v : "";
}

}  // namespace

constexpr NativeApi kJemallocApi{"jemalloc", &read_stats, &read_contention, &read_options, &purge,
                             &version};

const Backend kJemallocBackend{
    "jemalloc", "jemalloc (Debian's build, stats compiled in)", {"libjemalloc.so.2"}, "mallctl", "libjemalloc2",
    // MALLOC_CONF for unprefixed builds (Debian's), JE_MALLOC_CONF for --with-jemalloc-prefix=je_,
    // _RJEM_MALLOC_CONF for Rust's tikv-jemallocator builds.
    {"MALLOC_CONF", "JE_MALLOC_CONF", "_RJEM_MALLOC_CONF"},
    {"JE_MALLOC_"},
    &kJemallocApi,
    {},
    // src/jemalloc.c, malloc_conf_error: it then runs on the defaults.
    "^<jemalloc>: (Invalid conf|Malformed conf|Conf string ends)"};

}  // namespace allocmark::allocators
