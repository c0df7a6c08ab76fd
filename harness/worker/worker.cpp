// allocmark-worker: runs one cell (one workload, one thread count, one allocator already preloaded
// by the driver) and reports over file descriptor 3, one JSON object per line.
//
// Measurement discipline: everything the harness needs (threads, buffers, the workload's own
// tables) exists before a phase starts; inside a phase the harness makes no allocation and no
// syscall except the barrier's futex. Reports are formatted after the phase has been measured.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "allocators/backends.h"
#include "allocators/native_api.h"
#include "harness/record/cell.h"
#include "harness/record/event_keys.h"
#include "harness/settings/settings.h"
#include "harness/metrics/phase_record.h"
#include "harness/metrics/proc.h"
#include "harness/placement/placement.h"
#include "harness/worker/node_figures.h"
#include "harness/worker/phase_contention.h"
#include "harness/worker/preload_check.h"
#include "harness/worker/report_line.h"
#include "workloads/address_sample.h"
#include "workloads/call_latency.h"
#include "workloads/touch.h"
#include "workloads/refused.h"
#include "workloads/workload.h"
#include "harness/os/clock.h"

namespace {

using nlohmann::json;
namespace wl = allocmark::workloads;
namespace metrics = allocmark::metrics;
namespace event = allocmark::record::event;
namespace event_key = allocmark::record::event_key;

constexpr int kReportFd = 3;

int64_t now_ns() { return allocmark::os::monotonic_ns(); }

void report(const json& event) { allocmark::worker::write_report_line(kReportFd, event); }

[[noreturn]] void fail(const std::string& error, int code = 3) {
  std::fprintf(stderr, "allocmark-worker: %s\n", error.c_str());
  report({{event_key::event, event::error}, {event_key::error, error}});
  std::exit(code);
}

// A request the workload could not go on without was refused (workloads/refused.h), or an
// exception escaped a workload thread (std::terminate): the cell fails with the reason, the
// allocator's own where it gives one (numap: NUMAP_CAPACITY), not an abort with an empty log.
// Nothing here allocates: the allocator has just refused. The report line is written by hand.
const allocmark::allocators::NativeApi* g_refusal_api = nullptr;
std::terminate_handler g_default_terminate = nullptr;

[[noreturn]] void report_refusal(std::size_t bytes) {
  char why[768];
  std::size_t len = 0;
  if (g_refusal_api != nullptr && g_refusal_api->explain_refusal != nullptr)
    len = g_refusal_api->explain_refusal(why, sizeof why, bytes);
  if (len == 0) {
    const int n = bytes != 0 ? std::snprintf(why, sizeof why, "the allocator refused a request of %zu bytes (malloc returned null): out of memory", bytes)
                             : std::snprintf(why, sizeof why, "the allocator refused a request (operator new threw std::bad_alloc): out of memory");
    len = n > 0 ? std::min(static_cast<std::size_t>(n), sizeof why - 1) : 0;
  }
  // JSON without a library: every byte that would need escaping (or is not ASCII) becomes '?'.
  char line[sizeof why + 64];
  std::size_t at = 0;
  auto put = [&](const char* t) { while (*t && at < sizeof line - 3) line[at++] = *t++; };
  // The error event, spelled by the event table
  put("{\"");
  put(event_key::event);
  put("\":\"");
  put(event::error);
  put("\",\"");
  put(event_key::error);
  put("\":\"");
  for (std::size_t i = 0; i < len && at < sizeof line - 3; ++i) {
    const unsigned char c = static_cast<unsigned char>(why[i]);
    line[at++] = c < 0x20 || c >= 0x7f || c == '"' || c == '\\' ? '?' : static_cast<char>(c);
  }
  put("\"}\n");
  auto write_all = [](int fd, const char* p, std::size_t n) {
    for (std::size_t done = 0; done < n;) {
      const ssize_t w = ::write(fd, p + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      done += static_cast<std::size_t>(w);
    }
  };
  write_all(2, "allocmark-worker: ", 18);
  write_all(2, why, len);
  write_all(2, "\n", 1);
  write_all(kReportFd, line, at);
  ::_exit(3);
}

void on_terminate() {
  bool bad_alloc = false;
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      bad_alloc = true;
    } catch (...) {
    }
  } else if (g_refusal_api != nullptr && g_refusal_api->explain_refusal != nullptr) {
    // No exception object: the runtime could not even allocate the bad_alloc it was to throw.
    char probe[8];
    bad_alloc = g_refusal_api->explain_refusal(probe, sizeof probe, 0) != 0;
  }
  if (bad_alloc) report_refusal(0);
  if (g_default_terminate != nullptr) g_default_terminate();
  std::abort();
}

