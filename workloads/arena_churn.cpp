// arena_churn: the pattern behind seed 002 (a Tomcat service whose RSS grew 200+ MB beyond what the
// JVM tracked). A request pool of 8 x cores threads that exit and are replaced; each request makes
// 20-200 native allocations and sometimes a large buffer; a share of every request's objects is
// freed later by another thread (the JVM's finalizer / cleaner freeing Inflater and direct-buffer
// memory); a few objects live long and sit between the short-lived ones. Under glibc every pool
// thread gets its own arena (up to 8 x cores of them, 64 MiB heaps), each arena keeps its own
// high-water mark, and the long-lived objects stop the heaps from shrinking.
//
// The crew threads the worker runs are the pool's managers: crew thread i owns pool slots
// i, i + threads, ...; it starts a thread per slot, joins it when it has served its share of
// requests and starts its successor, and frees the objects the slot's threads hand over.
#include "workloads/arena_churn.h"
#include "workloads/call_latency.h"
#include "workloads/touch.h"
#include "workloads/refused.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace allocmark::workloads {

namespace {

enum Phase : std::size_t { kBurst = 0, kSteady = 1, kIdle = 2 };

// Java's default thread stack on x86-64 Linux (-Xss1m); the pool's threads use a fraction of it.
constexpr std::size_t kPoolStack = 1 << 20;

int log2_floor(std::size_t v) { return 63 - __builtin_clzll(v); }

// Log-uniform over [lo, hi] by power-of-two bands, uniform inside a band: small objects are as
// common per band as large ones, as in native heaps. Integer-only, so sizes never depend on libm.
std::size_t draw_size(Rng& rng, std::size_t lo, std::size_t hi) {
  int klo = log2_floor(lo), khi = log2_floor(std::max(lo, hi - 1));
  int k = klo + static_cast<int>(rng.below(static_cast<uint64_t>(khi - klo + 1)));
  std::size_t a = std::max<std::size_t>(lo, std::size_t{1} << k);
  std::size_t b = k == khi ? hi : std::min<std::size_t>(hi, (std::size_t{2} << k) - 1);
  return a + rng.below(b - a + 1);
}

double between(Rng& rng, double lo, double hi) { return lo + rng.uniform() * (hi - lo); }

void mix(uint64_t& trace, uint64_t v) { trace = (trace ^ v) * 0x100000001b3ULL; }

void sleep_us(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int online_cores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int64_t scaled(const Params& p, const char* name) {
  return std::max<int64_t>(0, std::llround(static_cast<double>(p.integer(name)) * p.real("scale")));
}

}  // namespace

ArenaChurn::ArenaChurn(const Params& p, int threads, const WorkloadEnv& env)
    : threads_(threads),
      pool_(p.integer("pool_threads") > 0 ? static_cast<int>(p.integer("pool_threads"))
                                          : static_cast<int>(p.integer("pool_per_core")) * online_cores()),
      steady_active_(std::max(1, static_cast<int>(std::ceil(pool_ * p.real("steady_active"))))),
      requests_{scaled(p, "burst_requests"), scaled(p, "steady_requests")},
      life_min_(p.integer("thread_life_min")),
      life_max_(p.integer("thread_life_max")),
      allocs_min_(p.integer("allocs_min")),
      allocs_max_(p.integer("allocs_max")),
      obj_min_(p.bytes("obj_min")),
      obj_max_(p.bytes("obj_max")),
      big_min_(p.bytes("big_min")),
      big_max_(p.bytes("big_max")),
      big_chance_(p.real("big_chance")),
      remote_min_(p.real("remote_min")),
      remote_max_(p.real("remote_max")),
      long_min_(p.real("long_lived_min")),
      long_max_(p.real("long_lived_max")),
      idle_ms_(p.integer("idle_ms")),
      waves_(p.text("schedule") == "waves"),
      env_(env),
      slots_(new Slot[pool_]) {
  // Pool threads inherit their creator's affinity, and the worker pins each crew thread to one
  // CPU; a real pool's threads run anywhere, so they get the mask this (unpinned) thread has now.
  // The attribute is built once here because setting its affinity allocates.
  pthread_attr_init(&attr_);
  pthread_attr_setstacksize(&attr_, kPoolStack);
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) pthread_attr_setaffinity_np(&attr_, sizeof cpus, &cpus);
  std::size_t long_cap = static_cast<std::size_t>(scaled(p, "long_lived_per_slot"));
  int64_t seed = p.integer("seed");
  for (int j = 0; j < pool_; ++j) {
    Slot& s = slots_[j];
    s.owner = this;
    s.rng = Rng(static_cast<uint64_t>(seed) * 1000003 + static_cast<uint64_t>(j));
    s.request.reserve(static_cast<std::size_t>(allocs_max_) + 1);
    s.evicted.reserve(static_cast<std::size_t>(allocs_max_));
    s.long_lived.assign(long_cap, Obj{});
    s.handover.reserve(static_cast<std::size_t>(p.integer("handover_capacity")));
  }
  // The pool's threads allocate most of this workload's memory: each pool position gets a
  // sampling slot, so their call latencies and blocks count on their node (call_latency.h).
  call_latency::reserve_pool_slots(pool_);
  for (std::size_t phase : {kBurst, kSteady}) {
    auto active = static_cast<unsigned>(active_slots(phase));
    pthread_barrier_init(&allocated_[phase], nullptr, active);
    pthread_barrier_init(&drained_[phase], nullptr, active + static_cast<unsigned>(threads_));
  }
}

