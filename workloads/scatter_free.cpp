// scatter_free: the huge-page failure behind issue 25's folklore. A long-lived structure of
// equal objects is built, then every other object of it is freed (scattered holes, each a few
// small pages), and the application asks the allocator to give free memory back. With 4 KiB pages
// a purge at page granularity returns the holes to the system. Where the structure sits in
// transparent huge pages (THP `always`, or an allocator that madvises MADV_HUGEPAGE), advising
// 4 KiB of a huge page away splits its mapping: the process's RSS falls as before, but the 2 MiB
// page stays allocated until the kernel's deferred split runs under memory pressure, so the
// system gets nothing back. The `purge` phase's THP events say which happened (every phase has
// them: thp_split_pmd, thp_deferred_split_page; system-wide), its RSS and huge-page bytes what the
// process kept. (The machine's MemFree is no witness: freed pages reach it late, through per-CPU
// lists.) khugepaged may also collapse the half-empty ranges again: `hold` shows it in RSS and
// huge-page bytes.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "workloads/call_latency.h"
#include "workloads/refused.h"
#include "workloads/workload.h"

namespace allocmark::workloads {
namespace {

enum Phase : std::size_t { kFill = 0, kScatter = 1, kPurge = 2, kHold = 3 };

void sleep_ms(int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

class ScatterFree final : public Workload {
 public:
  ScatterFree(const Params& p, int threads, const WorkloadEnv& env)
      : env_(env),
        object_(p.bytes("object_size")),
        keep_every_(static_cast<std::size_t>(p.integer("keep_every"))),
        hold_ms_(p.integer("hold_ms")),
        slots_(threads) {
    const uint64_t total = static_cast<uint64_t>(p.real("live_mib") * 1048576.0);
    const std::size_t per_thread = static_cast<std::size_t>(total / object_ / static_cast<uint64_t>(threads));
    for (auto& s : slots_) s.objects.assign(per_thread, nullptr);
  }

  const std::vector<std::string>& phases() const override {
    static const std::vector<std::string> names{"fill", "scatter", "purge", "hold"};
    return names;
  }

  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override {
    auto& objects = slots_[ctx.index].objects;
    uint64_t ops = 0;
    switch (phase) {
      case kFill:
        // Written whole, as a structure's objects are: every page of it resident.
        for (auto& o : objects) {
          o = workloads::allocate(object_);
          if (!o) allocation_refused(object_);
          std::memset(o, 0x5a, object_);
          ctx.live.add(static_cast<int64_t>(object_));
          ++ops;
        }
        break;
      case kScatter:
        // Every object but each keep_every-th goes: the holes lie between objects still in use.
        for (std::size_t i = 0; i < objects.size(); ++i) {
          if (i % keep_every_ == 0) continue;
          workloads::release(objects[i]);
          objects[i] = nullptr;
          ctx.live.add(-static_cast<int64_t>(object_));
          ++ops;
        }
        break;
      case kPurge:
        // The application's request to give free memory back (malloc_trim, an arena purge, ...).
        if (ctx.index == 0 && env_.purge) purged_ = env_.purge();
        break;
      case kHold:
        if (ctx.index == 0 && env_.rss_bytes) hold_rss_start_ = env_.rss_bytes();
        sleep_ms(hold_ms_);
        if (ctx.index == 0 && env_.rss_bytes) hold_rss_end_ = env_.rss_bytes();
        break;
    }
    ctx.live.flush();
    return ops;
  }

  nlohmann::json phase_metrics(std::size_t phase) override {
    nlohmann::json m = nlohmann::json::object();
    if (phase == kPurge) m["purge_supported"] = purged_;
    if (phase == kHold && env_.rss_bytes) {
      m["hold_rss_start_bytes"] = hold_rss_start_;
      m["hold_rss_end_bytes"] = hold_rss_end_;
    }
    return m;
  }

  void teardown() override {
    for (auto& s : slots_)
      for (auto& o : s.objects)
        if (o) workloads::release(o), o = nullptr;
  }

  ~ScatterFree() override { teardown(); }

 private:
  struct alignas(64) Slot {
    std::vector<void*> objects;
  };
  WorkloadEnv env_;
  std::size_t object_;
  std::size_t keep_every_;
  int64_t hold_ms_;
  std::vector<Slot> slots_;
  bool purged_ = false;
  uint64_t hold_rss_start_ = 0, hold_rss_end_ = 0;
};

const bool registered = register_workload({
    "scatter_free",
    "a long-lived structure freed every other object, then a purge: what a 4 KiB purge gives back "
    "to the system when the structure sits in transparent huge pages (issue 25)",
    {"fill", "scatter", "purge", "hold"},
    {
        {"live_mib", ParamType::Float, "64", "1024", "the structure's size over all threads, MiB"},
        {"object_size", ParamType::Bytes, "8K", "8K", "size of each object (8K: each hole is two 4 KiB pages)"},
        {"keep_every", ParamType::Int, "2", "2", "objects kept in scatter: one in N (2: every other)"},
        {"hold_ms", ParamType::Int, "2000", "30000",
         "length of hold (khugepaged scans every 10 s by default and may collapse half-empty ranges again)"},
    },
    [](const Params& p, int threads, const WorkloadEnv& env) { return std::make_unique<ScatterFree>(p, threads, env); },
    [](const Params& p) -> std::string {
      if (!(p.real("live_mib") > 0) || p.real("live_mib") > 1 << 20) return "live_mib must be within (0, 1048576]";
      if (p.bytes("object_size") < 16 || p.bytes("object_size") > (1ull << 30)) return "object_size must be within 16..1G";
      if (p.integer("keep_every") < 2) return "keep_every must be at least 2 (1 would free nothing)";
      if (p.integer("hold_ms") < 0) return "hold_ms must be >= 0";
      return "";
    },
});

}  // namespace
}  // namespace allocmark::workloads
