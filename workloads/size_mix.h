#pragma once

#include <vector>

#include "workloads/rng.h"
#include "workloads/spsc_ring.h"
#include "workloads/workload.h"

namespace allocmark::workloads {

// Weighted size classes "LO-HI:WEIGHT,..."; sizes are uniform inside a class.
class SizeDistribution {
 public:
  static SizeDistribution parse(const std::string& text);  // throws std::invalid_argument
  std::size_t draw(Rng& rng) const;
  double mean() const { return mean_; }

 private:
  struct Range {
    std::size_t lo, hi;
    double cumulative;
  };
  std::vector<Range> ranges_;
  double total_weight_ = 0;
  double mean_ = 0;
};

class SizeMix final : public Workload {
 public:
  SizeMix(const Params& params, int threads);
  const std::vector<std::string>& phases() const override;
  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override;
  void teardown() override;

 private:
  struct Block {
    void* ptr = nullptr;
    std::size_t size = 0;
  };
  struct alignas(64) ThreadState {
    std::vector<Block> slots;
    SpscRing<Block> inbox;  // blocks another thread allocated and this one frees
    Rng rng;
  };
  void release_block(ThreadContext& ctx, ThreadState& me, Block block);
  void drain_inbox(ThreadContext& ctx, ThreadState& me);
  uint64_t replace(ThreadContext& ctx, ThreadState& me, std::size_t slot);

  int threads_;
  SizeDistribution sizes_;
  double remote_fraction_;
  int64_t ops_;
  int64_t seed_;
  bool touch_;
  std::vector<ThreadState> state_;
};

}  // namespace allocmark::workloads