ArenaChurn::~ArenaChurn() {
  teardown();
  pthread_attr_destroy(&attr_);
  for (std::size_t phase : {kBurst, kSteady}) {
    pthread_barrier_destroy(&allocated_[phase]);
    pthread_barrier_destroy(&drained_[phase]);
  }
}

const std::vector<std::string>& ArenaChurn::phases() const {
  static const std::vector<std::string> names{"burst", "steady", "idle"};
  return names;
}

void* ArenaChurn::allocate(Slot& s, std::size_t size) {
  void* p = workloads::allocate(size);
  if (!p) allocation_refused(size);
  // A request writes what it allocates (as far as the `writes` setting says), so every allocator's
  // pages are resident as the seed's were.
  fill_block(p, static_cast<int>(size & 0xff), size);
  s.live.add(static_cast<int64_t>(size));
  ++s.counters.objects;
  return p;
}

void ArenaChurn::keep_long(Slot& s, Obj o) {
  Obj& place = s.long_lived[s.ll_head];
  if (s.ll_count == s.long_lived.size()) {
    // Usually allocated by an earlier thread of this slot, so freed by another thread than made
    // it; freed with the request's own objects, so a wave's allocations are only allocations.
    s.evicted.push_back(place);
    s.ll_bytes -= static_cast<int64_t>(place.size);
  } else {
    ++s.ll_count;
  }
  place = o;
  s.ll_bytes += static_cast<int64_t>(o.size);
  s.ll_head = s.ll_head + 1 == s.long_lived.size() ? 0 : s.ll_head + 1;
  ++s.counters.long_lived_made;
}

void ArenaChurn::allocate_request(Slot& s) {
  Rng& rng = s.rng;
  int64_t n = allocs_min_ + static_cast<int64_t>(rng.below(static_cast<uint64_t>(allocs_max_ - allocs_min_ + 1)));
  s.remote = between(rng, remote_min_, remote_max_);
  double keep = s.long_lived.empty() ? 0.0 : between(rng, long_min_, long_max_);
  int64_t big_at = rng.uniform() < big_chance_ ? static_cast<int64_t>(rng.below(static_cast<uint64_t>(n))) : -1;
  mix(s.trace, static_cast<uint64_t>(n));
  s.request.clear();
  s.evicted.clear();
  for (int64_t i = 0; i < n; ++i) {
    std::size_t size = draw_size(rng, obj_min_, obj_max_);
    Obj o{allocate(s, size), size};
    // Long-lived objects are made in the middle of a request, between its short-lived ones, so
    // once those are freed they sit alone in the heap and hold it.
    if (rng.uniform() < keep) {
      keep_long(s, o);
      mix(s.trace, size * 4 + 1);
    } else {
      s.request.push_back(o);
      mix(s.trace, size * 4);
    }
    if (i == big_at) {
      std::size_t big = draw_size(rng, big_min_, big_max_);
      s.request.push_back(Obj{allocate(s, big), big});
      ++s.counters.big_buffers;
      s.counters.big_bytes += big;
      mix(s.trace, big * 4 + 2);
    }
  }
}

