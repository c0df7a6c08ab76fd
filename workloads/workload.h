// Workload models: registration (this header) is separate from running them (harness/worker).
//
// A workload is a set of named phases executed by N threads in lock step: the worker creates the
// threads once, then for each phase releases them all at the same instant and waits for all of
// them, so thread creation never lands inside a measured phase. Workloads allocate through
// allocate()/release() (call_latency.h: malloc and free, one call in N timed), so every preloaded
// allocator sees the same calls, and they account every byte they request in a LiveBytes counter.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "units/units.h"

namespace allocmark::workloads {

// Live requested bytes, kept per thread and folded into a shared total in batches so that the
// accounting does not put a contended cache line on every malloc. The global peak is exact to
// within threads x kFlushBytes (documented in docs/results-schema.md); the final totals are exact.
class LiveBytes {
 public:
  static constexpr int64_t kFlushBytes = 64 * 1024;

  class alignas(64) Local {
   public:
    void add(int64_t bytes) {
      pending_ += bytes;
      if (pending_ >= kFlushBytes || pending_ <= -kFlushBytes) flush();
    }
    void flush() { owner_->fold(pending_); pending_ = 0; }
    // A new Local folding into the same total, for a thread the workload creates itself (a
    // thread pool): such a thread must not share its creator's Local, which is not thread-safe.
    // It must flush before it ends, so its delta reaches the total before the phase barrier.
    Local sibling() const {
      Local l;
      l.owner_ = owner_;
      return l;
    }

   private:
    friend class LiveBytes;
    LiveBytes* owner_ = nullptr;
    int64_t pending_ = 0;
  };

  explicit LiveBytes(int threads);
  Local& local(int thread) { return locals_[thread]; }
  int64_t current() const { return total_.load(std::memory_order_relaxed); }
  int64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  // Restarts the peak at the current live total (at a phase start).
  void reset_peak() { peak_.store(current(), std::memory_order_relaxed); }

 private:
  void fold(int64_t delta);
  std::unique_ptr<Local[]> locals_;
  alignas(64) std::atomic<int64_t> total_{0};
  alignas(64) std::atomic<int64_t> peak_{0};
};

// The kinds of value a workload parameter takes. Adding one is one entry here and one row of
// kParamTypes in registry.cpp (how its text is read and how its value is spelled).
enum class ParamType { Int, Float, Bytes, String };

// A parameter's value in its declared type: Int, Float, Bytes (a byte count) or String.
using ParamValue = std::variant<int64_t, double, uint64_t, std::string>;

struct ParamSpec {
  std::string name;
  ParamType type;
  std::string quick;  // default at --size quick
  std::string full;   // default at --size full
  std::string help;
  // The parameter is a digest of an input the workload reads (replay's trace_sha256): two cells
  // that differ in it ran different workloads, so the gate and compare never judge one against the
  // other, --strict or not (a library or a tunable that differs is what a comparison is for).
  bool input_digest = false;
};

// Reads `text` as the parameter's type, once (in the driver, at plan time; in the worker, from the
// canonical text its cell description carries); throws std::invalid_argument saying what is wrong.
ParamValue parse_param(const ParamSpec& spec, const std::string& text);
// The one spelling of a value: a cell's identity, its records and the worker's description use
// it, so "64M" and "67108864" are one cell and a float reads back exactly ("0.1234567").
std::string canonical_param_text(const ParamValue& value);

// Validates `value` against the parameter's type; returns "" or what is wrong with it.
std::string check_param_value(const ParamSpec& spec, const std::string& value);

// Parameter values after defaults, the size preset and overrides were applied, each in its
// declared type. Values given as text (tests, a hand-built set) are read on access.
class Params {
 public:
  Params() = default;
  explicit Params(const std::map<std::string, std::string>& texts);
  // Values already read in their declared types (the plan's).
  static Params of(std::map<std::string, ParamValue> values);
  // The canonical texts of a cell description, read in the types `workload` declares.
  static Params typed(const struct WorkloadInfo& workload, const std::map<std::string, std::string>& texts);
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  uint64_t bytes(const std::string& name) const;  // accepts K/M/G suffixes (binary)
  const std::string& text(const std::string& name) const;

