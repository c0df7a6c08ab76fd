// orc_scan: the seed "War of the Allocators" (Velox): jemalloc held 31 GB RSS for a 24 GB target
// where Velox's mmap allocator held 24 GB. Two parts run together in every phase:
//  - a scan pipeline: reader threads load stripes as coalesced reads and decompress each stream
//    into a per-stream buffer that is reused and grown; driver threads consume the loaded reads
//    and free them, so those frees cross threads;
//  - on each driver, Velox's FragmentationBenchmark: sizes drawn from a table of exactly-128 KiB,
//    uniform 4-400 KiB and uniform 1-8 MiB blocks (equal bytes per class) plus a few huge
//    blocks, a cap on the live set, and before each allocation random victims among the oldest
//    10% freed until the new block fits; every page written.
// The pattern's cap is the target minus what the pipeline can hold at most, so the live set never
// exceeds the target and an allocator that returned every free page would show RSS ~= target.
#include "workloads/orc_scan.h"
#include "workloads/call_latency.h"
#include "workloads/refused.h"
#include "workloads/touch.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace allocmark::workloads {

namespace {

constexpr std::size_t kPage = 4096;

std::size_t round_page(std::size_t n) { return (n + kPage - 1) / kPage * kPage; }

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

volatile unsigned g_sink;

std::vector<std::pair<uint64_t, uint64_t>> parse_classes(const std::string& text) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t dash = item.find('-');
    if (dash == std::string::npos) throw std::invalid_argument("size class '" + item + "' is not LO-HI");
    uint64_t lo = parse_bytes(item.substr(0, dash)), hi = parse_bytes(item.substr(dash + 1));
    if (lo == 0 || hi < lo) throw std::invalid_argument("size class '" + item + "' needs 0 < LO <= HI");
    out.emplace_back(lo, hi);
  }
  if (out.empty() || text.back() == ',') throw std::invalid_argument("classes: need LO-HI[,LO-HI...]");
  return out;
}

std::vector<uint64_t> parse_list(const std::string& text, double scale) {
  std::vector<uint64_t> out;
  if (text.empty()) return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    uint64_t v = round_page(static_cast<uint64_t>(parse_bytes(item) * scale));
    if (v == 0) throw std::invalid_argument("huge block size '" + item + "' must be > 0");
    out.push_back(v);
  }
  return out;
}

uint64_t scaled(const Params& p, const std::string& name) {
  return round_page(static_cast<uint64_t>(static_cast<double>(p.bytes(name)) * p.real("scale")));
}

// The seed's table holds class_bytes worth of random sizes per class plus one entry per huge
// block, and draws entries uniformly; drawing a class with weight = entries it would hold, then a
// size inside it, has the same distribution without a table of tens of thousands of entries.
std::string distribution_text(const Params& p) {
  double class_bytes = static_cast<double>(scaled(p, "class_bytes"));
  std::string text;
  for (auto [lo, hi] : parse_classes(p.text("classes"))) {
    double weight = class_bytes / ((lo + hi) / 2.0);
    text += std::to_string(lo) + "-" + std::to_string(hi) + ":" + std::to_string(weight) + ",";
  }
  for (uint64_t h : parse_list(p.text("huge_sizes"), p.real("scale")))
    text += std::to_string(h) + "-" + std::to_string(h) + ":1,";
  text.pop_back();
  return text;
}

struct Layout {
  int readers, drivers;
  uint64_t reserve, cap_share, largest;
};

// Roles by thread index: with one thread it is reader and driver in turn; otherwise the first
// half (rounded down) read and the rest drive, so there are never more readers than drivers.
Layout layout(const Params& p, int threads) {
  Layout l{};
  l.readers = threads == 1 ? 1 : threads / 2;
  l.drivers = threads == 1 ? 1 : threads - l.readers;
  uint64_t stripe = scaled(p, "stripe_bytes");
  uint64_t per_reader = static_cast<uint64_t>(p.integer("streams")) * round_page(p.bytes("max_stream_buffer"));
  uint64_t per_driver = threads == 1 ? stripe : static_cast<uint64_t>(p.integer("prefetch") + 2) * stripe;
  l.reserve = l.drivers * per_driver + l.readers * per_reader;
  uint64_t target = scaled(p, "target");
  l.cap_share = target > l.reserve ? (target - l.reserve) / l.drivers : 0;
  l.largest = 0;
  for (auto [lo, hi] : parse_classes(p.text("classes"))) l.largest = std::max<uint64_t>(l.largest, round_page(hi));
  for (uint64_t h : parse_list(p.text("huge_sizes"), p.real("scale"))) l.largest = std::max(l.largest, h);
  return l;
}

