// Run with LD_PRELOAD=libnumap.so and NUMAP_CAPACITY=<bytes>. Allocates, touches and frees random
// sizes (1 KiB .. 4 MiB, then beyond the capacity) and checks against the KERNEL's figures (VmRSS,
// VmHWM from /proc/self/status, not numap's counters) that RSS never exceeds the baseline plus the
// capacity plus numap's documented metadata bound (allocators/numap/README.md), that requests
// which cannot fit fail with ENOMEM, and that the process keeps working afterwards.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cstdint>
#include <vector>

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
  for (auto& [p, n] : live) free(p);
  live.clear();
  char* again = static_cast<char*>(malloc(cap / 2));
  if (again == nullptr) {
    fprintf(stderr, "malloc(capacity / 2) failed after everything was freed\n");
    ++failures;
  } else {
    memset(again, 1, cap / 2);
    free(again);
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
