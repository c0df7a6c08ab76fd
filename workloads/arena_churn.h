#pragma once

#include <pthread.h>

#include <atomic>
#include <memory>
#include <vector>

#include "workloads/rng.h"
#include "workloads/spsc_ring.h"
#include "workloads/workload.h"

namespace allocmark::workloads {

// A Tomcat-style request pool whose threads come and go (docs/workloads.md, arena_churn).
class ArenaChurn final : public Workload {
 public:
  ArenaChurn(const Params& params, int threads, const WorkloadEnv& env);
  ~ArenaChurn() override;
  const std::vector<std::string>& phases() const override;
  uint64_t run_phase(std::size_t phase, ThreadContext& ctx) override;
  void teardown() override;
  nlohmann::json phase_metrics(std::size_t phase) override;

  int pool_size() const { return pool_; }
  // Requested bytes the long-lived objects hold now: after every phase this is the whole live set.
  int64_t long_lived_bytes() const;
  // A digest of every slot's operation sequence (kinds and sizes), independent of how the OS
  // interleaved the threads: the same seed gives the same digest.
  uint64_t trace_digest() const;

 private:
  struct Obj {
    void* ptr = nullptr;
    std::size_t size = 0;
  };
  // Counters of one pool slot, cumulative over the run.
  struct Counters {
    uint64_t requests = 0, objects = 0, big_buffers = 0, big_bytes = 0, remote_frees = 0, handover_waits = 0,
             long_lived_made = 0, threads_created = 0;
  };
  // One position in the pool. Threads occupying it follow one another (the next starts after the
  // previous was joined), so the slot's state passes from each to its successor.
  struct alignas(64) Slot {
    ArenaChurn* owner = nullptr;
    Rng rng;
    std::vector<Obj> request;     // this request's short-lived objects (capacity fixed up front)
    std::vector<Obj> evicted;     // long-lived objects this request replaced, freed with its own
    std::vector<Obj> long_lived;  // FIFO ring: the oldest long-lived object goes when it is full
    std::size_t ll_head = 0, ll_count = 0;
    int64_t ll_bytes = 0;
    SpscRing<Obj> handover;  // objects the slot's threads leave for the crew thread to free
    int64_t requests_left = 0;  // in the current phase, not yet given to a thread
    double remote = 0;          // the current request's share of objects freed by the crew
    int64_t life = 0;           // requests the running thread serves before it exits
    std::size_t phase = 0;      // the phase the running thread serves
    int64_t wave = 0;           // the wave of the running thread's next request
    std::atomic<int64_t> waves_freed{0};  // waves whose frees the slot's threads have made
    pthread_t thread{};
    bool running = false;
    int64_t wave_end = 0;       // the wave after the running thread's last request
    LiveBytes::Local live;  // the running pool thread's accounting
    Counters counters;
    uint64_t trace = 0;
  };

  static void* pool_main(void* slot);
  void serve(Slot& s);
  void allocate_request(Slot& s);
  void free_request(Slot& s);
  void* allocate(Slot& s, std::size_t size);
  void keep_long(Slot& s, Obj o);
  void wait(pthread_barrier_t& barrier);
  void spawn(Slot& s, ThreadContext& ctx);
  bool drain(Slot& s, ThreadContext& ctx);
  uint64_t run_pool(std::size_t phase, ThreadContext& ctx);
  int active_slots(std::size_t phase) const;
  Counters totals() const;

  int threads_;
  int pool_;
  int steady_active_;
  int64_t requests_[2];  // per slot, burst and steady
  int64_t life_min_, life_max_;
  int64_t allocs_min_, allocs_max_;
  std::size_t obj_min_, obj_max_, big_min_, big_max_;
  double big_chance_;
  double remote_min_, remote_max_, long_min_, long_max_;
  int64_t idle_ms_;
  bool waves_;
  WorkloadEnv env_;
  pthread_attr_t attr_;
  // Per pool phase (burst, steady): `allocated` releases a wave's frees once every active slot
  // has allocated its request; `drained` releases the next wave once the crew freed every handover.
  pthread_barrier_t allocated_[2], drained_[2];
  std::unique_ptr<Slot[]> slots_;
  Counters reported_;  // totals at the end of the previous phase
  uint64_t idle_rss_start_ = 0, idle_rss_end_ = 0;
};

}  // namespace allocmark::workloads