std::string check_layout(const Params& p, int threads) {
  Layout l = layout(p, threads);
  if (l.cap_share < l.largest)
    return "with " + std::to_string(threads) + " thread(s) the pipeline may hold " + std::to_string(l.reserve) +
           " bytes of the " + std::to_string(scaled(p, "target")) + "-byte target, leaving " +
           std::to_string(l.cap_share) + " per driver for the pattern, less than its largest block (" +
           std::to_string(l.largest) + "): raise target or lower stripe_bytes, prefetch, streams or huge_sizes";
  return "";
}

}  // namespace

OrcScan::OrcScan(const Params& params, int threads, const WorkloadEnv& env)
    : threads_(threads),
      target_(scaled(params, "target")),
      volume_(scaled(params, "volume")),
      stripe_bytes_(scaled(params, "stripe_bytes")),
      max_read_(round_page(params.bytes("max_read"))),
      max_stream_buffer_(round_page(params.bytes("max_stream_buffer"))),
      stripe_alloc_ratio_(params.real("stripe_alloc_ratio")),
      streams_(static_cast<int>(params.integer("streams"))),
      prefetch_(static_cast<int>(params.integer("prefetch"))),
      sizes_(SizeDistribution::parse(distribution_text(params))),
      env_(env),
      state_(threads) {
  if (std::string problem = check_layout(params, threads); !problem.empty()) throw std::invalid_argument(problem);
  Layout l = layout(params, threads);
  readers_ = l.readers;
  drivers_ = l.drivers;
  pipeline_reserve_ = l.reserve;
  pattern_cap_share_ = l.cap_share;
  huge_threshold_ = 0;
  for (auto [lo, hi] : parse_classes(params.text("classes"))) huge_threshold_ = std::max<uint64_t>(huge_threshold_, round_page(hi));

  int64_t seed = params.integer("seed");
  // The smallest read a stripe is cut into is max_read / 8 (and the tail), so this bounds them.
  std::size_t max_reads = stripe_bytes_ / std::max<uint64_t>(kPage, round_page(max_read_ / 8)) + 2;
  for (int t = 0; t < threads; ++t) {
    ThreadState& s = state_[t];
    s.rng = Rng(static_cast<uint64_t>(seed) * 1000003 + t);
    bool reader = threads == 1 || t < readers_;
    bool driver = threads == 1 || t >= readers_;
    if (reader) s.streams.assign(streams_, Buf{});
    if (driver) {
      // Every pattern block is at least a page, so the cap bounds how many are live.
      s.table.assign(pattern_cap_share_ / kPage + 2, Buf{});
      // A stripe in the ring, one being consumed and one being loaded: see run_reader.
      std::size_t nslots = threads == 1 ? 1 : static_cast<std::size_t>(prefetch_) + 2;
      s.slots.resize(nslots);
      for (auto& slot : s.slots) slot.reads.assign(max_reads, Buf{});
      s.inbox.reserve(static_cast<std::size_t>(prefetch_));
    }
  }
}

OrcScan::~OrcScan() { teardown(); }

const std::vector<std::string>& OrcScan::phases() const {
  static const std::vector<std::string> names{"warmup", "steady", "drain"};
  return names;
}

void OrcScan::sample_rss() {
  if (!env_.rss_bytes) return;
  uint64_t rss = env_.rss_bytes();
  uint64_t seen = sampled_peak_rss_.load(std::memory_order_relaxed);
  while (rss > seen && !sampled_peak_rss_.compare_exchange_weak(seen, rss, std::memory_order_relaxed)) {
  }
}