void ArenaChurn::free_request(Slot& s) {
  Rng& rng = s.rng;
  for (const Obj& o : s.request) {
    if (rng.uniform() < s.remote) {
      // A full ring makes the thread wait rather than free the object itself, so the share of
      // remote frees stays what the seed sequence says.
      while (!s.handover.push(o)) {
        ++s.counters.handover_waits;
        sched_yield();
      }
      ++s.counters.remote_frees;
      mix(s.trace, 3);
    } else {
      workloads::release(o.ptr);
      s.live.add(-static_cast<int64_t>(o.size));
    }
  }
  for (const Obj& o : s.evicted) {
    workloads::release(o.ptr);
    s.live.add(-static_cast<int64_t>(o.size));
  }
  s.request.clear();
  s.evicted.clear();
  ++s.counters.requests;
}

void ArenaChurn::wait(pthread_barrier_t& barrier) {
  int rc = pthread_barrier_wait(&barrier);
  if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) {
    std::fprintf(stderr, "arena_churn: pthread_barrier_wait failed: %s\n", std::strerror(rc));
    std::abort();
  }
}

// Under schedule=waves the pool's requests run in waves: in wave w every active slot's thread
// serves its w-th request of the phase. All of a wave's allocations happen before any of its
// frees (the `allocated` barrier) and the crew frees every handed-over object before the next
// wave starts (`drained`), so the live set at every moment is set by the schedule, not by how the
// OS interleaved 8 x cores threads: the phase's peak live bytes are the same in every run. Inside
// a wave the slots' threads still allocate, free and hand over at the same time, so arenas are
// created and contended as in the seed's burst. schedule=free leaves the threads unsynchronised.
void ArenaChurn::serve(Slot& s) {
  for (int64_t r = 0; r < s.life; ++r) {
    if (waves_ && s.wave > 0) wait(drained_[s.phase]);
    allocate_request(s);
    s.live.flush();
    if (waves_) wait(allocated_[s.phase]);
    free_request(s);
    s.live.flush();
    ++s.wave;
    s.waves_freed.store(s.wave, std::memory_order_release);
  }
}

void* ArenaChurn::pool_main(void* arg) {
  auto* s = static_cast<Slot*>(arg);
  call_latency::bind_pool_thread(static_cast<int>(s - s->owner->slots_.get()));
  s->owner->serve(*s);
  return nullptr;
}

void ArenaChurn::spawn(Slot& s, ThreadContext& ctx) {
  s.life = std::min<int64_t>(s.requests_left,
                             life_min_ + static_cast<int64_t>(s.rng.below(static_cast<uint64_t>(life_max_ - life_min_ + 1))));
  s.requests_left -= s.life;
  s.wave_end = s.wave + s.life;
  s.live = ctx.live.sibling();
  int rc = pthread_create(&s.thread, &attr_, &ArenaChurn::pool_main, &s);
  if (rc != 0) {
    std::fprintf(stderr, "arena_churn: pthread_create failed: %s\n", std::strerror(rc));
    std::abort();
  }
  s.running = true;
  ++s.counters.threads_created;
}

bool ArenaChurn::drain(Slot& s, ThreadContext& ctx) {
  bool any = false;
  Obj o;
  while (s.handover.pop(o)) {
    workloads::release(o.ptr);
    ctx.live.add(-static_cast<int64_t>(o.size));
    any = true;
  }
  return any;
}

int ArenaChurn::active_slots(std::size_t phase) const {
  if (phase == kBurst) return pool_;
  if (phase == kSteady) return std::min(pool_, steady_active_);
  return 0;
}

uint64_t ArenaChurn::run_pool(std::size_t phase, ThreadContext& ctx) {
  const int active = active_slots(phase);
  const int64_t waves = requests_[phase];
  for (int j = ctx.index; j < active; j += ctx.threads) {
    Slot& s = slots_[j];
    s.requests_left = waves;
    s.phase = phase;
    s.wave = 0;
    s.waves_freed.store(0, std::memory_order_relaxed);
    if (waves > 0) spawn(s, ctx);
  }
  uint64_t ops = 0;
  for (int64_t w = 1; w <= waves; ++w) {
    // The crew is the pool's finalizer: it frees what its slots hand over while their threads
    // free their own share of wave w, and all of it before wave w + 1 allocates.
    for (int j = ctx.index; j < active; j += ctx.threads) {
      Slot& s = slots_[j];
      while (s.waves_freed.load(std::memory_order_acquire) < w)
        if (!drain(s, ctx)) sleep_us(100);
      drain(s, ctx);
      if (s.wave_end == w) {
        // Thread churn: the pool replaces a thread that left with a new one.
        pthread_join(s.thread, nullptr);
        s.running = false;
        ops += static_cast<uint64_t>(s.life);
        if (s.requests_left > 0) spawn(s, ctx);
      }
    }
    ctx.live.flush();
    if (waves_ && w < waves) wait(drained_[phase]);
  }
  return ops;
}