// The allocator's own API for this backend, or none (generic libraries expose nothing we know).
const allocmark::allocators::NativeApi* native_for(const std::string& backend) {
  try {
    return &allocmark::allocators::native_api(backend);
  } catch (const std::out_of_range&) {
    return nullptr;
  }
}

json native_snapshot(const allocmark::allocators::NativeApi* api) {
  if (!api) return json::object();
  return api->read_stats();
}

// N threads that run each phase in lock step with the main thread. Created once per cell.
class PhaseCrew {
 public:
  // `cpus`: the CPU of each thread (placement::plan_placement), empty to leave threads unpinned.
  PhaseCrew(wl::Workload& workload, wl::LiveBytes& live, int threads, const std::vector<int>& cpus)
      : workload_(workload), live_(live), threads_(threads) {
    pthread_barrier_init(&start_, nullptr, threads + 1);
    pthread_barrier_init(&end_, nullptr, threads + 1);
    ops_.assign(threads, 0);
    last_cpu_.assign(threads, -1);
    for (int i = 0; i < threads; ++i) {
      crew_.emplace_back([this, i] { loop(i); });
      if (!cpus.empty()) {
        const int cpu = cpus[i];
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (int err = pthread_setaffinity_np(crew_.back().native_handle(), sizeof set, &set); err != 0 && pin_error_.empty())
          pin_error_ = "pinning thread " + std::to_string(i) + " to CPU " + std::to_string(cpu) +
                       " was refused: " + std::strerror(err) + " (run with --pin none to measure unpinned)";
        pinned_.push_back(cpu);
      }
    }
  }
  // Non-empty when pinning was asked for and the kernel refused it: the cell must fail, not run
  // unpinned while the results say pinned.
  const std::string& pin_error() const { return pin_error_; }
  // The CPU each thread was pinned to (empty when not pinned).
  const std::vector<int>& pinned_cpus() const { return pinned_; }
  // The CPU each thread was on when it finished the last phase (sched_getcpu: a vDSO read).
  const std::vector<int>& last_cpus() const { return last_cpu_; }
  ~PhaseCrew() {
    phase_ = -1;
    pthread_barrier_wait(&start_);
    for (auto& t : crew_) t.join();
    pthread_barrier_destroy(&start_);
    pthread_barrier_destroy(&end_);
  }
  // Releases every thread into `phase` and returns when all of them finished it.
  void run(int phase) {
    phase_ = phase;
    pthread_barrier_wait(&start_);
    pthread_barrier_wait(&end_);
  }
  const std::vector<uint64_t>& thread_ops() const { return ops_; }
  uint64_t total_ops() const {
    uint64_t sum = 0;
    for (auto v : ops_) sum += v;
    return sum;
  }

 private:
  void loop(int index) {
    wl::call_latency::bind_thread(index);
    wl::ThreadContext ctx{index, threads_, live_.local(index)};
    wl::address_sample::bind_thread(index);
    for (;;) {
      pthread_barrier_wait(&start_);
      int phase = phase_;
      if (phase < 0) return;
      ops_[index] = workload_.run_phase(static_cast<std::size_t>(phase), ctx);
      last_cpu_[index] = sched_getcpu();
      pthread_barrier_wait(&end_);
    }
  }