void OrcScan::load_stripe(ThreadContext& ctx, ThreadState& me, Stripe& out) {
  // Coalesced reads: neighbouring streams are fetched together, up to max_read at a time.
  uint64_t remaining = stripe_bytes_;
  uint64_t min_read = std::max<uint64_t>(kPage, round_page(max_read_ / 8));
  out.count = 0;
  while (remaining > 0) {
    uint64_t size = min_read >= max_read_ ? max_read_ : round_page(min_read + me.rng.below(max_read_ - min_read + 1));
    size = std::min(size, remaining);
    void* p = workloads::allocate(size);
    if (!p) allocation_refused(size);
    touch_block(p, size, static_cast<unsigned char>(size >> 12));
    ctx.live.add(static_cast<int64_t>(size));
    me.trace = mix(me.trace, size);
    out.reads[out.count++] = Buf{p, size};
    remaining -= size;
    me.counters.mallocs++;
    me.counters.read_buffers++;
    me.counters.read_bytes += size;
  }
  // Decompression: each stream's next chunk lands in that stream's buffer; a chunk larger than
  // the buffer grows it (new buffer, old contents copied, old freed), as a resizable buffer does.
  for (int k = 0; k < streams_; ++k) {
    Buf& b = me.streams[k];
    std::size_t chunk = round_page(kPage + me.rng.below(max_stream_buffer_ - kPage + 1));
    if (chunk > b.size) {
      std::size_t grown = std::min<std::size_t>(max_stream_buffer_, std::max(chunk, b.size * 2));
      void* p = workloads::allocate(grown);
      if (!p) allocation_refused(grown);
      if (b.ptr) std::memcpy(p, b.ptr, written_bytes(b.size));
      workloads::release(b.ptr);
      ctx.live.add(static_cast<int64_t>(grown) - static_cast<int64_t>(b.size));
      me.trace = mix(me.trace, grown);
      b = Buf{p, grown};
      me.counters.mallocs++;
      me.counters.stream_grows++;
    }
    const Buf& src = out.reads[static_cast<std::size_t>(k) % out.count];
    auto* dst = static_cast<volatile unsigned char*>(b.ptr);
    auto* in = static_cast<const unsigned char*>(src.ptr);
    for (std::size_t off = 0; off < written_bytes(chunk); off += kPage) dst[off] = in[off % src.size];
  }
  me.counters.stripes_loaded++;
  sample_rss();
}

void OrcScan::consume_stripe(ThreadContext& ctx, ThreadState& me, Stripe& stripe) {
  unsigned sum = 0;
  for (std::size_t i = 0; i < stripe.count; ++i) {
    Buf& b = stripe.reads[i];
    // What the reader wrote, as a real consumer reads: under `writes` below `all`, reading the
    // unwritten rest would be reading zeros no program reads, and makes those pages resident on a
    // kernel without the shared zero page (this project's machines boot with pvm_no_zero_page=1).
    sum += read_pages(b.ptr, written_bytes(b.size));
    workloads::release(b.ptr);
    ctx.live.add(-static_cast<int64_t>(b.size));
    b = Buf{};
  }
  stripe.count = 0;
  g_sink = sum;
  me.counters.stripes_consumed++;
}

void OrcScan::make_space(ThreadContext& ctx, ThreadState& me, std::size_t size) {
  const std::size_t cap = me.table.size();
  while (me.pattern_live + size > pattern_cap_share_ && me.count > 0) {
    // The seed's victim: uniform among the oldest tenth of the live blocks.
    std::size_t victim = me.rng.below(1 + me.count / 10);
    me.trace = mix(me.trace, victim);
    Buf& b = me.table[(me.head + victim) % cap];
    workloads::release(b.ptr);
    ctx.live.add(-static_cast<int64_t>(b.size));
    me.pattern_live -= b.size;
    // Close the gap by shifting the older blocks one place towards the newer ones.
    for (std::size_t i = victim; i > 0; --i) me.table[(me.head + i) % cap] = me.table[(me.head + i - 1) % cap];
    me.table[me.head] = Buf{};
    me.head = (me.head + 1) % cap;
    me.count--;
    me.counters.evictions++;
  }
}

void OrcScan::pattern_until(ThreadContext& ctx, ThreadState& me, uint64_t& done, uint64_t goal) {
  while (done < goal) {
    std::size_t size = round_page(sizes_.draw(me.rng));
    make_space(ctx, me, size);
    void* p = workloads::allocate(size);
    if (!p) allocation_refused(size);
    touch_block(p, size, 1);
    ctx.live.add(static_cast<int64_t>(size));
    me.trace = mix(me.trace, size);
    me.table[(me.head + me.count) % me.table.size()] = Buf{p, size};
    me.count++;
    me.pattern_live += size;
    done += size;
    me.counters.mallocs++;
    me.counters.pattern_allocs++;
    me.counters.pattern_bytes += size;
    if (size > huge_threshold_) me.counters.huge_allocs++;
    if ((me.counters.pattern_allocs & 15) == 0) sample_rss();
  }
}

uint64_t OrcScan::phase_volume(std::size_t phase) const {
  // Per driver: warmup fills the pattern's cap once, steady allocates its share of `volume`.
  if (phase == 0) return pattern_cap_share_;
  if (phase == 1) return volume_ / drivers_;
  return 0;
}

uint64_t OrcScan::stripes_for(uint64_t volume) const {
  uint64_t per_stripe = std::max<uint64_t>(1, static_cast<uint64_t>(stripe_bytes_ * stripe_alloc_ratio_));
  return (volume + per_stripe - 1) / per_stripe;
}

