// A phase's contention figures in the worker, for every backend: the allocator's own lock counters
// (where it has them), the sampled call latencies (workloads/call_latency.h) and the scheduler's
// run-queue wait of every thread (/proc/self/task/*/schedstat). begin() and end() bracket the
// measured region and allocate nothing except the native reader's JSON before the phase; the
// record is built after the phase.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "allocators/native_api.h"
#include "harness/metrics/phase_record.h"
#include "harness/metrics/proc.h"
#include "workloads/call_latency.h"

namespace allocmark::worker {

// after - before for every counter, so a phase reports what happened during it; "max_*" fields
// are high-water marks since process start and stay as they are.
inline nlohmann::json counter_delta(const nlohmann::json& after, const nlohmann::json& before) {
  using nlohmann::json;
  if (after.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : after.items())
      out[k] = k.rfind("max_", 0) == 0 ? v : counter_delta(v, before.is_object() && before.contains(k) ? before[k] : json());
    return out;
  }
  if (after.is_number_unsigned() && before.is_number_unsigned())
    return after.get<uint64_t>() >= before.get<uint64_t>() ? after.get<uint64_t>() - before.get<uint64_t>() : 0;
  if (after.is_number() && before.is_number()) return after.get<double>() - before.get<double>();
  return after;
}

class PhaseContentionProbe {
 public:
  // `latency_absent`: why calls are not timed ("" when they are and `every` > 0).
  PhaseContentionProbe(const allocators::NativeApi* api, uint32_t every, std::string latency_absent)
      : api_(api), every_(every), latency_absent_(std::move(latency_absent)) {
    if (every_ == 0 && latency_absent_.empty()) latency_absent_ = "sampling off (latency_every = 0)";
  }

  // Just before the phase: what happened between phases is not the phase's. Sizes the per-slot
  // histograms first (the workload's constructor may have added pool slots).
  void begin() {
    native_before_ = api_ ? api_->read_contention() : nlohmann::json();
    if (slots_.allocs.size() != static_cast<std::size_t>(workloads::call_latency::slot_count()))
      workloads::call_latency::prepare(slots_);
    workloads::call_latency::take(slots_);
    slots_.clear();
    sched_ok_ = sched_begin_.read(0);
  }

  // Just after the phase, before anything allocates.
  void end() {
    sched_ok_ = sched_ok_ && sched_end_.read(0);
    workloads::call_latency::take(slots_);
  }

  nlohmann::json record() const {
    metrics::PhaseContention c;
    if (api_) c.native = counter_delta(api_->read_contention(), native_before_);
    c.latency_every = every_;
    if (latency_absent_.empty()) {
      workloads::LatencyHistogram allocs, frees;
      slots_.merge_into(allocs, frees);
      c.allocs = summary(allocs);
      c.frees = summary(frees);
    }
    c.latency_absent = latency_absent_;
    if (sched_ok_) c.sched = sched_end_.since(sched_begin_);
    return metrics::contention_record(c);
  }

  // The phase's timed calls slot by slot, for the per-node figures; null when calls are not timed.
  const workloads::call_latency::PerSlot* per_slot() const { return latency_absent_.empty() ? &slots_ : nullptr; }

  static metrics::LatencySummary summary(const workloads::LatencyHistogram& h) {
    return {h.count(), h.percentile(0.50), h.percentile(0.99), h.percentile(0.999), h.max()};
  }

 private:
  const allocators::NativeApi* api_;
  uint32_t every_;
  std::string latency_absent_;
  nlohmann::json native_before_;
  workloads::call_latency::PerSlot slots_;
  metrics::SchedSnapshot sched_begin_, sched_end_;
  bool sched_ok_ = false;
};

}  // namespace allocmark::worker
