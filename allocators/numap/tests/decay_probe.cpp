// Run with LD_PRELOAD=libnumap.so. Checks decay by age against numap's counters AND the kernel's
// RSS (/proc/self/statm):
//   1. hot churn: a 48 MiB set freed and allocated again and again for 3 decay times, each chunk
//      reused within milliseconds: nothing may be advised away, RSS stays;
//   2. idle: the set freed, then nothing for 2.5 decay times; then
//      --trigger slow_path (run with NUMAP_DECAY_THREAD=0): nothing purged until one allocation
//        takes the slow path, which advises the idle pages away;
//      --trigger thread: the background thread does it with no call from the program.
//   Either way numap's decay_bytes must cover 90% of the set and the kernel's RSS drop by 75% of it.
//   3. malloc_trim purges now (young pages too) and mallinfo2 reports numap's figures.
// --trigger free_limit (run with NUMAP_FREE_PERCENT > 0, NUMAP_DECAY_MS=0): the set freed with
//   nothing else held: the free limit advises it away (numap's limited_bytes covers 90% of the set)
//   and the kernel's RSS drops by 75% of it: with NUMAP_PURGE_DELAY_MS=-1 during the frees, with no
//   time passing; otherwise the background thread does it after the frees (polled for up to 5 s:
//   eventually, never within a time asserted; how long it took is printed).
// The decay modes need NUMAP_FREE_PERCENT=0: under the free limit, freeing the whole set at once
// is a release, given back at once (that is the limit's job, not decay's).
// Nothing here allocates between the measurements (statm is read with open/read).
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

#include "allocators/numap/include/numap.h"

