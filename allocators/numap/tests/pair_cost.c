// Instruction counts of the allocation fast paths, for callgrind (deterministic, unlike wall time
// on a shared machine). The calls to be counted run inside the noinline functions `counted_pairs`
// (malloc/free of one size, the percall malloc_free family), `counted_batch` (allocate `batch`,
// then free them), `counted_ring` (each block freed `batch` allocations later, as percall's
// cross_thread at one thread) and `counted_cross_free`/`counted_cross_alloc` (producer-consumer: one thread
// allocates, the other frees, rounds of `batch` blocks), after a warm-up round of the same calls,
// so thread-cache creation and first page faults are not counted. Plain C against the malloc API,
// so any allocator can be preloaded under it:
//
//   valgrind --tool=callgrind --toggle-collect=counted_pairs build/bin/numap_pair_cost pairs 64 100000
//   (under LD_PRELOAD=build/lib/libnumap.so, libtcmalloc_minimal.so.4, libmimalloc.so.2, ...)
//
// Instructions per pair = the Ir total / count (docs/benchmarks.md, "Instruction counts").
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* volatile sink;

__attribute__((noinline)) void counted_pairs(size_t size, long count) {
  for (long i = 0; i < count; ++i) {
    void* p = malloc(size);
    *(volatile char*)p = 1;
    sink = p;
    free(p);
  }
}

__attribute__((noinline)) void counted_batch(size_t size, void** blocks, long batch) {
  for (long i = 0; i < batch; ++i) *(volatile char*)(blocks[i] = malloc(size)) = 1;
  for (long i = 0; i < batch; ++i) free(blocks[i]);
}

// percall's cross_thread at one thread: each block is freed `batch` allocations later (FIFO).
__attribute__((noinline)) void counted_ring(size_t size, void** ring, long batch, long count) {
  long at = 0;
  for (long i = 0; i < count; ++i) {
    void* p = malloc(size);
    *(volatile char*)p = 1;
    free(ring[at]);
    ring[at] = p;
    if (++at == batch) at = 0;
  }
}

__attribute__((noinline)) void counted_cross_alloc(size_t size, void** blocks, long batch) {
  for (long i = 0; i < batch; ++i) *(volatile char*)(blocks[i] = malloc(size)) = 1;
}

__attribute__((noinline)) void counted_cross_free(void** blocks, long batch) {
  for (long i = 0; i < batch; ++i) free(blocks[i]);
}

struct Cross {
  pthread_barrier_t barrier;
  void** blocks;
  long batch, rounds;
  int counted;
};

// The consumer: frees each round's blocks after the producer allocated them.
static void* consumer(void* arg) {
  struct Cross* c = arg;
  for (int pass = 0; pass < 2; ++pass)
    for (long r = 0; r < c->rounds; ++r) {
      pthread_barrier_wait(&c->barrier);  // blocks ready
      if (pass == 1) counted_cross_free(c->blocks, c->batch);
      else for (long i = 0; i < c->batch; ++i) free(c->blocks[i]);
      pthread_barrier_wait(&c->barrier);  // blocks freed
    }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: numap_pair_cost pairs|batch|ring|cross SIZE COUNT [BATCH]\n");
    return 2;
  }
  const char* mode = argv[1];
  const size_t size = strtoull(argv[2], NULL, 10);
  const long count = strtol(argv[3], NULL, 10);
  const long batch = argc == 5 ? strtol(argv[4], NULL, 10) : 1000;
  if (size == 0 || count <= 0 || batch <= 0) {
    fprintf(stderr, "numap_pair_cost: SIZE, COUNT and BATCH must be positive\n");
    return 2;
  }
  void** blocks = malloc(sizeof(void*) * (size_t)batch);
  if (strcmp(mode, "pairs") == 0) {
    for (long i = 0; i < count; ++i) free(malloc(size));  // warm-up, not counted
    counted_pairs(size, count);
  } else if (strcmp(mode, "batch") == 0) {
    const long rounds = count / batch > 0 ? count / batch : 1;
    for (long r = 0; r < rounds; ++r) {  // warm-up, not counted
      for (long i = 0; i < batch; ++i) blocks[i] = malloc(size);
      for (long i = 0; i < batch; ++i) free(blocks[i]);
    }
    for (long r = 0; r < rounds; ++r) counted_batch(size, blocks, batch);
  } else if (strcmp(mode, "ring") == 0) {
    for (long i = 0; i < batch; ++i) blocks[i] = malloc(size);
    for (long i = 0; i < count; ++i) {  // warm-up, not counted
      free(blocks[i % batch]);
      blocks[i % batch] = malloc(size);
    }
    counted_ring(size, blocks, batch, count);
    for (long i = 0; i < batch; ++i) free(blocks[i]);
  } else if (strcmp(mode, "cross") == 0) {
    struct Cross c = {.blocks = blocks, .batch = batch, .rounds = count / batch > 0 ? count / batch : 1};
    pthread_barrier_init(&c.barrier, NULL, 2);
    pthread_t t;
    if (pthread_create(&t, NULL, consumer, &c) != 0) return 1;
    for (int pass = 0; pass < 2; ++pass)
      for (long r = 0; r < c.rounds; ++r) {
        if (pass == 1) counted_cross_alloc(size, blocks, batch);
        else for (long i = 0; i < batch; ++i) *(volatile char*)(blocks[i] = malloc(size)) = 1;
        pthread_barrier_wait(&c.barrier);
        pthread_barrier_wait(&c.barrier);
      }
    pthread_join(t, NULL);
  } else {
    fprintf(stderr, "numap_pair_cost: unknown mode '%s' (pairs, batch, ring or cross)\n", mode);
    return 2;
  }
  free(blocks);
  return 0;
}
