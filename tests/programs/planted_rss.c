/* A program whose memory an allocator can or cannot change (tests/answer_test.py, advise):
 *   small-blocks  2 M blocks of 16 bytes, touched and kept to the end: glibc's smallest chunk is
 *                 32 bytes (16 of header and alignment), jemalloc's size class is 16, so glibc's
 *                 peak RSS is about twice jemalloc's, the same on every run;
 *   mmap-only     64 MiB from mmap, touched, unmapped: malloc never sees it, so every allocator
 *                 holds the same.
 * Both then sleep 0.2 s, so the wall time is the same under every allocator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { kBlocks = 2 * 1024 * 1024, kBlock = 16, kMapped = 64 << 20 };

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "small-blocks") == 0) {
    char** blocks = malloc(sizeof(char*) * kBlocks);
    if (!blocks) return 1;
    for (int i = 0; i < kBlocks; ++i) {
      blocks[i] = malloc(kBlock);
      if (!blocks[i]) return 1;
      memset(blocks[i], i, kBlock);
    }
    unsigned sum = 0;
    for (int i = 0; i < kBlocks; i += 4096) sum += (unsigned char)blocks[i][0];
    printf("%u\n", sum);
  } else if (strcmp(mode, "mmap-only") == 0) {
    char* mapped = mmap(NULL, kMapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return 1;
    for (size_t i = 0; i < kMapped; i += 4096) mapped[i] = 1;
    munmap(mapped, kMapped);
    printf("0\n");
  } else {
    fprintf(stderr, "usage: planted_rss small-blocks|mmap-only\n");
    return 2;
  }
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  return 0;
}