void OrcScan::run_reader(ThreadContext& ctx, uint64_t volume) {
  ThreadState& me = state_[ctx.index];
  const uint64_t stripes = stripes_for(volume);
  // This reader feeds drivers r, r + readers, ...; each gets the same number of stripes.
  for (uint64_t n = 0; n < stripes; ++n) {
    for (int d = ctx.index; d < drivers_; d += readers_) {
      ThreadState& driver = state_[readers_ + d];
      // Slots are used in turn. Loading stripe n starts only after n-1 was pushed, so the ring
      // (prefetch), the driver's current stripe and this one are prefetch + 2 consecutive slots.
      uint32_t slot = static_cast<uint32_t>(driver.next_slot++ % driver.slots.size());
      load_stripe(ctx, me, driver.slots[slot]);
      while (!driver.inbox.push(slot)) sched_yield();
    }
  }
}

void OrcScan::run_driver(ThreadContext& ctx, int driver_thread, uint64_t volume, bool also_reader) {
  ThreadState& me = state_[driver_thread];
  const uint64_t stripes = stripes_for(volume);
  const uint64_t per_stripe = std::max<uint64_t>(1, static_cast<uint64_t>(stripe_bytes_ * stripe_alloc_ratio_));
  uint64_t done = 0;
  for (uint64_t n = 0; n < stripes; ++n) {
    Stripe* stripe;
    if (also_reader) {
      stripe = &me.slots[0];
      load_stripe(ctx, me, *stripe);
    } else {
      uint32_t slot;
      while (!me.inbox.pop(slot)) sched_yield();
      stripe = &me.slots[slot];
    }
    consume_stripe(ctx, me, *stripe);
    // The operator builds state as it consumes: per_stripe bytes of pattern per stripe.
    pattern_until(ctx, me, done, std::min(volume, (n + 1) * per_stripe));
  }
}

uint64_t OrcScan::free_all(ThreadContext* ctx, ThreadState& s) {
  uint64_t freed = 0;
  auto release = [&](Buf& b) {
    if (!b.ptr) return;
    workloads::release(b.ptr);
    freed++;
    if (ctx) ctx->live.add(-static_cast<int64_t>(b.size));
    b = Buf{};
  };
  uint32_t slot;
  while (s.inbox.pop(slot)) {
    Stripe& st = s.slots[slot];
    for (std::size_t i = 0; i < st.count; ++i) release(st.reads[i]);
    st.count = 0;
  }
  for (auto& st : s.slots) {  // with one thread, a stripe may sit in its only slot
    for (std::size_t i = 0; i < st.count; ++i) release(st.reads[i]);
    st.count = 0;
  }
  for (std::size_t i = 0; i < s.count; ++i) release(s.table[(s.head + i) % s.table.size()]);
  s.head = s.count = 0;
  s.pattern_live = 0;
  for (auto& b : s.streams) release(b);
  return freed;
}

uint64_t OrcScan::run_phase(std::size_t phase, ThreadContext& ctx) {
  ThreadState& me = state_[ctx.index];
  uint64_t before = me.counters.mallocs;
  uint64_t freed = 0;
  if (phase <= 1) {
    uint64_t volume = phase_volume(phase);
    if (threads_ == 1) run_driver(ctx, 0, volume, true);
    else if (ctx.index < readers_) run_reader(ctx, volume);
    else run_driver(ctx, ctx.index, volume, false);
  } else {
    // drain: every stripe was consumed in its phase (readers and drivers agree on the count), so
    // what is left is each thread's own: pattern blocks and stream buffers.
    freed = free_all(&ctx, me);
  }
  ctx.live.flush();
  return me.counters.mallocs - before + freed;
}

