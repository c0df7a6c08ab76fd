// replay: a recorded program's allocations, replayed (issue 26; docs/workloads/replay.md). A trace
// (harness/trace/format.h, `allocmark trace record`) holds each traced thread's allocation calls in
// its order; the replay runs one crew thread per traced thread, each calling what its thread
// called (malloc, calloc, realloc, posix_memalign, operator new, sized and aligned delete, ...) with
// the recorded sizes, so every allocator sees the program's calls without the program's work.
//
// Blocks are named by the trace's ids; an id -> pointer table (one atomic pointer per id, mapped
// and written before the phases, so it is part of the idle baseline) hands a block from the thread
// that allocated it to the one that frees it. A free of a block another thread has not allocated
// yet waits for it (the recording's order across threads is not kept otherwise); a wait longer
// than the limit fails the cell naming thread, id and phase. The events stay encoded as recorded
// (a few bytes each) and are decoded during the phase.
#include "workloads/replay.h"

#include <malloc.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "harness/trace/format.h"
#include "harness/trace/phase_marks.h"
#include "units/input_file.h"
#include "workloads/call_latency.h"
#include "workloads/touch.h"
#include "harness/os/clock.h"

namespace allocmark::workloads {
namespace {

namespace tr = allocmark::trace;
using tr::Op;

std::atomic<int64_t> g_wait_limit_ns{10'000'000'000};

uint64_t now_ns() { return static_cast<uint64_t>(allocmark::os::monotonic_ns()); }

// Keeps the compiler from removing an allocation whose block is never used (a recorded failure's
// result, freed at once): a malloc/free pair it can see may otherwise go.
inline void escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

constexpr const char* kDigestParam = "trace_sha256";

// The phase names a trace gives: "run" without marks, else "startup" and each mark's name, a
// repeated one made unique (load, load#2), as a program cell's marks are (trace/phase_marks.h).
std::vector<std::string> phase_names_of(const tr::Trace& t) { return tr::phase_names_for_marks(t.phase_names); }

// What the plan needs of a trace (its threads), read once per file version: validate() and
// own_threads() both ask, and reading a large trace takes a while.
struct TraceSummary {
  int threads = 0;
  std::string problem;
};

TraceSummary summary_of(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, TraceSummary> cache;
  struct stat st{};
  std::string version;
  if (::stat(path.c_str(), &st) == 0)
    version = std::to_string(st.st_size) + "/" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(path, version);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  TraceSummary s;
  try {
    tr::Trace t = tr::read_trace(path);
    s.threads = static_cast<int>(t.threads.size());
    if (t.threads.empty()) s.problem = "replay.trace: " + path + " records no thread (nothing to replay)";
  } catch (const std::exception& e) {
    s.problem = std::string("replay.trace: ") + e.what();  // the codec's messages name the file and offset
  }
  return cache[key] = s;
}

enum class Touch { First, All, None };

// The trace's path, once its contents are still those the plan pinned (pin_trace): a file replaced
// since then is another trace, never recorded as this cell.
std::string checked_path(const Params& p) {
  const std::string& path = p.text("trace");
  std::string pinned;
  try {
    pinned = p.text(kDigestParam);
  } catch (const std::out_of_range&) {  // a cell description from before digests: nothing pinned
  }
  if (!pinned.empty())
    if (std::string now = units::file_sha256(path, "replay.trace"); now != pinned)
      throw std::runtime_error("replay.trace: " + path + " changed since the matrix was planned (sha256 " + pinned.substr(0, 12) +
                               "..., now " + now.substr(0, 12) + "...): it is another trace; plan the run again");
  return path;
}

class Replay final : public Workload {
 public:
  Replay(const Params& p, int threads, const WorkloadEnv&)
      : path_(checked_path(p)),
        recorded_speed_(p.text("speed") == "recorded"),
        touch_(p.text("touch") == "all" ? Touch::All : p.text("touch") == "none" ? Touch::None : Touch::First),
        trace_(tr::read_trace(path_)),
        phases_(phase_names_of(trace_)),
        states_(static_cast<std::size_t>(threads)) {
    if (static_cast<std::size_t>(threads) != trace_.threads.size())
      throw std::runtime_error("replay: " + path_ + " records " + std::to_string(trace_.threads.size()) +
                               " threads; the cell runs " + std::to_string(threads));
    for (std::size_t i = 0; i < states_.size(); ++i) states_[i].cursor = trace_.threads[i].cursor();
    map_table();
    note_aligned_news();
  }

  ~Replay() override {
    teardown();
    if (table_) ::munmap(table_, table_bytes_);
  }

  const std::vector<std::string>& phases() const override { return phases_; }

  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override {
    ThreadState& s = states_[static_cast<std::size_t>(ctx.index)];
    s.counts = PhaseCounts{};
    if (s.done || s.epoch > phase) return 0;
    // speed = recorded: event times are kept relative to the phase's start (its mark), never earlier.
    const uint64_t phase_start_us = phase == 0 ? 0 : trace_.phase_times_us[phase - 1];
    const uint64_t wall_start_ns = now_ns();
    tr::Event e;
    while (true) {
      if (!s.cursor.next(e)) {
        s.done = true;
        break;
      }
      if (e.op == Op::Phase) {
        s.epoch = e.epoch;
        if (s.epoch > phase) break;  // the rest is the next phase's (or a later one's)
        continue;
      }
      if (recorded_speed_ && e.time_us > phase_start_us) {
        const uint64_t due = wall_start_ns + (e.time_us - phase_start_us) * 1000;
        if (now_ns() < due) sleep_until(due);
      }
      replay(e, ctx, phase);
      ++s.counts.events;
    }
    ctx.live.flush();
    return s.counts.events;
  }

  nlohmann::json phase_metrics(std::size_t) override {
    PhaseCounts all;
    for (const auto& s : states_) {
      all.events += s.counts.events;
      all.waits += s.counts.waits;
      all.wait_ns += s.counts.wait_ns;
      all.max_wait_ns = std::max(all.max_wait_ns, s.counts.max_wait_ns);
      all.null_results += s.counts.null_results;
    }
    return {{"events", all.events},
            {"waits", all.waits},
            {"wait_ms", static_cast<double>(all.wait_ns) / 1e6},
            {"max_wait_us", static_cast<double>(all.max_wait_ns) / 1e3},
            {"recorded_failures", all.null_results}};
  }

  // Frees every block still held, with the function that matches how it was allocated (the
  // events are walked again to learn it): outside measurement.
  void teardown() override {
    if (!table_) return;
    for (const auto& thread : trace_.threads) {
      tr::EventCursor c = thread.cursor();
      tr::Event e;
      while (c.next(e)) {
        if (e.op == Op::Realloc) {
          if (e.id != 0) std::free(take_now(e.id));
          continue;
        }
        // (A failed realloc, id 0, left its old block under the old id: freed with its allocation.)
        if (!tr::is_alloc(e.op) || e.id == 0) continue;
        if (void* p = take_now(e.id)) release_block(e.op, p, e.size, e.align);
      }
    }
  }

  uint64_t live_blocks() const {
    uint64_t n = 0;
    for (uint64_t id = 0; id <= trace_.max_id; ++id) n += table_[id].load(std::memory_order_relaxed) != nullptr;
    return n;
  }

 private:
  struct PhaseCounts {
    uint64_t events = 0, waits = 0, wait_ns = 0, max_wait_ns = 0, null_results = 0;
  };
  struct alignas(64) ThreadState {
    tr::EventCursor cursor{nullptr, nullptr};
    uint64_t epoch = 0;  // the phase the thread's next events belong to
    bool done = false;
    PhaseCounts counts;
  };

  // One atomic pointer per id, 0..max_id, every page written now: the table is in the idle
  // baseline, not in a phase's peak.
  void map_table() {
    table_bytes_ = (trace_.max_id + 1) * sizeof(std::atomic<void*>);
    void* m = ::mmap(nullptr, table_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      throw std::runtime_error("replay: cannot map the id table (" + std::to_string(table_bytes_) +
                               " bytes): " + std::strerror(errno));
    table_ = static_cast<std::atomic<void*>*>(m);
    for (uint64_t id = 0; id <= trace_.max_id; ++id) new (&table_[id]) std::atomic<void*>(nullptr);
    touch_pages(table_, table_bytes_, 0);
  }

  // Aligned deletes need the alignment the block was allocated with, which a free event does not
  // carry: the ids of aligned operator new calls, sorted, with theirs (read-only in the phases).
  void note_aligned_news() {
    for (const auto& thread : trace_.threads) {
      tr::EventCursor c = thread.cursor();
      tr::Event e;
      while (c.next(e))
        if ((e.op == Op::NewAligned || e.op == Op::NewArrayAligned) && e.id != 0) aligned_.emplace_back(e.id, e.align);
    }
    std::sort(aligned_.begin(), aligned_.end());
  }

  std::size_t alignment_of(uint64_t id) const {
    auto it = std::lower_bound(aligned_.begin(), aligned_.end(), std::make_pair(id, uint64_t{0}));
    return it != aligned_.end() && it->first == id ? it->second : __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  }

  void* take_now(uint64_t id) { return table_[id].exchange(nullptr, std::memory_order_relaxed); }

  static void sleep_until(uint64_t due_ns) {
    timespec ts{static_cast<time_t>(due_ns / 1000000000u), static_cast<long>(due_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }

  // The block of `id`, waiting while another thread has not allocated it yet.
  void* await(uint64_t id, ThreadContext& ctx, std::size_t phase) {
    std::atomic<void*>& slot = table_[id];
    void* p = slot.load(std::memory_order_acquire);
    if (p) [[likely]] {
      slot.store(nullptr, std::memory_order_relaxed);
      return p;
    }
    const uint64_t t0 = now_ns();
    const int64_t limit = g_wait_limit_ns.load(std::memory_order_relaxed);
    for (unsigned spin = 0;; ++spin) {
      if (spin < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else if (spin < 1024) {
        sched_yield();
      } else {
        timespec ts{0, 50'000};
        nanosleep(&ts, nullptr);
      }
      p = slot.load(std::memory_order_acquire);
      if (p) break;
      if (spin % 64 == 63 && static_cast<int64_t>(now_ns() - t0) > limit) wait_failed(id, ctx, phase, limit);
    }
    slot.store(nullptr, std::memory_order_relaxed);
    const uint64_t waited = now_ns() - t0;
    PhaseCounts& c = states_[static_cast<std::size_t>(ctx.index)].counts;
    ++c.waits;
    c.wait_ns += waited;
    c.max_wait_ns = std::max(c.max_wait_ns, waited);
    return p;
  }

  [[noreturn]] void wait_failed(uint64_t id, const ThreadContext& ctx, std::size_t phase, int64_t limit) const {
    std::fprintf(stderr,
                 "replay: thread %d waited %.1f s in phase '%s' to free object %llu, which no other thread has "
                 "allocated: the trace %s cannot be replayed in this order (the thread that allocates it may be "
                 "waiting too, or allocates it in a later phase)\n",
                 ctx.index, static_cast<double>(limit) / 1e9, phases_[phase].c_str(),
                 static_cast<unsigned long long>(id), path_.c_str());
    std::fflush(stderr);
    std::_Exit(3);  // the cell fails with this message as its log's tail
  }

  [[noreturn]] void replay_failed(const tr::Event& e, const ThreadContext& ctx, std::size_t phase) const {
    std::fprintf(stderr,
                 "replay: %s of %llu bytes failed in thread %d, phase '%s' (object %llu), where the recorded "
                 "program's succeeded\n",
                 std::string(tr::op_name(e.op)).c_str(), static_cast<unsigned long long>(e.size), ctx.index,
                 phases_[phase].c_str(), static_cast<unsigned long long>(e.id));
    std::fflush(stderr);
    std::_Exit(3);
  }

  // The call the program made, with its arguments; NULL where it failed.
  static void* call_alloc(Op op, std::size_t size, std::size_t align) {
    switch (op) {
      case Op::Malloc: return workloads::allocate(size);
      case Op::Calloc: return allocate_by(size, [size] { return std::calloc(1, size); });
      case Op::PosixMemalign:
        return allocate_by(size, [size, align] {
          void* p = nullptr;
          return ::posix_memalign(&p, align, size) == 0 ? p : nullptr;
        });
      case Op::AlignedAlloc: return allocate_by(size, [size, align] { return std::aligned_alloc(align, size); });
      case Op::Memalign: return allocate_by(size, [size, align] { return ::memalign(align, size); });
      case Op::Valloc: return allocate_by(size, [size] { return ::valloc(size); });
      case Op::Pvalloc: return allocate_by(size, [size] { return ::pvalloc(size); });
      case Op::New:
        return allocate_by(size, [size]() -> void* {
          try {
            return ::operator new(size);
          } catch (const std::bad_alloc&) {
            return nullptr;
          }
        });
      case Op::NewArray:
        return allocate_by(size, [size]() -> void* {
          try {
            return ::operator new[](size);
          } catch (const std::bad_alloc&) {
            return nullptr;
          }
        });
      case Op::NewAligned:
        return allocate_by(size, [size, align]() -> void* {
          try {
            return ::operator new(size, std::align_val_t(align));
          } catch (const std::bad_alloc&) {
            return nullptr;
          }
        });
      case Op::NewArrayAligned:
        return allocate_by(size, [size, align]() -> void* {
          try {
            return ::operator new[](size, std::align_val_t(align));
          } catch (const std::bad_alloc&) {
            return nullptr;
          }
        });
      default: return nullptr;
    }
  }

  // Frees a block the way one allocated by `alloc_op` is freed (a recorded failure's result, teardown).
  static void release_block(Op alloc_op, void* p, std::size_t size, std::size_t align) {
    switch (alloc_op) {
      case Op::New: ::operator delete(p, size); break;
      case Op::NewArray: ::operator delete[](p, size); break;
      case Op::NewAligned: ::operator delete(p, size, std::align_val_t(align)); break;
      case Op::NewArrayAligned: ::operator delete[](p, size, std::align_val_t(align)); break;
      default: std::free(p);
    }
  }

  void call_free(Op op, void* p, std::size_t size, uint64_t id) {
    switch (op) {
      case Op::Free: workloads::release(p); break;
      case Op::Delete: release_by([p] { ::operator delete(p); }); break;
      case Op::DeleteArray: release_by([p] { ::operator delete[](p); }); break;
      case Op::DeleteSized: release_by([p, size] { ::operator delete(p, size); }); break;
      case Op::DeleteArraySized: release_by([p, size] { ::operator delete[](p, size); }); break;
      case Op::DeleteAligned: {
        const std::align_val_t a{alignment_of(id)};
        release_by([p, a] { ::operator delete(p, a); });
        break;
      }
      case Op::DeleteArrayAligned: {
        const std::align_val_t a{alignment_of(id)};
        release_by([p, a] { ::operator delete[](p, a); });
        break;
      }
      default: std::free(p);
    }
  }

  void touch_new(void* p, std::size_t from, std::size_t to) const {
    if (to <= from) return;
    auto* bytes = static_cast<unsigned char*>(p);
    if (touch_ == Touch::First) touch_pages(bytes + from, to - from);
    else if (touch_ == Touch::All) std::memset(bytes + from, 0x5a, to - from);
  }

  void replay(const tr::Event& e, ThreadContext& ctx, std::size_t phase) {
    const auto size = static_cast<std::size_t>(e.size);
    if (tr::is_alloc(e.op)) {
      void* p = call_alloc(e.op, size, static_cast<std::size_t>(e.align));
      if (e.id == 0) {  // failed when recorded: the call again, its result discarded
        escape(p);
        ++states_[static_cast<std::size_t>(ctx.index)].counts.null_results;
        if (p) release_block(e.op, p, size, static_cast<std::size_t>(e.align));
        return;
      }
      if (!p) replay_failed(e, ctx, phase);
      touch_new(p, 0, size);
      table_[e.id].store(p, std::memory_order_release);
      ctx.live.add(static_cast<int64_t>(size));
      return;
    }
    if (tr::is_free(e.op)) {
      void* p = e.id == 0 ? nullptr : await(e.id, ctx, phase);
      call_free(e.op, p, size, e.id);
      if (e.id != 0) ctx.live.add(-static_cast<int64_t>(size));
      return;
    }
    if (e.op == Op::Realloc) {
      const auto old_size = static_cast<std::size_t>(e.old_size);
      if (e.id == 0 && size != 0) {
        // Failed when recorded, which left the old block as it was (a later event frees it): a
        // call that would succeed here is not made, so the block stays where the program had it.
        ++states_[static_cast<std::size_t>(ctx.index)].counts.null_results;
        return;
      }
      void* old = e.old_id == 0 ? nullptr : await(e.old_id, ctx, phase);
      void* p = allocate_by(size, [old, size] { return std::realloc(old, size); });
      if (e.id == 0) {
        // realloc(p, 0) returned NULL: p is gone in the trace; an allocator that returns a
        // minimal block instead has it freed now.
        escape(p);
        if (p) std::free(p);
        if (old) ctx.live.add(-static_cast<int64_t>(old_size));
        return;
      }
      if (!p) replay_failed(e, ctx, phase);
      touch_new(p, old ? old_size : 0, size);
      table_[e.id].store(p, std::memory_order_release);
      ctx.live.add(static_cast<int64_t>(size) - static_cast<int64_t>(old ? old_size : 0));
    }
  }

  std::string path_;
  bool recorded_speed_;
  Touch touch_;
  tr::Trace trace_;
  std::vector<std::string> phases_;
  std::vector<ThreadState> states_;
  std::atomic<void*>* table_ = nullptr;
  std::size_t table_bytes_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> aligned_;
};

const bool registered = register_workload({
    replay::kWorkloadName,
    "a recorded program's allocation calls replayed, one thread per traced thread (allocmark trace record; issue "
    "26); phases: run, or startup and one per phase mark of the trace",
    {"run"},  // or "startup" and the trace's phase marks: each replay's phases() says
    {
        {"trace", ParamType::String, "", "", "the trace file to replay (allocmark trace record)"},
        {"name", ParamType::String, "", "", "what tables and charts call the trace (a matrix's [traces.NAME] sets it)"},
        {"speed", ParamType::String, "fast", "fast",
         "fast: each event as soon as the one before it; recorded: no event before its recorded time"},
        {"touch", ParamType::String, "first", "first",
         "first: write one byte per 4 KiB page of each new block; all: every byte; none"},
        {kDigestParam, ParamType::String, "", "",
         "the trace's SHA-256, set by the plan from the file (part of the cell's identity); a cell whose file changed since fails",
         /*input_digest=*/true},
    },
    [](const Params& p, int threads, const WorkloadEnv& env) { return std::make_unique<Replay>(p, threads, env); },
    [](const Params& p) -> std::string {
      const std::string& speed = p.text("speed");
      if (speed != "fast" && speed != "recorded") return "replay.speed: '" + speed + "' is not fast or recorded";
      const std::string& touch = p.text("touch");
      if (touch != "first" && touch != "all" && touch != "none")
        return "replay.touch: '" + touch + "' is not first, all or none";
      if (p.text("trace").empty()) return "replay.trace: name a trace file (allocmark trace record)";
      return summary_of(p.text("trace")).problem;
    },
    /*diagnostic=*/false,
    /*named_only=*/true,
    /*own_threads=*/[](const Params& p) { return summary_of(p.text("trace")).threads; },
    /*tracks_live_bytes=*/true,
    /*untracked_reason=*/"",
    /*ops_per_s_not_a_speed=*/{},
    /*instance_param=*/"name",
});

}  // namespace

namespace replay {

void set_wait_limit_ms(int64_t ms) { g_wait_limit_ns.store(ms * 1000000, std::memory_order_relaxed); }

void pin_trace(std::map<std::string, ParamValue>& values) {
  auto it = values.find("trace");
  if (it == values.end() || !std::holds_alternative<std::string>(it->second)) return;
  std::string& path = std::get<std::string>(it->second);
  if (path.empty()) return;  // validate() names it
  path = std::filesystem::absolute(path).lexically_normal().string();
  values[kDigestParam] = units::file_sha256(path, "replay.trace");
}

uint64_t live_blocks(const Workload& w) { return dynamic_cast<const Replay&>(w).live_blocks(); }

}  // namespace replay
}  // namespace allocmark::workloads
