// size_mix: threads allocate and free from a size distribution around a target live set, with a
// fraction of frees done by another thread. The pipeline's first workload: simple, controllable,
// and the same calls for every allocator.
#include "workloads/size_mix.h"
#include "workloads/call_latency.h"
#include "workloads/refused.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "workloads/rng.h"
#include "workloads/touch.h"

namespace allocmark::workloads {

SizeDistribution SizeDistribution::parse(const std::string& text) {
  SizeDistribution d;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::size_t dash = item.find('-'), colon = item.find(':');
    if (dash == std::string::npos || colon == std::string::npos || colon < dash)
      throw std::invalid_argument("size class '" + item + "' is not LO-HI:WEIGHT (e.g. 16-256:60)");
    Range r;
    r.lo = parse_bytes(item.substr(0, dash));
    r.hi = parse_bytes(item.substr(dash + 1, colon - dash - 1));
    double weight = std::stod(item.substr(colon + 1));
    if (r.lo == 0 || r.hi < r.lo) throw std::invalid_argument("size class '" + item + "' needs 0 < LO <= HI");
    if (weight <= 0) throw std::invalid_argument("size class '" + item + "' needs a positive weight");
    d.total_weight_ += weight;
    r.cumulative = d.total_weight_;
    d.ranges_.push_back(r);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  double previous = 0;
  for (const auto& r : d.ranges_) {
    d.mean_ += (r.lo + r.hi) / 2.0 * (r.cumulative - previous) / d.total_weight_;
    previous = r.cumulative;
  }
  return d;
}

std::size_t SizeDistribution::draw(Rng& rng) const {
  double x = rng.uniform() * total_weight_;
  for (const auto& r : ranges_)
    if (x < r.cumulative) return r.lo + rng.below(r.hi - r.lo + 1);
  return ranges_.back().hi;
}

SizeMix::SizeMix(const Params& params, int threads)
    : threads_(threads),
      sizes_(SizeDistribution::parse(params.text("sizes"))),
      remote_fraction_(threads > 1 ? params.real("remote_free") : 0.0),
      ops_(params.integer("ops")),
      seed_(params.integer("seed")),
      touch_(params.integer("touch") != 0),
      state_(threads) {
  std::size_t live_per_thread = (static_cast<std::size_t>(params.integer("live_mib")) << 20) / threads;
  std::size_t slots = std::max<std::size_t>(1, static_cast<std::size_t>(live_per_thread / sizes_.mean()));
  for (int t = 0; t < threads; ++t) {
    state_[t].slots.assign(slots, Block{});
    // Room for every slot in flight at once: a full inbox would otherwise make the sender free locally.
    state_[t].inbox.reserve(slots);
    state_[t].rng = Rng(seed_ * 1000003 + t);
  }
}

const std::vector<std::string>& SizeMix::phases() const {
  static const std::vector<std::string> names{"fill", "churn", "release"};
  return names;
}

void SizeMix::release_block(ThreadContext& ctx, ThreadState& me, Block block) {
  if (remote_fraction_ > 0 && me.rng.uniform() < remote_fraction_) {
    auto& peer = state_[(ctx.index + 1) % threads_];
    if (peer.inbox.push(block)) return;  // the peer frees it and accounts it
  }
  workloads::release(block.ptr);
  ctx.live.add(-static_cast<int64_t>(block.size));
}

void SizeMix::drain_inbox(ThreadContext& ctx, ThreadState& me) {
  Block block;
  while (me.inbox.pop(block)) {
    workloads::release(block.ptr);
    ctx.live.add(-static_cast<int64_t>(block.size));
  }
}

uint64_t SizeMix::replace(ThreadContext& ctx, ThreadState& me, std::size_t slot) {
  Block& b = me.slots[slot];
  if (b.ptr) release_block(ctx, me, b);
  std::size_t size = sizes_.draw(me.rng);
  void* p = workloads::allocate(size);
  if (!p) allocation_refused(size);
  if (touch_) touch_block(p, size);
  ctx.live.add(static_cast<int64_t>(size));
  b = Block{p, size};
  return 1;
}

uint64_t SizeMix::run_phase(std::size_t phase, ThreadContext& ctx) {
  ThreadState& me = state_[ctx.index];
  uint64_t ops = 0;
  switch (phase) {
    case 0:  // fill: reach the target live set
      for (std::size_t i = 0; i < me.slots.size(); ++i) ops += replace(ctx, me, i);
      break;
    case 1:  // churn: replace random blocks, freeing some of them in another thread
      for (int64_t i = 0; i < ops_; ++i) {
        ops += replace(ctx, me, me.rng.below(me.slots.size()));
        if ((i & 63) == 0) drain_inbox(ctx, me);
      }
      break;
    case 2:  // release: free everything this thread holds or was handed
      drain_inbox(ctx, me);
      for (auto& b : me.slots) {
        if (!b.ptr) continue;
        workloads::release(b.ptr);
        ctx.live.add(-static_cast<int64_t>(b.size));
        b = Block{};
        ++ops;
      }
      break;
  }
  // Pending deltas reach the shared total before the phase barrier, so each phase ends exact.
  ctx.live.flush();
  return ops;
}

void SizeMix::teardown() {
  for (auto& s : state_) {
    Block block;
    while (s.inbox.pop(block)) workloads::release(block.ptr);
    for (auto& b : s.slots) workloads::release(b.ptr), b = Block{};
  }
}

static const bool registered = register_workload({
    "size_mix",
    "threads allocate and free from a size distribution toward a target live set; a fraction of frees happen in another thread",
    {"fill", "churn", "release"},
    {
        {"live_mib", ParamType::Int, "64", "1024", "target live set over all threads, MiB"},
        {"sizes", ParamType::String, "16-256:60,256-4K:30,4K-64K:9,64K-1M:1", "16-256:60,256-4K:30,4K-64K:9,64K-1M:1",
         "size classes LO-HI:WEIGHT, sizes drawn uniformly inside a class"},
        {"ops", ParamType::Int, "3000000", "20000000", "churn operations per thread"},
        {"remote_free", ParamType::Float, "0.25", "0.25", "fraction of frees done by another thread (threads > 1)"},
        {"touch", ParamType::Int, "1", "1", "1: write every page of each block, as an application would"},
    },
    [](const Params& p, int threads, const WorkloadEnv&) { return std::make_unique<SizeMix>(p, threads); },
    [](const Params& p) -> std::string {
      try {
        SizeDistribution::parse(p.text("sizes"));
      } catch (const std::exception& e) {
        return std::string("sizes: ") + e.what();
      }
      if (p.real("remote_free") < 0 || p.real("remote_free") > 1) return "remote_free must be within 0..1";
      if (p.integer("ops") < 0) return "ops must be >= 0";
      if (p.integer("live_mib") <= 0) return "live_mib must be > 0";
      return "";
    },
});

}  // namespace allocmark::workloads
