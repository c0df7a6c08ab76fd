#include "workloads/address_sample.h"

#include <algorithm>
#include <memory>

namespace allocmark::workloads::address_sample {

constinit thread_local Ring* t_ring = nullptr;

namespace {
std::unique_ptr<Ring[]> g_rings;
int g_count = 0;
}  // namespace

void configure(int threads) {
  g_rings = std::make_unique<Ring[]>(static_cast<std::size_t>(threads));
  g_count = threads;
}

void bind_thread(int index) { t_ring = index >= 0 && index < g_count ? &g_rings[index] : nullptr; }

int rings() { return g_count; }

std::size_t take(int index, Sample* out) {
  Ring& r = g_rings[index];
  std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(r.recorded, kRingSize));
  std::copy_n(r.entries.begin(), n, out);
  r.recorded = 0;
  return n;
}

}  // namespace allocmark::workloads::address_sample
