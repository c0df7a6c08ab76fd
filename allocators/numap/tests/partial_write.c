// A program that reserves more than it writes (issue 41): T threads each keep SLOTS blocks of
// 16 B-256 KiB (log-uniform), replacing a random one OPS times; each new block has only its first
// WRITE bytes written (0: all of it), and half of the blocks a thread replaces are freed by the
// next thread (handed over through a locked inbox). What the kernel says the process held is
// printed at the end: whatever the allocator, RSS follows the written pages, not the sizes asked.
//   numap_partial_write [THREADS [OPS [SLOTS [WRITE]]]]   (defaults 4 200000 2000 256)
// Output: one line "VmHWM=<kB> VmRSS=<kB> wall_s=<s> written_mib=<MiB> asked_mib=<MiB>" (the last
// two: the live blocks' written and requested bytes at the end).
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kInbox = 4096 };

struct inbox {
  pthread_mutex_t lock;
  int count;
  void* items[kInbox];
};

static int threads = 4, slots = 2000;
static long ops = 200000;
static size_t write_bytes = 256;
static struct inbox* boxes;
static uint64_t* asked;
static uint64_t* written;

static uint64_t next(uint64_t* s) {  // xorshift64*
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static void drain(struct inbox* b) {
  void* local[kInbox];
  pthread_mutex_lock(&b->lock);
  int n = b->count;
  memcpy(local, b->items, (size_t)n * sizeof(void*));
  b->count = 0;
  pthread_mutex_unlock(&b->lock);
  for (int i = 0; i < n; ++i) free(local[i]);
}

static void* run(void* arg) {
  const int me = (int)(intptr_t)arg;
  uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1);
  void** block = calloc((size_t)slots, sizeof(void*));
  size_t* size = calloc((size_t)slots, sizeof(size_t));
  struct inbox* to = &boxes[(me + 1) % threads];
  for (long op = 0; op < ops; ++op) {
    if ((op & 63) == 0) drain(&boxes[me]);
    const int i = (int)(next(&rng) % (uint64_t)slots);
    if (block[i] != NULL) {
      int handed = 0;
      if (threads > 1 && (next(&rng) & 1)) {
        pthread_mutex_lock(&to->lock);
        if (to->count < kInbox) {
          to->items[to->count++] = block[i];
          handed = 1;
        }
        pthread_mutex_unlock(&to->lock);
      }
      if (!handed) free(block[i]);
    }
    // log-uniform in [16, 256 KiB]: 2^(4 + 14 u)
    const double u = (double)(next(&rng) >> 11) / 9007199254740992.0;
    size_t n = (size_t)(16.0 * __builtin_exp2(14.0 * u));
    if (n < 16) n = 16;
    char* p = malloc(n);
    if (p == NULL) {
      fprintf(stderr, "malloc(%zu) failed\n", n);
      exit(1);
    }
    memset(p, (int)(op & 0xff) | 1, write_bytes == 0 || write_bytes > n ? n : write_bytes);
    block[i] = p;
    size[i] = n;
  }
  uint64_t a = 0, w = 0;
  for (int i = 0; i < slots; ++i)
    if (block[i] != NULL) {
      a += size[i];
      w += write_bytes == 0 || write_bytes > size[i] ? size[i] : write_bytes;
    }
  asked[me] = a;
  written[me] = w;
  return block;  // freed by main after the figures are read
}

static long status_kb(const char* name) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  const size_t len = strlen(name);
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, name, len) == 0 && line[len] == ':') v = strtol(line + len + 1, NULL, 10);
  if (f != NULL) fclose(f);
  return v;
}

int main(int argc, char** argv) {
  if (argc > 1) threads = atoi(argv[1]);
  if (argc > 2) ops = atol(argv[2]);
  if (argc > 3) slots = atoi(argv[3]);
  if (argc > 4) write_bytes = (size_t)atol(argv[4]);
  if (threads < 1 || threads > 256 || ops < 1 || slots < 1) {
    fprintf(stderr, "usage: numap_partial_write [THREADS [OPS [SLOTS [WRITE]]]]\n");
    return 2;
  }
  boxes = calloc((size_t)threads, sizeof *boxes);
  asked = calloc((size_t)threads, sizeof *asked);
  written = calloc((size_t)threads, sizeof *written);
  pthread_t* t = calloc((size_t)threads, sizeof *t);
  for (int i = 0; i < threads; ++i) pthread_mutex_init(&boxes[i].lock, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, run, (void*)(intptr_t)i);
  void** left[256];
  for (int i = 0; i < threads; ++i) pthread_join(t[i], (void**)&left[i]);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  uint64_t a = 0, w = 0;
  for (int i = 0; i < threads; ++i) {
    a += asked[i];
    w += written[i];
  }
  printf("VmHWM=%ld VmRSS=%ld wall_s=%.3f written_mib=%.1f asked_mib=%.1f\n", status_kb("VmHWM"), status_kb("VmRSS"),
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, (double)w / 1048576.0,
         (double)a / 1048576.0);
  for (int i = 0; i < threads; ++i) {
    drain(&boxes[i]);
    for (int j = 0; j < slots; ++j) free(left[i][j]);
    free(left[i]);
  }
  return 0;
}
