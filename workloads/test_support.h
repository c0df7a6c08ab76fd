// Test support for workloads: runs every phase in lock step the way the worker does, in-process,
// so tests can check live-byte accounting and determinism without spawning a worker.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "workloads/workload.h"

namespace allocmark::workloads::test_support {

struct PhaseOutcome {
  int64_t live_after = 0;     // LiveBytes::current() after the phase
  int64_t peak_live = 0;      // LiveBytes::peak() during it
  uint64_t ops = 0;           // summed over threads
};

// `after_phase`, if given, runs once each phase's threads have all finished, before the next starts:
// the place to read the workload's own bookkeeping or phase_metrics for that phase.
inline std::vector<PhaseOutcome> run_all_phases(Workload& w, LiveBytes& live, int threads,
                                                const std::function<void(std::size_t)>& after_phase = {}) {
  std::vector<PhaseOutcome> out;
  for (std::size_t phase = 0; phase < w.phases().size(); ++phase) {
    live.reset_peak();
    std::vector<std::thread> crew;
    std::vector<uint64_t> counts(threads);
    for (int t = 0; t < threads; ++t)
      crew.emplace_back([&, t] {
        ThreadContext ctx{t, threads, live.local(t)};
        counts[t] = w.run_phase(phase, ctx);
      });
    for (auto& t : crew) t.join();
    PhaseOutcome o{live.current(), live.peak(), 0};
    for (auto c : counts) o.ops += c;
    out.push_back(o);
    if (after_phase) after_phase(phase);
  }
  return out;
}

// Parameters of a registered workload at a size preset, with overrides.
inline Params preset(const std::string& workload, const std::string& size,
                     const std::map<std::string, std::string>& overrides = {}) {
  std::map<std::string, std::string> values;
  for (const auto& p : find_workload(workload)->params) values[p.name] = size == "full" ? p.full : p.quick;
  for (const auto& [k, v] : overrides) values[k] = v;
  return Params(values);
}

}  // namespace allocmark::workloads::test_support
