// Run with LD_PRELOAD=libnumap.so and NUMAP_CAPACITY=<bytes>. Allocates, touches and frees random
// sizes (1 KiB .. 4 MiB, then beyond the capacity) and checks against the KERNEL's figures (VmRSS,
// VmHWM from /proc/self/status, not numap's counters) that RSS never exceeds the baseline plus the
// capacity plus numap's documented metadata bound (allocators/numap/README.md), that requests
// which cannot fit fail with ENOMEM (operator new: std::bad_alloc), and that the process keeps
// working afterwards. With NUMAP_DECAY_MS > 0 it also checks that, idle after the last free, decay
// advised the freed pages away: numap's decay counter moved and the kernel's VmRSS dropped by most
// of them.
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <cstdint>
#include <new>
#include <thread>
#include <vector>

#include "allocators/numap/include/numap.h"

namespace {

uint64_t status_kib(const char* key) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  uint64_t v = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = strtoull(line + strlen(key), nullptr, 10);
  if (f) fclose(f);
  return v * 1024;
}

}  // namespace

int main() {
  const char* cap_env = getenv("NUMAP_CAPACITY");
  if (cap_env == nullptr) {
    fprintf(stderr, "capacity_probe: set NUMAP_CAPACITY (and preload libnumap.so)\n");
    return 2;
  }
  auto* stats_fn = reinterpret_cast<decltype(&numap_stats)>(dlsym(RTLD_DEFAULT, "numap_stats"));
  if (stats_fn == nullptr) {
    fprintf(stderr, "capacity_probe: numap_stats not found: libnumap.so is not preloaded\n");
    return 1;
  }
  auto numap_counters = [&] {
    struct numap_stats s {};
    s.struct_size = sizeof s;
    stats_fn(&s, nullptr, 0);
    return s;
  };
  const uint64_t cap = strtoull(cap_env, nullptr, 10) << 20;  // given in MiB
  const uint64_t bound = (4u << 20) + cap / 256;             // README: metadata bound
  std::vector<std::pair<char*, size_t>> live;
  live.reserve(100000);
  free(malloc(1));
  const uint64_t baseline = status_kib("VmRSS:");
  uint64_t seed = 88172645463325252ull, enomem = 0, worst = 0;
  auto rnd = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  int failures = 0;
  for (int i = 0; i < 6000; ++i) {
    size_t n = 1024 + rnd() % ((rnd() % 16 == 0) ? (4u << 20) : (64u << 10));
    errno = 0;
    char* p = static_cast<char*>(malloc(n));
    if (p == nullptr) {
      if (errno != ENOMEM) {
        fprintf(stderr, "malloc(%zu) failed with errno %d, not ENOMEM\n", n, errno);
        ++failures;
      }
      ++enomem;
      for (size_t k = 0; k < live.size() / 2; ++k) {  // free half, at random
        size_t j = rnd() % live.size();
        free(live[j].first);
        live[j] = live.back();
        live.pop_back();
      }
      continue;
    }
    memset(p, static_cast<int>(i), n);
    live.push_back({p, n});
    if (rnd() % 3 == 0) {
      size_t j = rnd() % live.size();
      free(live[j].first);
      live[j] = live.back();
      live.pop_back();
    }
    if (i % 20 == 0) {
      const uint64_t rss = status_kib("VmRSS:");
      if (rss > worst) worst = rss;
      if (rss > baseline + cap + bound) {
        fprintf(stderr, "VmRSS %llu > baseline %llu + capacity %llu + bound %llu\n", (unsigned long long)rss,
                (unsigned long long)baseline, (unsigned long long)cap, (unsigned long long)bound);
        ++failures;
      }
    }
  }
  // One request larger than the capacity: ENOMEM, and the process goes on.
  errno = 0;
  void* too_big = malloc(cap + (1 << 20));
  if (too_big != nullptr || errno != ENOMEM) {
    fprintf(stderr, "malloc(capacity + 1 MiB) did not fail with ENOMEM\n");
    ++failures;
  }
  // operator new there (numap's, throwing through this program's libstdc++): std::bad_alloc.
  bool threw = false;
  try {
    char* q = new char[cap + (1 << 20)];
    asm volatile("" : : "r"(q) : "memory");  // not elided
    delete[] q;
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  if (!threw) {
    fprintf(stderr, "new char[capacity + 1 MiB] did not throw std::bad_alloc\n");
    ++failures;
  }
  for (auto& [p, n] : live) free(p);
  live.clear();
  char* again = static_cast<char*>(malloc(cap / 2));
  if (again == nullptr) {
    fprintf(stderr, "malloc(capacity / 2) failed after everything was freed\n");
    ++failures;
  } else {
    memset(again, 1, cap / 2);
    const char* decay_env = getenv("NUMAP_DECAY_MS");
    const long decay_ms = decay_env != nullptr ? atol(decay_env) : 0;
    if (decay_ms > 0) {
      const struct numap_stats before = numap_counters();
      const uint64_t rss_before = status_kib("VmRSS:");
      free(again);
      // The background thread (on by default) applies the decay while this thread only sleeps.
      for (int i = 0; i < 400 && numap_counters().decay_bytes - before.decay_bytes < cap / 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(decay_ms));
      const uint64_t decayed = numap_counters().decay_bytes - before.decay_bytes;
      const uint64_t rss_after = status_kib("VmRSS:");
      printf("capacity_probe: decay advised %llu KiB after the last free; VmRSS %llu -> %llu KiB\n",
             (unsigned long long)(decayed >> 10), (unsigned long long)(rss_before >> 10),
             (unsigned long long)(rss_after >> 10));
      if (decayed < cap / 2) {
        fprintf(stderr, "decay advised %llu bytes away, expected the freed %llu\n", (unsigned long long)decayed,
                (unsigned long long)(cap / 2));
        ++failures;
      }
      if (rss_after + cap / 2 * 3 / 4 > rss_before) {
        fprintf(stderr, "VmRSS fell from %llu to %llu only: the decayed pages are still resident\n",
                (unsigned long long)rss_before, (unsigned long long)rss_after);
        ++failures;
      }
    } else {
      free(again);
    }
  }
  const uint64_t hwm = status_kib("VmHWM:");
  if (hwm > baseline + cap + bound) {
    fprintf(stderr, "VmHWM %llu > baseline %llu + capacity %llu + bound %llu\n", (unsigned long long)hwm,
            (unsigned long long)baseline, (unsigned long long)cap, (unsigned long long)bound);
    ++failures;
  }
  printf("capacity_probe: capacity %llu MiB, baseline %llu KiB, worst VmRSS %llu KiB, VmHWM %llu KiB, %llu ENOMEM, %d failures\n",
         (unsigned long long)(cap >> 20), (unsigned long long)(baseline >> 10), (unsigned long long)(worst >> 10),
         (unsigned long long)(hwm >> 10), (unsigned long long)enomem, failures);
  if (enomem == 0) {
    fprintf(stderr, "the probe never reached the capacity: it tested nothing\n");
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