uint64_t ArenaChurn::run_phase(std::size_t phase, ThreadContext& ctx) {
  uint64_t ops = 0;
  if (phase == kIdle) {
    // Nothing runs: what each allocator keeps, and gives back on its own clock, shows over time.
    if (ctx.index == 0 && env_.rss_bytes) idle_rss_start_ = env_.rss_bytes();
    sleep_us(static_cast<long>(idle_ms_) * 1000);
    if (ctx.index == 0 && env_.rss_bytes) idle_rss_end_ = env_.rss_bytes();
  } else {
    ops = run_pool(phase, ctx);
  }
  ctx.live.flush();
  return ops;
}

int64_t ArenaChurn::long_lived_bytes() const {
  int64_t sum = 0;
  for (int j = 0; j < pool_; ++j) sum += slots_[j].ll_bytes;
  return sum;
}

uint64_t ArenaChurn::trace_digest() const {
  uint64_t d = 0;
  for (int j = 0; j < pool_; ++j) mix(d, slots_[j].trace);
  return d;
}

ArenaChurn::Counters ArenaChurn::totals() const {
  Counters t;
  for (int j = 0; j < pool_; ++j) {
    const Counters& c = slots_[j].counters;
    t.requests += c.requests;
    t.objects += c.objects;
    t.big_buffers += c.big_buffers;
    t.big_bytes += c.big_bytes;
    t.remote_frees += c.remote_frees;
    t.handover_waits += c.handover_waits;
    t.long_lived_made += c.long_lived_made;
    t.threads_created += c.threads_created;
  }
  return t;
}

nlohmann::json ArenaChurn::phase_metrics(std::size_t phase) {
  const Counters now = totals();
  const Counters& was = reported_;
  uint64_t ll_objects = 0;
  for (int j = 0; j < pool_; ++j) ll_objects += slots_[j].ll_count;
  nlohmann::json m{
      {"pool_threads", pool_},
      {"active_slots", active_slots(phase)},
      {"threads_created", now.threads_created - was.threads_created},
      {"requests", now.requests - was.requests},
      {"objects", now.objects - was.objects},
      {"big_buffers", now.big_buffers - was.big_buffers},
      {"big_bytes", now.big_bytes - was.big_bytes},
      {"remote_frees", now.remote_frees - was.remote_frees},
      {"handover_waits", now.handover_waits - was.handover_waits},
      {"long_lived_made", now.long_lived_made - was.long_lived_made},
      {"long_lived_objects", ll_objects},
      {"long_lived_bytes", long_lived_bytes()},
  };
  if (phase == kIdle && env_.rss_bytes) {
    m["idle_rss_start_bytes"] = idle_rss_start_;
    m["idle_rss_end_bytes"] = idle_rss_end_;
  }
  reported_ = now;
  return m;
}

void ArenaChurn::teardown() {
  for (int j = 0; j < pool_; ++j) {
    Slot& s = slots_[j];
    if (s.running) pthread_join(s.thread, nullptr), s.running = false;
    Obj o;
    while (s.handover.pop(o)) workloads::release(o.ptr);
    for (Obj& l : s.long_lived) workloads::release(l.ptr), l = Obj{};
    s.ll_count = 0;
    s.ll_head = 0;
    s.ll_bytes = 0;
  }
}