namespace {

// 90% of a freed set, less what thread caches may keep (NUMAP_PAGE_CACHE_BYTES for this thread's
// chunks up to 256 KiB, NUMAP_LARGE_CACHE_BYTES above: cached chunks count as in use and are neither
// aged nor limited; the thread's next calls reuse them).
uint64_t given_back_at_least(uint64_t set_bytes, long long cache_bytes) {
  const uint64_t cache = static_cast<uint64_t>(cache_bytes);
  return set_bytes > cache ? (set_bytes - cache) * 9 / 10 : 0;
}

decltype(&numap_stats) stats_fn;

struct numap_stats stats() {
  struct numap_stats s {};
  s.struct_size = sizeof s;
  stats_fn(&s, nullptr, 0);
  return s;
}

uint64_t rss_bytes() {
  char buf[128] = {};
  const int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  const char* p = strchr(buf, ' ');  // size, then resident (pages)
  return p == nullptr ? 0 : strtoull(p + 1, nullptr, 10) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

void sleep_ms(uint64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

constexpr int kBlocks = 48;
// Exact class sizes, so a chunk reused by another block of its class needs no extra pages.
constexpr size_t kSizes[] = {512 << 10, 640 << 10, 768 << 10, 1 << 20, 2 << 20};
char* blocks[kBlocks];
size_t sizes[kBlocks];

// The set, every page touched; returns its bytes.
uint64_t allocate_set() {
  uint64_t bytes = 0;
  for (int i = 0; i < kBlocks; ++i) {
    sizes[i] = kSizes[i % 5];
    bytes += sizes[i];
    blocks[i] = static_cast<char*>(malloc(sizes[i]));
    memset(blocks[i], 1, sizes[i]);
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || strcmp(argv[1], "--trigger") != 0 ||
      (strcmp(argv[2], "slow_path") != 0 && strcmp(argv[2], "thread") != 0 && strcmp(argv[2], "free_limit") != 0)) {
    fprintf(stderr, "usage: decay_probe --trigger slow_path|thread|free_limit\n");
    return 2;
  }
  const bool by_thread = strcmp(argv[2], "thread") == 0;
  const bool by_limit = strcmp(argv[2], "free_limit") == 0;
  stats_fn = reinterpret_cast<decltype(&numap_stats)>(dlsym(RTLD_DEFAULT, "numap_stats"));
  auto* option_fn = reinterpret_cast<decltype(&numap_option)>(dlsym(RTLD_DEFAULT, "numap_option"));
  if (stats_fn == nullptr || option_fn == nullptr) {
    fprintf(stderr, "decay_probe: numap_stats not found: libnumap.so is not preloaded\n");
    return 1;
  }
  long long decay_ms = 0, thread_on = -1, free_percent = -1, page_cache = -1, large_cache = -1, purge_delay = -2;
  const char* name = nullptr;
  const char* text = nullptr;
  long long value = 0;
  for (size_t i = 0; option_fn(i, &name, &value, &text) != 0; ++i) {
    if (strcmp(name, "DECAY_MS") == 0) decay_ms = value;
    if (strcmp(name, "DECAY_THREAD") == 0) thread_on = value;
    if (strcmp(name, "FREE_PERCENT") == 0) free_percent = value;
    if (strcmp(name, "PURGE_DELAY_MS") == 0) purge_delay = value;
    if (strcmp(name, "PAGE_CACHE_BYTES") == 0) page_cache = value;
    if (strcmp(name, "LARGE_CACHE_BYTES") == 0) large_cache = value;
  }
  if (page_cache < 0 || large_cache < 0) {
    fprintf(stderr, "decay_probe: numap_option lists no PAGE_CACHE_BYTES or LARGE_CACHE_BYTES\n");
    return 2;
  }
  const long long cache = page_cache + large_cache;
  if (by_limit) {
    if (free_percent <= 0 || decay_ms != 0 || purge_delay == -2 || (purge_delay >= 0 && thread_on != 1)) {
      fprintf(stderr,
              "decay_probe: free_limit needs NUMAP_FREE_PERCENT > 0, NUMAP_DECAY_MS=0 and NUMAP_PURGE_DELAY_MS=-1 or "
              "the decay thread (got %lld, %lld, %lld, %lld)\n",
              free_percent, decay_ms, purge_delay, thread_on);
      return 2;
    }
    const uint64_t set_bytes = allocate_set();
    const uint64_t want = given_back_at_least(set_bytes, cache);
    const struct numap_stats s0 = stats();
    const uint64_t rss0 = rss_bytes();
    for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
    const uint64_t freed_at = now_ms();
    const uint64_t at_free = stats().limited_bytes - s0.limited_bytes;
    // Queued checks: the background thread gives the pages back after the frees.
    for (int i = 0; i < 1000 && purge_delay >= 0 && stats().limited_bytes - s0.limited_bytes < want; ++i) sleep_ms(5);
    const struct numap_stats s1 = stats();
    const uint64_t rss1 = rss_bytes();
    const uint64_t limited = s1.limited_bytes - s0.limited_bytes;
    printf("decay_probe: release of %llu KiB: the free limit advised %llu KiB (%llu by the end of the frees, the rest "
           "within %llu ms after), RSS %llu -> %llu KiB\n",
           (unsigned long long)(set_bytes >> 10), (unsigned long long)(limited >> 10),
           (unsigned long long)(at_free >> 10), (unsigned long long)(now_ms() - freed_at),
           (unsigned long long)(rss0 >> 10), (unsigned long long)(rss1 >> 10));
    int bad = 0;
    if (limited < want) {
      fprintf(stderr, "decay_probe: the free limit advised %llu bytes away, expected at least %llu\n",
              (unsigned long long)limited, (unsigned long long)want);
      ++bad;
    }
    if (rss1 + set_bytes * 3 / 4 > rss0) {
      fprintf(stderr, "decay_probe: the kernel's RSS dropped by less than 3/4 of the released set\n");
      ++bad;
    }
    return bad == 0 ? 0 : 1;
  }
  if (decay_ms <= 0 || thread_on != (by_thread ? 1 : 0) || free_percent != 0) {
    fprintf(stderr, "decay_probe: needs NUMAP_DECAY_MS > 0, NUMAP_DECAY_THREAD=%d and NUMAP_FREE_PERCENT=0 (got %lld, %lld, %lld)\n",
            by_thread ? 1 : 0, decay_ms, thread_on, free_percent);
    return 2;
  }
  int failures = 0;
  const uint64_t set_bytes = allocate_set();
  // 1. Hot churn for 3 decay times.
  const struct numap_stats hot0 = stats();
  const uint64_t hot_rss0 = rss_bytes();
  const uint64_t until = now_ms() + 3 * static_cast<uint64_t>(decay_ms);
  int rounds = 0;
  while (now_ms() < until || rounds < 3) {
    for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
    for (int i = kBlocks; i-- > 0;) {
      blocks[i] = static_cast<char*>(malloc(sizes[i]));
      memset(blocks[i], rounds & 0xff, sizes[i]);
    }
    ++rounds;
  }
  const struct numap_stats hot1 = stats();
  const uint64_t hot_rss1 = rss_bytes();
  printf("decay_probe: hot churn %d rounds over %lld ms: advised %llu bytes, RSS %llu -> %llu KiB\n", rounds,
         3 * decay_ms, (unsigned long long)(hot1.advised_bytes - hot0.advised_bytes),
         (unsigned long long)(hot_rss0 >> 10), (unsigned long long)(hot_rss1 >> 10));
  if (hot1.advised_bytes != hot0.advised_bytes) {
    fprintf(stderr, "decay_probe: hot churn within the decay time advised %llu bytes away\n",
            (unsigned long long)(hot1.advised_bytes - hot0.advised_bytes));
    ++failures;
  }
  if (hot_rss1 + set_bytes / 4 < hot_rss0) {
    fprintf(stderr, "decay_probe: RSS fell during hot churn\n");
    ++failures;
  }
  // 2. Idle.
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  const struct numap_stats idle0 = stats();
  const uint64_t idle_rss0 = rss_bytes();
  const uint64_t want = given_back_at_least(set_bytes, cache);
  if (by_thread) {
    for (int i = 0; i < 200 && stats().decay_bytes - idle0.decay_bytes < want; ++i) sleep_ms(decay_ms / 4 + 1);
  } else {
    sleep_ms(static_cast<uint64_t>(decay_ms) * 5 / 2);
    if (stats().decay_bytes != idle0.decay_bytes) {
      fprintf(stderr, "decay_probe: pages were purged with no slow path and no decay thread\n");
      ++failures;
    }
    // A class never used: the allocation slow path. Volatile, so the compiler keeps the pair.
    void* volatile slow = malloc(3 << 20);
    free(slow);
  }
  const struct numap_stats idle1 = stats();
  const uint64_t idle_rss1 = rss_bytes();
  const uint64_t purged = idle1.decay_bytes - idle0.decay_bytes;
  const uint64_t dropped = idle_rss0 > idle_rss1 ? idle_rss0 - idle_rss1 : 0;
  printf("decay_probe: idle (%s): set %llu KiB, decay advised %llu KiB in %llu passes, RSS %llu -> %llu KiB\n",
         argv[2], (unsigned long long)(set_bytes >> 10), (unsigned long long)(purged >> 10),
         (unsigned long long)(idle1.decay_passes - idle0.decay_passes), (unsigned long long)(idle_rss0 >> 10),
         (unsigned long long)(idle_rss1 >> 10));
  if (purged < want) {
    fprintf(stderr, "decay_probe: numap's decay advised %llu bytes away, expected at least %llu\n",
            (unsigned long long)purged, (unsigned long long)want);
    ++failures;
  }
  if (dropped < set_bytes * 3 / 4) {
    fprintf(stderr, "decay_probe: the kernel's RSS dropped by %llu bytes, expected at least %llu\n",
            (unsigned long long)dropped, (unsigned long long)(set_bytes * 3 / 4));
    ++failures;
  }
  // 3. malloc_trim and mallinfo2 are numap's: 16 MiB in use shows in uordblks; once freed,
  // malloc_trim advises it away at once (no decay time) and the kernel's RSS drops.
  char* volatile held = static_cast<char*>(malloc(16 << 20));
  memset(held, 3, 16 << 20);
  const struct mallinfo2 in_use = mallinfo2();
  free(held);
  const uint64_t trim_rss0 = rss_bytes();
  const struct numap_stats trim0 = stats();
  const int trimmed = malloc_trim(0);
  const struct numap_stats trim1 = stats();
  const uint64_t trim_rss1 = rss_bytes();
  printf("decay_probe: mallinfo2 uordblks %zu KiB arena %zu KiB; malloc_trim -> %d, advised %llu KiB, RSS %llu -> %llu KiB\n",
         in_use.uordblks >> 10, in_use.arena >> 10, trimmed,
         (unsigned long long)((trim1.advised_bytes - trim0.advised_bytes) >> 10), (unsigned long long)(trim_rss0 >> 10),
         (unsigned long long)(trim_rss1 >> 10));
  if (in_use.uordblks < (16u << 20) || in_use.arena < in_use.uordblks) {
    fprintf(stderr, "decay_probe: mallinfo2 does not report numap's 16 MiB in use\n");
    ++failures;
  }
  if (trimmed != 1 || trim1.trims != trim0.trims + 1 || trim1.advised_bytes - trim0.advised_bytes < (16u << 20) ||
      trim_rss0 < trim_rss1 + (12u << 20)) {
    fprintf(stderr, "decay_probe: malloc_trim did not advise the freed 16 MiB away\n");
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}