nlohmann::json OrcScan::phase_metrics(std::size_t phase) {
  Counters sum;
  for (auto& s : state_) {
    const Counters& c = s.counters;
    sum.mallocs += c.mallocs, sum.pattern_allocs += c.pattern_allocs, sum.pattern_bytes += c.pattern_bytes;
    sum.evictions += c.evictions, sum.huge_allocs += c.huge_allocs, sum.stripes_loaded += c.stripes_loaded;
    sum.stripes_consumed += c.stripes_consumed, sum.read_buffers += c.read_buffers, sum.read_bytes += c.read_bytes;
    sum.stream_grows += c.stream_grows;
    s.counters = Counters{};
  }
  uint64_t peak = sampled_peak_rss_.exchange(0, std::memory_order_relaxed);
  nlohmann::json m{
      {"target_bytes", target_},
      {"pattern_cap_bytes", pattern_cap_share_ * drivers_},
      {"pipeline_reserve_bytes", pipeline_reserve_},
      {"readers", readers_},
      {"drivers", drivers_},
      {"pattern_allocs", sum.pattern_allocs},
      {"pattern_bytes", sum.pattern_bytes},
      {"evictions", sum.evictions},
      {"huge_allocs", sum.huge_allocs},
      {"stripes_loaded", sum.stripes_loaded},
      {"stripes_consumed", sum.stripes_consumed},
      {"read_buffers", sum.read_buffers},
      {"read_bytes", sum.read_bytes},
      {"stream_buffer_grows", sum.stream_grows},
  };
  if (env_.rss_bytes && phase < 2) {
    m["sampled_peak_rss_bytes"] = peak;
    m["sampled_peak_rss_over_target"] = static_cast<double>(peak) / static_cast<double>(target_);
  }
  return m;
}

uint64_t OrcScan::held_bytes() const {
  uint64_t held = 0;
  for (const auto& s : state_) {
    held += s.pattern_live;
    for (const auto& b : s.streams) held += b.size;
    for (const auto& st : s.slots)
      for (std::size_t i = 0; i < st.count; ++i) held += st.reads[i].size;
  }
  return held;
}

uint64_t OrcScan::trace_hash() const {
  uint64_t h = 0;
  for (const auto& s : state_) h = mix(h, s.trace);
  return h;
}

void OrcScan::teardown() {
  for (auto& s : state_) free_all(nullptr, s);
}

static const bool registered = register_workload({
    "orc_scan",
    "columnar scan (stripes as coalesced reads freed by driver threads, per-stream buffers grown) plus "
    "Velox's fragmentation pattern under a live-set cap; key figure: peak RSS / target",
    {"warmup", "steady", "drain"},
    {
        {"target", ParamType::Bytes, "384M", "24G", "cap on the live set (the seed's target); x scale"},
        {"volume", ParamType::Bytes, "1G", "2048G", "pattern bytes allocated in steady, all drivers; x scale"},
        {"classes", ParamType::String, "128K-128K,4K-400K,1M-8M", "128K-128K,4K-400K,1M-8M",
         "pattern size classes LO-HI, uniform inside, page-rounded, equal bytes per class"},
        {"class_bytes", ParamType::Bytes, "32M", "2G",
         "bytes per class in the seed's size table; with huge_sizes it sets how often huge blocks come; x scale"},
        {"huge_sizes", ParamType::String, "2M,2M,4M,8M,16M", "128M,128M,256M,512M,1G",
         "one size-table entry each (the seed's, scaled with target); each x scale"},
        {"stripe_bytes", ParamType::Bytes, "16M", "64M", "stripe size; x scale"},
        {"max_read", ParamType::Bytes, "8M", "8M", "largest coalesced read (reads are max_read/8 .. max_read)"},
        {"streams", ParamType::Int, "64", "256", "streams per stripe: per-stream decompression buffers per reader"},
        {"max_stream_buffer", ParamType::Bytes, "256K", "256K", "largest per-stream buffer (chunks 4K .. this)"},
        {"prefetch", ParamType::Int, "1", "2", "stripes queued per driver beyond the one it consumes"},
        {"stripe_alloc_ratio", ParamType::Float, "1", "1", "pattern bytes a driver allocates per stripe byte it consumes"},
        {"scale", ParamType::Float, "1", "1", "multiplies target, volume, class_bytes, huge_sizes and stripe_bytes"},
    },
    [](const Params& p, int threads, const WorkloadEnv& env) { return std::make_unique<OrcScan>(p, threads, env); },
    [](const Params& p) -> std::string {
      try {
        parse_classes(p.text("classes"));
        parse_list(p.text("huge_sizes"), 1.0);
      } catch (const std::exception& e) {
        return e.what();
      }
      if (p.real("scale") <= 0) return "scale must be > 0";
      if (p.real("stripe_alloc_ratio") <= 0) return "stripe_alloc_ratio must be > 0";
      if (p.integer("prefetch") < 1) return "prefetch must be >= 1";
      if (p.integer("streams") < 0) return "streams must be >= 0";
      if (p.bytes("max_stream_buffer") < kPage) return "max_stream_buffer must be >= 4K";
      if (p.bytes("max_read") < kPage) return "max_read must be >= 4K";
      if (scaled(p, "stripe_bytes") == 0) return "stripe_bytes must be > 0";
      // Thread counts are not known here; one thread needs the least reserve.
      return check_layout(p, 1);
    },
});

}  // namespace allocmark::workloads