  wl::Workload& workload_;
  wl::LiveBytes& live_;
  int threads_;
  int phase_ = 0;  // written by the main thread before the start barrier, which orders it
  std::vector<uint64_t> ops_;
  std::vector<int> last_cpu_, pinned_;
  std::string pin_error_;
  std::vector<std::thread> crew_;
  pthread_barrier_t start_, end_;
};

json run_probe(const json& spec) {
  const allocmark::record::ResolvedAllocator allocator = allocmark::record::cell_of_worker(spec).allocator;
  const std::string& backend = allocator.backend;
  std::string served = allocmark::worker::library_serving("malloc");
  json out{{event_key::event, event::probe}, {event_key::library, served}};
  if (auto problem = allocmark::worker::check_served_by(served, allocator.library); !problem.empty())
    out[event_key::error] = problem;
  const auto* info = allocmark::allocators::find_backend(backend);  // null for an unknown name
  if (info && !info->signature_symbol.empty()) {
    std::string sig = allocmark::worker::library_serving(info->signature_symbol.c_str());
    if (sig != served)
      out[event_key::error] = "not a " + backend + " library: " + info->signature_symbol +
                     (sig.empty() ? " is not exported" : " comes from " + sig);
  }
  if (const auto* api = native_for(backend)) {
    out[event_key::version] = api->version();
    out[event_key::options] = api->read_options();
  }
  return out;
}

namespace pl = allocmark::placement;
using allocmark::allocators::NativeApi;
using allocmark::worker::NodeFigures;
using allocmark::worker::PhaseContentionProbe;