 private:
  const ParamValue& value(const std::string& name) const;
  std::map<std::string, ParamValue> values_;
};

using units::parse_bytes;

struct ThreadContext {
  int index;    // 0 .. threads-1
  int threads;
  LiveBytes::Local& live;
};

// What the worker offers a workload beyond malloc: services that model an application's own
// reactions (e.g. purging when RSS crosses a limit). Each may be empty in tests.
struct WorkloadEnv {
  // Asks the preloaded allocator to return free memory to the OS; false where it cannot.
  std::function<bool()> purge;
  // Current resident bytes of this process (allocation-free /proc read).
  std::function<uint64_t()> rss_bytes;
  // A folder of the cell's own for on-disk state (a database), under the results folder; it does
  // not exist yet. The driver removes it when the worker has ended, however it ended.
  std::string data_dir;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual const std::vector<std::string>& phases() const = 0;
  // Runs one thread's share of a phase and returns the operations it performed. Called
  // concurrently for every thread index; the worker times the whole phase.
  virtual uint64_t run_phase(std::size_t phase, ThreadContext& ctx) = 0;
  // Frees whatever the phases left alive; runs after the last phase, outside measurement.
  virtual void teardown() {}
  // Workload-specific figures for a finished phase (reported as the phase's "workload_metrics");
  // called after the phase was measured, so it may allocate.
  virtual nlohmann::json phase_metrics(std::size_t phase) { return nlohmann::json::object(); }
};

struct WorkloadInfo {
  std::string name;
  std::string summary;
  std::vector<std::string> phases;
  std::vector<ParamSpec> params;  // "seed" is added to every workload by the registry
  std::function<std::unique_ptr<Workload>(const Params&, int threads, const WorkloadEnv&)> make;
  // Checks values whose form a ParamType cannot express; returns "" or what is wrong. Runs in
  // the driver before any cell starts.
  std::function<std::string(const Params&)> validate;
  bool diagnostic = false;  // exists to test the harness (crash, hang); excluded from default matrices
  // Runs only where a matrix names it: it needs a parameter no default can give (replay's trace),
  // so default matrices leave it out.
  bool named_only = false;
  // The workload runs this many threads whatever the threads axis says: a replay runs the trace's.
  // The plan calls it after validate() passed and makes one cell per allocator and repetition with
  // these threads (a note says so when the axis named others).
  std::function<int(const Params&)> own_threads;
  // false: the workload's memory is allocated inside a library it does not instrument, so its
  // phases report no live bytes (null, not 0), no fragmentation ratio and no sampled call latency
  // (`latency` null, with the reason).
  bool tracks_live_bytes = true;
  // With tracks_live_bytes false: why, as the phase's `latency_absent` says it ("": the calls
  // happen inside a library allocmark does not instrument).
  std::string untracked_reason;
  // Why a phase's ops/s is not the allocator's speed, given the cell's parameters: the workload
  // fixes its rate or its wall time (rate-limited writers), or its operations are unlike ones summed
  // (percall's benchmarks); "" (and an empty function) where ops/s measures the allocator. Phases
  // without operations (idle) need no entry. summary.json carries it per group
  // (`ops_per_s_not_a_speed`) so rankings and charts leave such phases out, saying why.
  std::function<std::string(const Params&, std::string_view phase)> ops_per_s_not_a_speed;
  // A parameter that names an instance of the workload (replay's `name`, set by a matrix's
  // [traces.NAME]): where it is set, tables and charts call its groups WORKLOAD:VALUE, as program
  // cells are program:NAME, instead of spelling out the parameters that differ.
  std::string instance_param;
};

// Registration happens from static initialisers in each workload's file.
bool register_workload(WorkloadInfo info);
const std::vector<WorkloadInfo>& registered_workloads();
const WorkloadInfo* find_workload(std::string_view name);

// What one cell of a workload typically takes, in seconds, at each size preset: one thread, the
// preset's parameters, glibc, measured as docs/workloads.md ("How long a cell takes") says. `run`
// adds them up to estimate a matrix before it starts one (docs/usage.md). 0 where not measured:
// diagnostic and named-only workloads (a replay lasts as long as its trace), and programs.
struct CellSeconds {
  double quick = 0, full = 0;
  double at(std::string_view size) const { return size == "full" ? full : quick; }
};
CellSeconds typical_cell_seconds(std::string_view workload);

}  // namespace allocmark::workloads
