/* numap: the in-tree NUMA-aware mmap size-class allocator. Its public C API, besides the malloc
 * family it exports when preloaded. The harness finds these with dlsym(RTLD_DEFAULT, ...); every
 * struct carries its size first so a reader built against another version can tell. */
#ifndef NUMAP_H
#define NUMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NUMAP_STATS_VERSION 13
#define NUMAP_MAX_NODES 64
#define NUMAP_MAX_DISTANCES 16

/* One (node, size class): counters since process start unless said otherwise. */
struct numap_class_stats {
  uint32_t node;               /* node index (the partition), 0 when NUMA mode is off */
  uint32_t class_index;        /* index in numap's class table */
  uint64_t size;               /* bytes per object (small) or per chunk (page/large classes) */
  uint32_t kind;               /* 0 small (slab objects), 1 page class, 2 slab pages */
  uint32_t pad;
  uint64_t in_use_bytes;       /* now: handed out (small: held by the application or thread caches) */
  uint64_t mapped_bytes;       /* now: page-class bytes allowed to be resident (charged to capacity);
                                  small: bytes of the slabs the class holds (in_use_bytes of them in use) */
  uint64_t advised_bytes;      /* total bytes advised away (MADV_DONTNEED) in this class */
  uint64_t allocs;             /* allocations served from the central structures of this class */
  uint64_t frees;
  uint64_t lock_acquisitions;  /* of this (node, class)'s lock */
  uint64_t lock_contended;     /* acquisitions that found it held */
  uint64_t lock_wait_ns;       /* total time spent waiting for it */
};

struct numap_node_stats {
  int32_t os_node;             /* the kernel's node number */
  uint32_t pad;
  uint64_t capacity_bytes;     /* per-node limit on mapped bytes */
  uint64_t in_use_bytes;
  uint64_t mapped_bytes;
  uint64_t advised_bytes;
  uint64_t fallback_in;        /* allocations placed here because a nearer node was full */
};