static const bool registered = register_workload({
    "arena_churn",
    "Tomcat-style request pool with thread churn, cross-thread frees and interleaved long-lived objects "
    "(glibc per-thread arena bloat, seed 002)",
    {"burst", "steady", "idle"},
    {
        {"pool_per_core", ParamType::Int, "8", "8", "pool threads per online core (glibc's arena limit is 8 per core)"},
        {"pool_threads", ParamType::Int, "0", "0", "pool threads; 0: pool_per_core x online cores"},
        {"burst_requests", ParamType::Int, "300", "4000", "requests per pool slot in burst (every slot busy); x scale"},
        {"steady_requests", ParamType::Int, "300", "4000", "requests per active slot in steady; x scale"},
        {"steady_active", ParamType::Float, "0.5", "0.5", "share of the pool's slots busy in steady (the pool shrank)"},
        {"thread_life_min", ParamType::Int, "10", "50", "requests a pool thread serves before it exits, at least"},
        {"thread_life_max", ParamType::Int, "60", "300", "requests a pool thread serves before it exits, at most"},
        {"allocs_min", ParamType::Int, "20", "20", "allocations per request, at least"},
        {"allocs_max", ParamType::Int, "200", "200", "allocations per request, at most"},
        {"obj_min", ParamType::Bytes, "16", "16", "smallest request object (sizes log-uniform by power-of-two band)"},
        {"obj_max", ParamType::Bytes, "64K", "64K", "largest request object"},
        {"big_chance", ParamType::Float, "0.05", "0.05", "chance that a request also makes one large buffer"},
        {"big_min", ParamType::Bytes, "256K", "256K", "smallest large buffer"},
        {"big_max", ParamType::Bytes, "8M", "8M", "largest large buffer"},
        {"remote_min", ParamType::Float, "0.2", "0.2", "share of a request's objects freed by another thread, at least"},
        {"remote_max", ParamType::Float, "0.5", "0.5", "share of a request's objects freed by another thread, at most"},
        {"long_lived_min", ParamType::Float, "0.01", "0.01", "share of a request's objects that live long, at least"},
        {"long_lived_max", ParamType::Float, "0.05", "0.05", "share of a request's objects that live long, at most"},
        {"long_lived_per_slot", ParamType::Int, "256", "512",
         "long-lived objects kept per pool slot (oldest freed first); x scale"},
        {"handover_capacity", ParamType::Int, "256", "256",
         "objects a slot's threads may leave waiting for the freeing thread; a full ring makes them wait"},
        {"idle_ms", ParamType::Int, "2000", "30000", "length of the idle phase, ms"},
        {"scale", ParamType::Float, "1", "1", "multiplies request counts and the long-lived set"},
        {"schedule", ParamType::String, "waves", "waves",
         "waves: every slot's n-th request allocates before any frees and handovers are freed before the next, so "
         "the live set follows the schedule; free: the threads run unsynchronised"},
    },
    [](const Params& p, int threads, const WorkloadEnv& env) { return std::make_unique<ArenaChurn>(p, threads, env); },
    [](const Params& p) -> std::string {
      auto fraction = [](double v) { return v >= 0 && v <= 1; };
      if (p.integer("pool_threads") < 0) return "pool_threads must be >= 0";
      if (p.integer("pool_threads") == 0 && p.integer("pool_per_core") < 1) return "pool_per_core must be >= 1";
      if (p.integer("pool_threads") > 4096 || p.integer("pool_per_core") > 512) return "pool too large";
      if (p.integer("burst_requests") < 0 || p.integer("steady_requests") < 0) return "request counts must be >= 0";
      if (!(p.real("steady_active") > 0 && p.real("steady_active") <= 1)) return "steady_active must be within (0, 1]";
      if (p.integer("thread_life_min") < 1 || p.integer("thread_life_max") < p.integer("thread_life_min"))
        return "need 1 <= thread_life_min <= thread_life_max";
      if (p.integer("allocs_min") < 1 || p.integer("allocs_max") < p.integer("allocs_min"))
        return "need 1 <= allocs_min <= allocs_max";
      if (p.bytes("obj_min") < 1 || p.bytes("obj_max") < p.bytes("obj_min")) return "need 1 <= obj_min <= obj_max";
      if (p.bytes("big_min") < 1 || p.bytes("big_max") < p.bytes("big_min")) return "need 1 <= big_min <= big_max";
      if (!fraction(p.real("big_chance"))) return "big_chance must be within 0..1";
      if (!fraction(p.real("remote_min")) || !fraction(p.real("remote_max")) || p.real("remote_max") < p.real("remote_min"))
        return "need 0 <= remote_min <= remote_max <= 1";
      if (!fraction(p.real("long_lived_min")) || !fraction(p.real("long_lived_max")) ||
          p.real("long_lived_max") < p.real("long_lived_min"))
        return "need 0 <= long_lived_min <= long_lived_max <= 1";
      if (p.integer("long_lived_per_slot") < 0) return "long_lived_per_slot must be >= 0";
      if (p.integer("handover_capacity") < 1) return "handover_capacity must be >= 1";
      if (p.integer("idle_ms") < 0) return "idle_ms must be >= 0";
      if (!(p.real("scale") > 0)) return "scale must be > 0";
      if (p.text("schedule") != "waves" && p.text("schedule") != "free") return "schedule must be waves or free";
      return "";
    },
});

}  // namespace allocmark::workloads
