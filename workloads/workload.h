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
#include <vector>

#include <nlohmann/json.hpp>

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

enum class ParamType { Int, Float, Bytes, String };

struct ParamSpec {
  std::string name;
  ParamType type;
  std::string quick;  // default at --size quick
  std::string full;   // default at --size full
  std::string help;
};

// Parameter values after defaults, the size preset and overrides were applied; typed accessors
// parse the strings that were validated before the worker started.
class Params {
 public:
  Params() = default;
  explicit Params(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  uint64_t bytes(const std::string& name) const;  // accepts K/M/G suffixes (binary)
  const std::string& text(const std::string& name) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

// Validates `value` against the parameter's type; returns "" or what is wrong with it.
std::string check_param_value(const ParamSpec& spec, const std::string& value);
// Parses "64", "64K", "1.5M", "2G" (binary multiples); throws std::invalid_argument.
uint64_t parse_bytes(std::string_view text);

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
  // false: the workload's memory is allocated inside a library it does not instrument, so its
  // phases report no live bytes (null, not 0), no fragmentation ratio and no sampled call latency
  // (`latency` null, with the reason).
  bool tracks_live_bytes = true;
  // With tracks_live_bytes false: why, as the phase's `latency_absent` says it ("": the calls
  // happen inside a library allocmark does not instrument).
  std::string untracked_reason;
};

// Registration happens from static initialisers in each workload's file.
bool register_workload(WorkloadInfo info);
const std::vector<WorkloadInfo>& registered_workloads();
const WorkloadInfo* find_workload(std::string_view name);

}  // namespace allocmark::workloads
