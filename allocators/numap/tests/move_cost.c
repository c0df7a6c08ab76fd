// numap_move_cost: what a page move, or a populate, costs against the page faults it saves (issue
// 24, "Page moves across classes" in docs/benchmarks.md). For each size, the median of many rounds of
//   move:    mremap(MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP) of resident pages to another
//            address of the same mapping, as numap's move_in does, then a write to each moved page;
//   refault: madvise(MADV_DONTNEED) of resident pages, then a write to each page (a fault and a
//            zeroed page each), which is what the exchange and the free limit cost a chunk that
//            needs fresh pages while other classes' pages were given back;
//   populate: the same discard, then one madvise(MADV_POPULATE_WRITE) (Linux 5.14) before the
//            writes: the same zeroed pages without a trap each, as NUMAP_POPULATE makes a busy
//            class's new slab resident ("Busy classes' slabs populated in one call").
// Plain C and system calls only, so it measures the kernel and nothing of allocmark or numap.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { kRounds = 201, kPage = 4096 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void touch(char* p, size_t bytes, char v) {
  for (size_t o = 0; o < bytes; o += kPage) p[o] = v;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[n / 2];
}

int main(void) {
  static const size_t sizes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
  printf("bytes,move_us,refault_us,populate_us,refault_over_move,refault_over_populate\n");
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; ++k) {
    const size_t bytes = sizes[k];
    // One anonymous mapping with a source and a destination half, as numap's arena holds both
    // classes in one reservation.
    char* base = mmap(NULL, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return perror("mmap"), 1;
    madvise(base, 2 * bytes, MADV_NOHUGEPAGE);
    char *from = base, *to = base + bytes;
    double move[kRounds], refault[kRounds], populate[kRounds];
    for (int r = 0; r < kRounds; ++r) {
      touch(from, bytes, (char)r);
      madvise(to, bytes, MADV_DONTNEED);
      double t0 = now_us();
      if (mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to) == MAP_FAILED)
        return perror("mremap(MREMAP_DONTUNMAP)"), 1;
      touch(to, bytes, (char)(r + 1));
      move[r] = now_us() - t0;
      // The moved range is a mapping of its own now; a fresh one over both halves merges them back
      // (numap's discard_run), so every round starts from one mapping.
      if (mmap(base, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
               0) == MAP_FAILED)
        return perror("mmap(MAP_FIXED)"), 1;
      madvise(base, 2 * bytes, MADV_NOHUGEPAGE);
      touch(to, bytes, (char)r);
      t0 = now_us();
      madvise(to, bytes, MADV_DONTNEED);
      touch(to, bytes, (char)(r + 1));
      refault[r] = now_us() - t0;
      t0 = now_us();
      madvise(to, bytes, MADV_DONTNEED);
      if (madvise(to, bytes, MADV_POPULATE_WRITE) != 0) return perror("madvise(MADV_POPULATE_WRITE)"), 1;
      touch(to, bytes, (char)(r + 2));
      populate[r] = now_us() - t0;
    }
    const double m = median(move, kRounds), f = median(refault, kRounds), p = median(populate, kRounds);
    printf("%zu,%.1f,%.1f,%.1f,%.2f,%.2f\n", bytes, m, f, p, f / m, f / p);
    munmap(base, 2 * bytes);
  }
  return 0;
}
