// free()'s tail in a release, outside the harness (issue 45, target 4): one thread allocates and
// writes 256 MiB in percall's release mix (16-256 B 90%, 256 B-4 KiB 9%, 4-64 KiB 0.9%, 64 KiB-1 MiB
// 0.09%, 1-8 MiB 0.01% of the blocks, sizes uniform inside a class), shuffles the blocks and frees
// them one by one, each free timed alone. Prints the count, the p99.9 and the slowest frees with
// their sizes, under whatever allocator is preloaded (docs/benchmarks.md, "free()'s tail latency:
// the overflow's batch").
//   numap_free_tail [SLOWEST]   (default 20)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct timed {
  double ns;
  size_t size;
  int index;
};

static uint64_t state = 88172645463325252ull;
static uint64_t next(void) {  // xorshift64
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static size_t draw_size(void) {
  static const struct {
    double upto;  // cumulative weight, percent of the blocks
    size_t lo, hi;
  } classes[] = {{90, 16, 256}, {99, 256, 4096}, {99.9, 4096, 65536}, {99.99, 65536, 1 << 20}, {100, 1 << 20, 8 << 20}};
  const double u = (double)(next() % 10000000) / 1e5;
  for (size_t c = 0; c < sizeof classes / sizeof classes[0]; ++c)
    if (u < classes[c].upto) return classes[c].lo + next() % (classes[c].hi - classes[c].lo);
  return 16;
}

static int slower_first(const void* a, const void* b) {
  const double x = ((const struct timed*)a)->ns, y = ((const struct timed*)b)->ns;
  return x < y ? 1 : x > y ? -1 : 0;
}

int main(int argc, char** argv) {
  const int slowest = argc > 1 ? atoi(argv[1]) : 20;
  enum { kMaxBlocks = 4000000 };
  void** blocks = malloc(kMaxBlocks * sizeof *blocks);
  size_t* sizes = malloc(kMaxBlocks * sizeof *sizes);
  struct timed* times = malloc(kMaxBlocks * sizeof *times);
  if (!blocks || !sizes || !times) return 1;
  int n = 0;
  for (size_t total = 0; total < (256u << 20) && n < kMaxBlocks; ++n) {
    sizes[n] = draw_size();
    blocks[n] = malloc(sizes[n]);
    if (!blocks[n]) return 1;
    memset(blocks[n], 1, sizes[n]);
    total += sizes[n];
  }
  for (int i = n - 1; i > 0; --i) {
    const int j = (int)(next() % (uint64_t)(i + 1));
    void* b = blocks[i];
    blocks[i] = blocks[j];
    blocks[j] = b;
    const size_t s = sizes[i];
    sizes[i] = sizes[j];
    sizes[j] = s;
  }
  for (int i = 0; i < n; ++i) {
    const double start = now_ns();
    free(blocks[i]);
    times[i] = (struct timed){now_ns() - start, sizes[i], i};
  }
  qsort(times, (size_t)n, sizeof *times, slower_first);
  printf("frees=%d p99.9_ns=%.0f p99_ns=%.0f\n", n, times[n / 1000].ns, times[n / 100].ns);
  for (int k = 0; k < slowest && k < n; ++k) printf("  %.0f ns, %zu B, free #%d\n", times[k].ns, times[k].size, times[k].index);
  return 0;
}
