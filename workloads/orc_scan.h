#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "workloads/rng.h"
#include "workloads/size_mix.h"
#include "workloads/spsc_ring.h"
#include "workloads/workload.h"

namespace allocmark::workloads {

// orc_scan: a columnar scan (reader threads load stripes as coalesced reads and decompress them
// into per-stream buffers; driver threads consume and free the loaded reads) next to Velox's
// FragmentationBenchmark allocation pattern (a capped live set of 128 KiB, 4-400 KiB, 1-8 MiB
// and a few huge blocks, each allocation preceded by freeing random victims among the oldest
// 10%). The key figure is peak RSS over the target (the cap on the live set).
class OrcScan final : public Workload {
 public:
  OrcScan(const Params& params, int threads, const WorkloadEnv& env);
  ~OrcScan() override;
  const std::vector<std::string>& phases() const override;
  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override;
  void teardown() override;
  nlohmann::json phase_metrics(std::size_t phase) override;

  // For tests: what the workload itself holds (pattern blocks, stream buffers, stripes in
  // flight), which must equal the accounted live bytes between phases.
  uint64_t held_bytes() const;
  // For tests: a hash of every size allocated and every victim chosen, per thread in index order.
  uint64_t trace_hash() const;
  uint64_t target_bytes() const { return target_; }
  uint64_t pattern_cap_bytes() const { return pattern_cap_share_ * drivers_; }
  int readers() const { return readers_; }
  int drivers() const { return drivers_; }

 private:
  struct Buf {
    void* ptr = nullptr;
    std::size_t size = 0;
  };
  struct Stripe {
    std::vector<Buf> reads;  // capacity reserved up front
    std::size_t count = 0;
  };
  struct Counters {
    uint64_t mallocs = 0, pattern_allocs = 0, pattern_bytes = 0, evictions = 0, huge_allocs = 0;
    uint64_t stripes_loaded = 0, stripes_consumed = 0, read_buffers = 0, read_bytes = 0, stream_grows = 0;
  };
  struct alignas(64) ThreadState {
    Rng rng;
    uint64_t trace = 0;
    Counters counters;
    // Reader role: one decompression buffer per stream, reused and grown.
    std::vector<Buf> streams;
    // Driver role: the pattern's live blocks, oldest first, in a ring of fixed capacity.
    std::vector<Buf> table;
    std::size_t head = 0, count = 0;
    uint64_t pattern_live = 0;
    // Driver role: stripes handed over by this driver's reader (slot indices into `slots`).
    SpscRing<uint32_t> inbox;
    std::vector<Stripe> slots;
    uint64_t next_slot = 0;  // advanced only by the reader that feeds this driver
  };

  void load_stripe(ThreadContext& ctx, ThreadState& reader, Stripe& out);
  void consume_stripe(ThreadContext& ctx, ThreadState& driver, Stripe& stripe);
  void pattern_until(ThreadContext& ctx, ThreadState& driver, uint64_t& done, uint64_t goal);
  void make_space(ThreadContext& ctx, ThreadState& driver, std::size_t size);
  uint64_t free_all(ThreadContext* ctx, ThreadState& s);  // returns blocks freed
  uint64_t stripes_for(uint64_t volume) const;
  uint64_t phase_volume(std::size_t phase) const;
  void run_reader(ThreadContext& ctx, uint64_t volume);
  void run_driver(ThreadContext& ctx, int driver, uint64_t volume, bool also_reader);
  void sample_rss();

  int threads_, readers_, drivers_;
  uint64_t target_, volume_, stripe_bytes_, max_read_, max_stream_buffer_, pipeline_reserve_;
  uint64_t pattern_cap_share_, huge_threshold_;
  double stripe_alloc_ratio_;
  int streams_, prefetch_;
  SizeDistribution sizes_;
  WorkloadEnv env_;
  std::vector<ThreadState> state_;  // index: thread; drivers are threads readers_ .. threads-1
  std::atomic<uint64_t> sampled_peak_rss_{0};
};

}  // namespace allocmark::workloads
