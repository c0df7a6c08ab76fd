// numap_remote_free: small objects freed by another thread than the one that allocated them, the
// pattern of issue 45's "remote frees" (any allocator, preloaded; an allocmark program cell).
//
//   numap_remote_free pc OPS       one producer allocates OPS blocks of 64 B, writes each and hands
//                                  them in batches of 4096 (a 32 KiB array it allocates too), up to
//                                  64 batches in flight, to one consumer, which frees them (xmalloc-
//                                  test's shape at -s 64: one thread only allocates, one only frees)
//   numap_remote_free server OPS   two threads each replace random slots of a 4096-slot array with
//                                  new blocks of 16-512 B; every 8192 replacements they swap arrays,
//                                  so about half the frees are of the other thread's blocks
//   numap_remote_free larson OPS   the same, but each round's two threads exit and two new ones take
//                                  the arrays over (larson's shape: a server thread inherits its
//                                  exited predecessor's objects)
//   numap_remote_free scratch OPS  the main thread allocates two 8 B blocks and hands one to each of
//                                  two threads, which free it and then allocate, write 1000 times
//                                  and free an 8 B block OPS/1000 times (cache-scratch's shape: a
//                                  block freed by a thread that did not allocate it must not make two
//                                  threads write one cache line)
//
// Prints the operation count and a checksum of what was read back (the same for every allocator);
// allocmark times the cell.
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>

enum { kBatch = 4096, kRing = 64, kSlots = 4096, kRound = 8192 };

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t draw_size(uint64_t* s) { return 16 + rng_next(s) % 497; }

static void* checked_malloc(size_t n) {
  void* p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "numap_remote_free: malloc(%zu) failed\n", n);
    exit(1);
  }
  memset(p, (int)(n & 0xff), n < 64 ? n : 64);  // the first line written, as a message's header
  return p;
}

// ---- pc: one producer, one consumer, batches through a single-producer single-consumer ring ----
struct Ring {
  void** batch[kRing];
  _Atomic uint64_t head;  // batches published by the producer
  _Atomic uint64_t tail;  // batches freed by the consumer
};
static struct Ring ring;
static uint64_t pc_ops;
static uint64_t pc_sum;

static void* producer(void* arg) {
  (void)arg;
  for (uint64_t done = 0; done < pc_ops; done += kBatch) {
    const uint64_t h = atomic_load_explicit(&ring.head, memory_order_relaxed);
    while (h - atomic_load_explicit(&ring.tail, memory_order_acquire) == kRing) sched_yield();
    void** b = checked_malloc(kBatch * sizeof(void*));
    for (int i = 0; i < kBatch; ++i) b[i] = checked_malloc(64);
    ring.batch[h % kRing] = b;
    atomic_store_explicit(&ring.head, h + 1, memory_order_release);
  }
  return NULL;
}

static void* consumer(void* arg) {
  (void)arg;
  for (uint64_t done = 0; done < pc_ops; done += kBatch) {
    const uint64_t t = atomic_load_explicit(&ring.tail, memory_order_relaxed);
    while (atomic_load_explicit(&ring.head, memory_order_acquire) == t) sched_yield();
    void** b = ring.batch[t % kRing];
    for (int i = 0; i < kBatch; ++i) {
      unsigned char* p = b[i];
      pc_sum += p[0];
      free(p);
    }
    free(b);
    atomic_store_explicit(&ring.tail, t + 1, memory_order_release);
  }
  return NULL;
}

// ---- server: two threads, slot arrays swapped every round ----
static void** arrays[2];
static uint64_t server_rounds;
static pthread_barrier_t swap_barrier;
static uint64_t server_sum[2];

static int larson;  // each round by two new threads

static void* server(void* arg) {
  const int me = (int)((intptr_t)arg & 1);
  const uint64_t first = larson ? (uint64_t)((intptr_t)arg >> 1) : 0;
  uint64_t s = 0x2545f4914f6cdd1dull + (uint64_t)me + first * 2;
  for (uint64_t r = first; r < (larson ? first + 1 : server_rounds); ++r) {
    void** slots = arrays[(me + r) % 2];
    for (int i = 0; i < kRound; ++i) {
      const uint64_t k = rng_next(&s) % kSlots;
      unsigned char* old = slots[k];
      server_sum[me] += old[0];
      free(old);
      slots[k] = checked_malloc(draw_size(&s));
    }
    if (!larson) pthread_barrier_wait(&swap_barrier);  // the next round works on the other thread's array
  }
  return NULL;
}

static int run_server(uint64_t ops) {
  uint64_t s = 42;
  for (int a = 0; a < 2; ++a) {
    arrays[a] = malloc(kSlots * sizeof(void*));
    for (int k = 0; k < kSlots; ++k) arrays[a][k] = checked_malloc(draw_size(&s));
  }
  server_rounds = ops / (2 * kRound);
  pthread_barrier_init(&swap_barrier, NULL, 2);
  for (uint64_t r = 0; r < (larson ? server_rounds : 1); ++r) {
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, server, (void*)(intptr_t)(r << 1 | (uint64_t)i));
    for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  }
  for (int a = 0; a < 2; ++a) {
    for (int k = 0; k < kSlots; ++k) free(arrays[a][k]);
    free(arrays[a]);
  }
  printf("%s ops=%llu sum=%llu\n", larson ? "larson" : "server", (unsigned long long)(server_rounds * 2 * kRound),
         (unsigned long long)(server_sum[0] + server_sum[1]));
  return 0;
}

// ---- scratch: a block handed over, then each thread's own blocks ----
static uint64_t scratch_loops;
static _Atomic uint64_t scratch_sum;

static void* scratch(void* arg) {
  free(arg);
  uint64_t sum = 0;
  for (uint64_t i = 0; i < scratch_loops; ++i) {
    volatile unsigned char* p = checked_malloc(8);
    for (int w = 0; w < 1000; ++w) p[w & 7] = (unsigned char)(p[(w + 1) & 7] + 1);
    sum += p[0];
    free((void*)p);
  }
  atomic_fetch_add(&scratch_sum, sum);
  return NULL;
}

static int run_scratch(uint64_t ops) {
  scratch_loops = ops / 1000;
  void* given[2] = {checked_malloc(8), checked_malloc(8)};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, scratch, given[i]);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  printf("scratch ops=%llu sum=%llu\n", (unsigned long long)(scratch_loops * 2000), (unsigned long long)scratch_sum);
  return 0;
}

int main(int argc, char** argv) {
  const uint64_t ops = argc == 3 ? strtoull(argv[2], NULL, 10) : 0;
  const char* mode = argc == 3 ? argv[1] : "";
  if (ops == 0 || (strcmp(mode, "pc") != 0 && strcmp(mode, "server") != 0 && strcmp(mode, "larson") != 0 &&
                   strcmp(mode, "scratch") != 0)) {
    fprintf(stderr, "usage: numap_remote_free pc|server|larson|scratch OPS (OPS a positive count)\n");
    return 2;
  }
  if (strcmp(mode, "scratch") == 0) return run_scratch(ops);
  larson = strcmp(mode, "larson") == 0;
  if (strcmp(mode, "pc") != 0) return run_server(ops);
  pc_ops = ops / kBatch * kBatch;
  pthread_t p, c;
  pthread_create(&c, NULL, consumer, NULL);
  pthread_create(&p, NULL, producer, NULL);
  pthread_join(p, NULL);
  pthread_join(c, NULL);
  printf("pc ops=%llu sum=%llu\n", (unsigned long long)pc_ops, (unsigned long long)pc_sum);
  return 0;
}