allocmark::matrix::Settings settings_of(const json& spec) {
  try {
    return allocmark::matrix::settings_from_json(spec, allocmark::matrix::kWorker, "worker description");
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

// Refuses a cell no one will read or one the wrong library serves, then reports its start.
const NativeApi* start_cell(const json& spec, const allocmark::record::ResolvedAllocator& allocator) {
  // A driver killed between fork and exec leaves no one to read this cell: stop at once.
  if (spec.contains("driver_pid") && getppid() != spec["driver_pid"].get<pid_t>()) fail("the driver is gone", 4);
  std::string served = allocmark::worker::library_serving("malloc");
  if (auto problem = allocmark::worker::check_served_by(served, allocator.library); !problem.empty())
    fail(problem);
  const auto* api = native_for(allocator.backend);
  report({{event_key::event, event::start}, {event_key::library, served}, {event_key::pid, getpid()},
          {event_key::t_ns, now_ns()}, {event_key::version, api ? api->version() : ""},
          {event_key::options, api ? api->read_options() : json::object()}});
  return api;
}

// Before the workload allocates: a refusal from here on fails the cell with its reason.
void arm_refusal_report(const NativeApi* api) {
  g_refusal_api = api;
  if (api != nullptr && api->explain_refusal != nullptr) {
    char warm[1];
    api->explain_refusal(warm, 0, 0);  // resolves its symbol now, while allocating is still possible
  }
  wl::on_allocation_refused(&report_refusal);
  g_default_terminate = std::set_terminate(&on_terminate);
}

const wl::WorkloadInfo& workload_info(const std::string& workload_name) {
  const wl::WorkloadInfo* info = wl::find_workload(workload_name);
  if (!info) fail("unknown workload " + workload_name);
  return *info;
}

wl::Params params_of(const wl::WorkloadInfo& info, const std::map<std::string, std::string>& params) {
  try {
    return wl::Params::typed(info, params);
  } catch (const std::exception& e) {
    fail(std::string("worker description: params: ") + e.what());
  }
}

wl::WorkloadEnv env_of(const NativeApi* api, const json& spec) {
  wl::WorkloadEnv env;
  if (api) env.purge = [api] { return api->purge(); };
  env.rss_bytes = [] {
    uint64_t rss = 0;
    metrics::read_statm_rss(0, rss);
    return rss;
  };
  env.data_dir = spec.value("data_dir", "");
  return env;
}

// Placed before the workload builds its tables, so a memory binding (--nodes) covers them too.
pl::Placement place_cell(const allocmark::topology::Topology& topo, const pl::Allowed& allowed,
                         const allocmark::matrix::Settings& settings, int threads) {
  pl::Placement placement;
  try {
    placement = pl::plan_placement(topo, allowed, settings.pin, threads);
  } catch (const std::exception& e) {
    fail(std::string("placement: ") + e.what());
  }
  if (auto problem = pl::apply_memory_binding(placement.membind); !problem.empty()) fail(problem);
  return placement;
}

// Empty when the workload's live bytes are counted: the probe then reads call latencies.
std::string latency_absent_reason(const wl::WorkloadInfo& info, const std::string& workload_name) {
  if (info.tracks_live_bytes) return "";
  if (!info.untracked_reason.empty()) return info.untracked_reason;
  return "the workload's allocations happen inside a library allocmark does not instrument (" + workload_name + ")";
}

void report_baseline(const NativeApi* api, const PhaseCrew& crew, const pl::Placement& placement,
                     const pl::Allowed& allowed) {
  const bool pin = !placement.thread_cpus.empty();
  json placement_json = pl::to_json(placement);
  placement_json["allowed"] = pl::to_json(allowed);
  metrics::MemStatus idle{};
  metrics::read_mem_status(0, idle);
  report({{event_key::event, event::baseline}, {event_key::idle_rss_bytes, idle.rss_bytes}, {event_key::t_ns, now_ns()},
          {event_key::alloc_stats, native_snapshot(api)},
          {event_key::pinned_cpus, pin ? json(crew.pinned_cpus()) : json(nullptr)}, {event_key::placement, placement_json}});
}

// What was read around one phase, held on the stack and turned into JSON only once it is over.
struct PhaseReadings {
  int64_t begin_ns = 0, end_ns = 0, live_start = 0;
  rusage ru0{}, ru1{};
  metrics::MemStatus end{};
  metrics::ThpEvents thp0{}, thp1{};
  bool exact = false, read_ok = false, thp_end_ok = false, huge_ok = false;
  uint64_t anon_huge = 0;
};

// The measured part of a phase: only reads of counters around crew.run, nothing allocated.
inline void measure_phase(PhaseCrew& crew, wl::LiveBytes& live, PhaseContentionProbe& contention, int phase,
                          PhaseReadings& r) {
  live.reset_peak();
  r.live_start = live.current();
  contention.begin();
  const bool thp_ok = metrics::read_thp_events(r.thp0);
  getrusage(RUSAGE_SELF, &r.ru0);
  r.exact = metrics::reset_peak_rss();
  r.begin_ns = now_ns();
  crew.run(phase);
  r.end_ns = now_ns();
  getrusage(RUSAGE_SELF, &r.ru1);
  r.read_ok = metrics::read_mem_status(0, r.end);
  r.thp_end_ok = thp_ok && metrics::read_thp_events(r.thp1);
  contention.end();
}

// After the phase's scheduler figures: the kernel walks every page table to count huge pages
// (about 10 ms per GiB of small pages here), which is the worker's time, not the phase's.
void read_huge_pages(NodeFigures& node_figures, bool want_node_figures, PhaseReadings& r) {
  r.huge_ok = metrics::read_anon_huge_bytes(0, r.anon_huge);
  // Right after it, so the system's huge pages per node (every process's) hold this process's.
  if (want_node_figures) node_figures.read_system_huge();
}

metrics::PhaseFigures phase_figures(const std::string& name, const PhaseReadings& r, const PhaseCrew& crew,
                                    const wl::LiveBytes& live, bool tracks_live_bytes) {
  metrics::PhaseFigures f;
  f.name = name;
  f.begin_ns = r.begin_ns;
  f.end_ns = r.end_ns;
  f.ops = crew.total_ops();
  if (r.read_ok) {
    f.peak_rss_bytes = r.end.hwm_bytes;
    f.end_rss_bytes = r.end.rss_bytes;
  }
  f.peak_rss_reset = r.exact;
  if (tracks_live_bytes) {
    f.start_live_bytes = r.live_start;
    f.peak_live_bytes = std::max(live.peak(), r.live_start);
    f.end_live_bytes = live.current();
  }
  f.counters = metrics::counters_since(metrics::counters_of(r.ru1), metrics::counters_of(r.ru0));
  if (r.huge_ok) f.anon_huge_bytes = r.anon_huge;
  if (r.thp_end_ok) f.thp_events = metrics::thp_events_since(r.thp1, r.thp0);
  return f;
}

void add_node_figures(json& phase, const PhaseCrew& crew, PhaseContentionProbe& contention,
                      NodeFigures& node_figures, bool want_node_figures) {
  phase["thread_cpus"] = crew.last_cpus();
  json thread_nodes = json::array();
  for (int cpu : crew.last_cpus()) thread_nodes.push_back(node_figures.node_of_cpu(cpu));
  phase["thread_nodes"] = thread_nodes;
  if (want_node_figures) {
    json placement_cost;
    phase["nodes"] = node_figures.after_phase(crew.last_cpus(), crew.thread_ops(), contention.per_slot(), placement_cost);
    phase["placement_cost"] = placement_cost;
  } else {
    phase["nodes"] = nullptr;
    phase["nodes_absent"] = "node figures off (--no-node-figures, matrix node_figures = false)";
  }
}

// The return curve: RSS at fixed times after the last phase's end while the worker waits idle (its
// crew parked on the barrier; no allocation and no harness work the allocator could notice), so an
// allocator that gives memory back a little after free() (a decay thread, a delayed purge) is seen
// doing it. Read before the last phase's later figures, which then come after the settle.
struct ReturnCurve {
  static constexpr int kPoints = 3;
  static constexpr const char* kNames[kPoints] = {"after_10ms", "after_100ms", "settled"};
  int64_t at_ns[kPoints] = {};
  uint64_t rss[kPoints] = {};
  bool read_ok[kPoints] = {};
};

// `after_first` runs right after the +10 ms read (the phase's huge-page count, whose page-table walk
// takes about 10 ms per GiB: before the first read it would make +10 ms late on a large process).
template <class AfterFirst>
void settle(int64_t phase_end_ns, int settle_ms, ReturnCurve& curve, AfterFirst&& after_first) {
  constexpr int64_t kMsNs = 1000000;
  const int64_t after_ms[ReturnCurve::kPoints] = {10, 100, settle_ms};
  for (int k = 0; k < ReturnCurve::kPoints; ++k) {
    const int64_t when_ns = phase_end_ns + after_ms[k] * kMsNs;
    const timespec when{static_cast<time_t>(when_ns / 1000000000), static_cast<long>(when_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &when, nullptr) == EINTR) {
    }
    curve.at_ns[k] = now_ns();  // later than asked when what came before took longer
    curve.read_ok[k] = metrics::read_statm_rss(0, curve.rss[k]);
    if (k == 0) after_first();
  }
}

// The last phase's record of its settle, or why it has none.
void add_return_curve(json& phase, const ReturnCurve& curve, int settle_ms, int64_t phase_end_ns) {
  if (settle_ms == 0) {
    phase["return_curve"] = nullptr;
    phase["return_curve_absent"] = "settle off (settle_ms = 0)";
    return;
  }
  json out{{"settle_ms", settle_ms}};
  for (int k = 0; k < ReturnCurve::kPoints; ++k)
    out[ReturnCurve::kNames[k]] = {{"t_ms", std::round((curve.at_ns[k] - phase_end_ns) / 1e3) / 1e3},
                                   {"rss_bytes", curve.read_ok[k] ? json(curve.rss[k]) : json(nullptr)}};
  phase["return_curve"] = std::move(out);
}

void report_done(wl::Workload& workload, const NativeApi* api) {
  workload.teardown();
  json done{{event_key::event, event::done}, {event_key::t_ns, now_ns()}};
  if (api) {
    done[event_key::alloc_stats] = api->read_stats();
    done[event_key::contention] = api->read_contention();
    done[event_key::options] = api->read_options();
  }
  report(done);
}

// The worker's side of a cell: builds the workload and runs, measures and reports its phases.
int measure_cell(const json& spec) {
  const allocmark::record::Cell cell = allocmark::record::cell_of_worker(spec);
  const std::string& workload_name = cell.workload;
  const int threads = cell.threads;
  const allocmark::matrix::Settings settings = settings_of(spec);
  const NativeApi* api = start_cell(spec, cell.allocator);
  arm_refusal_report(api);
  const wl::WorkloadInfo& info = workload_info(workload_name);
  const wl::Params params = params_of(info, cell.params);
  const wl::WorkloadEnv env = env_of(api, spec);
  const pl::Allowed allowed = pl::current_allowed();
  allocmark::topology::Topology topo = allocmark::topology::detect();
  const pl::Placement placement = place_cell(topo, allowed, settings, threads);
  NodeFigures node_figures(std::move(topo), threads);
  const bool want_node_figures = settings.node_figures;
  // Before the workload and its threads exist: each thread reads N on its first call.
  const uint32_t latency_every = static_cast<uint32_t>(settings.latency_every);
  wl::call_latency::configure(latency_every, threads);
  wl::set_writes(settings.writes);  // checked by the settings table
  PhaseContentionProbe contention(api, latency_every, latency_absent_reason(info, workload_name));
  std::unique_ptr<wl::Workload> workload = info.make(params, threads, env);
  wl::LiveBytes live(threads);
  PhaseCrew crew(*workload, live, threads, placement.thread_cpus);
  if (!crew.pin_error().empty()) fail(crew.pin_error());
  report_baseline(api, crew, placement, allowed);

  const auto& phases = workload->phases();
  for (std::size_t i = 0; i < phases.size(); ++i) {
    report({{event_key::event, event::phase_begin}, {event_key::phase, phases[i]}, {event_key::t_ns, now_ns()}});
    PhaseReadings readings;
    measure_phase(crew, live, contention, static_cast<int>(i), readings);
    const bool last = i + 1 == phases.size();
    ReturnCurve curve;
    auto huge_pages = [&] { read_huge_pages(node_figures, want_node_figures, readings); };
    if (last && settings.settle_ms > 0) settle(readings.end_ns, settings.settle_ms, curve, huge_pages);
    else huge_pages();
    json phase = metrics::phase_record(phase_figures(phases[i], readings, crew, live, info.tracks_live_bytes));
    if (last) add_return_curve(phase, curve, settings.settle_ms, readings.end_ns);
    add_node_figures(phase, crew, contention, node_figures, want_node_figures);
    phase["maps"] = metrics::summarize_maps();
    if (json extra = workload->phase_metrics(i); !extra.empty()) phase["workload_metrics"] = extra;
    if (api) phase["alloc_stats"] = api->read_stats();
    phase["contention"] = contention.record();
    report({{event_key::event, event::phase_end}, {event_key::phase, phase}});
  }
  report_done(*workload, api);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "--cell") != 0 && std::strcmp(argv[1], "--probe") != 0)) {
    std::fprintf(stderr,
                 "usage: allocmark-worker --cell JSON | --probe JSON\n"
                 "Started by `allocmark run`, with the allocator preloaded and a report pipe on fd 3.\n");
    return 2;
  }
  json spec;
  try {
    spec = json::parse(argv[2]);
  } catch (const std::exception& e) {
    fail(std::string("bad cell description: ") + e.what(), 2);
  }
  if (std::strcmp(argv[1], "--probe") == 0) {
    report(run_probe(spec));
    return 0;
  }
  try {
    return measure_cell(spec);
  } catch (const std::bad_alloc&) {
    report_refusal(0);
  } catch (const std::exception& e) {
    fail(e.what());
  }
}