struct numap_stats {
  uint32_t struct_size;        /* sizeof(struct numap_stats) of the library */
  uint32_t version;            /* NUMAP_STATS_VERSION */
  uint32_t nodes;              /* partitions in use */
  uint32_t numa_enabled;       /* 1 when placement per node is active */
  uint64_t capacity_bytes;     /* NUMAP_CAPACITY, 0 = unlimited */
  uint64_t in_use_bytes;       /* small + page + huge, as handed out */
  uint64_t mapped_bytes;       /* charged to capacity now (page classes, slab pages and huge) */
  uint64_t advised_bytes;      /* total advised away */
  uint64_t huge_bytes;         /* now: allocations above the largest class (own mappings) */
  uint64_t mmap_calls, mmap_bytes;
  uint64_t munmap_calls, munmap_bytes;
  uint64_t madvise_calls, madvise_bytes;
  uint64_t mbind_calls;
  uint64_t purges;             /* purge passes (capacity, decay, explicit) */
  uint64_t enomem;             /* requests failed with ENOMEM */
  uint64_t tcache_hits, tcache_misses;
  uint64_t lock_acquisitions, lock_contended, lock_wait_ns; /* all locks together */
  uint64_t next_allocs;        /* requests passed to the next allocator (velox mode) */
  uint32_t fallback_distance[NUMAP_MAX_DISTANCES]; /* distance d (0 = unused slot) ... */
  uint64_t fallback_count[NUMAP_MAX_DISTANCES];    /* ... and allocations placed at it */
  struct numap_node_stats node[NUMAP_MAX_NODES];
  /* Version 2 (after node[], so a version-1 reader's struct_size still copies what it knows). */
  uint64_t allocs;             /* allocations served, approximately: objects and chunks leaving the central
                                  structures (to callers or thread caches) + thread-cache hits flushed so
                                  far + huge; 0 means numap served nothing */
  uint64_t decay_passes;       /* passes advising away pages free longer than NUMAP_DECAY_MS */
  uint64_t decay_bytes;        /* bytes those passes advised away (also in advised_bytes) */
  uint64_t borrowed_bytes;     /* resident bytes of a larger class's free chunk that served a smaller request */
  uint64_t exchanged_bytes;    /* free resident bytes of other classes advised away so that a request
                                  needing fresh pages did not raise RSS (NUMAP_EXCHANGE) */
  uint64_t trims;              /* malloc_trim calls */
  /* Version 3. */
  uint64_t split_allocs;       /* allocations no single node could hold, split across nodes */
  uint64_t bind_fallbacks;     /* ranges where the home-node bind was refused and MPOL_PREFERRED used */
  uint64_t bind_failures;      /* ranges no policy could be set on (placed by first touch) */
  /* Version 4. */
  uint64_t limited_bytes;      /* free resident bytes advised away at once because a node's free pages
                                  exceeded NUMAP_FREE_PERCENT of its in-use bytes (and NUMAP_FREE_FLOOR) */
  uint64_t transfer_batches;   /* small-object batches a thread cache's overflow parked and a refill took whole */
  /* Version 5. */
  uint64_t option_warnings;    /* NUMAP_* settings numap could not use as given (an unknown name, a bad value,
                                  a NUMAP_CLASS_SPAN the arena could not be reserved at): each one warning
                                  line on stderr, the default (or a smaller span) used instead */
  /* Version 6. */
  uint64_t tcache_grows;       /* small-object list limits raised by a batch (a miss, NUMAP_TCACHE_BUDGET) */
  uint64_t tcache_shrinks;     /* ... lowered: a list over its limit 4 times, another class needing the
                                  budget, or memory pressure (a purge, the free limit giving pages back) */
  /* Version 7. */
  uint64_t tcache_claimed_bytes; /* now: bytes of small-object list growth all threads hold (at most
                                  NUMAP_TCACHE_TOTAL; each thread at most NUMAP_TCACHE_BUDGET) */
  uint64_t tcache_asks;        /* times a thread found the shared pool short and asked the threads holding
                                  more of it to give some back */
  uint64_t tcache_give_backs;  /* ... and times a thread gave half of its claim back when asked */
  /* Version 8. */
  uint64_t moved_bytes;        /* resident bytes of other classes' free chunks moved into a chunk that needed
                                  fresh pages (NUMAP_MOVE_PIECES): reused without a refault */
  uint64_t mremap_calls;       /* moves tried (mremap) ... */
  uint64_t mremap_bytes;       /* ... and the bytes they moved */
  /* Version 9. */
  uint64_t reused_bytes;       /* borrowed_bytes + moved_bytes: free resident bytes of one class that served
                                  another without being advised away and faulted again (reused_bytes / 4096
                                  page faults avoided) */
  uint64_t tcache_idle_bytes;  /* small objects a thread cache held (or parked in its node's transfer cache) of a
                                  class that neither missed nor overflowed for NUMAP_DECAY_MS, or whose slabs were
                                  mostly free, returned to their slabs (so emptied slabs go) */
  /* Version 10. */
  uint64_t populated_bytes;    /* fresh pages made resident ahead of use in one call each (NUMAP_POPULATE:
                                  new slabs of busy classes; with "all" every page chunk's requested pages)
                                  instead of one page fault each; their calls are in madvise_calls */
  /* Version 11. */
  uint64_t deferred_purges;    /* free-limit checks that came due in free() and were queued for the background
                                  thread (or later allocation slow paths) instead of advising pages away there;
                                  checks that came due while one was queued joined it (NUMAP_PURGE_DELAY_MS) */
  uint64_t deferred_wait_ms;   /* ms from each queued check to the pass that took it, summed (coarse clock):
                                  / deferred_purges = the mean delay before the pages went back */
  /* Version 12. */
  uint64_t handoff_batches;    /* small-object batches a thread cache's overflow handed over without a lock and
                                  a refill took whole (NUMAP_HANDOFF_BYTES) */
  /* Version 13. */
  uint64_t handoff_stale_bytes; /* bytes of handed-over batches no refill took for NUMAP_HANDOFF_MS (0: a decay
                                  pass period), put back into their slabs by the next push or a background pass */
};

/* Fills *out (out->struct_size must be set by the caller to sizeof its struct) and up to
 * `max_classes` per-(node, class) entries; returns how many entries exist (call again with a larger
 * array when it exceeds max_classes). Returns 0 and fills nothing before numap is initialised. */
size_t numap_stats(struct numap_stats* out, struct numap_class_stats* classes, size_t max_classes);

/* Advises away every free mapped page now (malloc_trim does the same); returns the bytes released. */
size_t numap_purge(void);

/* The effective options: index 0.. until it returns 0. *value is the number (sizes in bytes);
 * *text the string form for string options (else NULL). */
int numap_option(size_t index, const char** name, long long* value, const char** text);

const char* numap_version(void);

#ifdef __cplusplus
}
#endif

#endif /* NUMAP_H */
