// Differential stress of the whole malloc API against a model: random sequences of malloc, calloc,
// realloc, reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc, free and
// malloc_usable_size (sizes 0 .. tens of MiB, alignments up to 64 KiB) in several threads, with
// allocations handed between threads and freed or reallocated by another. The model is each
// allocation's size, alignment and a byte pattern: every byte is checked before it is released or
// moved, plus alignment, usable size, calloc's zeros and errno on the failures the API defines.
//
//   numap_stress [--ops N] [--threads T] [--seed S]      (ops are per thread)
// Built twice: numap_stress calls the C library names (run it with LD_PRELOAD=libnumap.so), and
// numap_stress_heap drives a numap::Heap from the static library in-process. Exit 0: zero mismatches.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#ifdef NUMAP_STRESS_HEAP
#include "allocators/numap/heap.h"
namespace api {
numap::Heap* heap;
void* malloc(size_t n) { return heap->malloc(n); }
void free(void* p) { heap->free(p); }
void* calloc(size_t a, size_t b) { return heap->calloc(a, b); }
void* realloc(void* p, size_t n) { return heap->realloc(p, n); }
void* reallocarray(void* p, size_t a, size_t b) {
  size_t n;
  if (__builtin_mul_overflow(a, b, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  return heap->realloc(p, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1))) return EINVAL;
  void* p = heap->memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void* aligned_alloc(size_t align, size_t n) { return heap->memalign(align, n); }
void* memalign(size_t align, size_t n) { return heap->memalign(align, n); }
void* valloc(size_t n) { return heap->memalign(4096, n); }
void* pvalloc(size_t n) { return heap->memalign(4096, (n + 4095) & ~size_t{4095}); }
size_t usable(void* p) { return heap->usable_size(p); }
}  // namespace api
#else
#include "allocators/numap/include/numap.h"
namespace api {
using ::aligned_alloc;
using ::calloc;
using ::free;
using ::malloc;
using ::memalign;
using ::posix_memalign;
using ::pvalloc;
using ::realloc;
using ::reallocarray;
using ::valloc;
size_t usable(void* p) { return ::malloc_usable_size(p); }
}  // namespace api
#endif

namespace {

struct Rec {
  unsigned char* p;
  size_t n;
  size_t align;
  uint8_t seed;
};

std::atomic<uint64_t> g_mismatches{0};
std::atomic<uint64_t> g_ops{0};
std::atomic<Rec*> g_exchange[64];

void fail(const char* what, const Rec& r) {
  if (g_mismatches.fetch_add(1) < 20)
    fprintf(stderr, "MISMATCH: %s (p=%p n=%zu align=%zu)\n", what, static_cast<void*>(r.p), r.n, r.align);
}

// The pattern: 8-byte words derived from the seed and the word index (bytes of the same for a tail).
inline uint64_t pat_word(uint8_t seed, size_t j) { return (j + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t{seed} * 0x0101010101010101ull); }

void fill(Rec& r) {
  const size_t words = r.n / 8;
  for (size_t j = 0; j < words; ++j) {
    uint64_t w = pat_word(r.seed, j);
    memcpy(r.p + 8 * j, &w, 8);
  }
  uint64_t w = pat_word(r.seed, words);
  memcpy(r.p + 8 * words, &w, r.n - 8 * words);
}

// Checks the first `upto` bytes.
void check(const Rec& r, size_t upto, const char* what) {
  const size_t words = upto / 8;
  uint64_t bad = 0;
  for (size_t j = 0; j < words; ++j) {
    uint64_t w;
    memcpy(&w, r.p + 8 * j, 8);
    bad |= w ^ pat_word(r.seed, j);
  }
  uint64_t w = 0, want = pat_word(r.seed, words);
  memcpy(&w, r.p + 8 * words, upto - 8 * words);
  memset(reinterpret_cast<char*>(&want) + (upto - 8 * words), 0, 8 - (upto - 8 * words));
  bad |= w ^ want;
  if (bad != 0) fail(what, r);
}

void check_meta(const Rec& r) {
  if (r.p == nullptr) return;
  if (reinterpret_cast<uintptr_t>(r.p) % r.align != 0) fail("misaligned", r);
  if (api::usable(r.p) < r.n) fail("usable size below request", r);
}

struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  size_t below(size_t n) { return n ? next() % n : 0; }
};

size_t pick_size(Rng& r) {
  uint64_t x = r.below(100000);
  if (x < 70000) return r.below(257);                 // tiny, including 0
  if (x < 90000) return r.below(3600);                // small classes
  if (x < 99500) return 3500 + r.below(1 << 17);      // page classes
  if (x < 99995) return (1 << 17) + r.below(2 << 20); // large classes
  return (2 << 20) + r.below(30 << 20);               // tens of MiB (1 in 20000)
}

void release(Rec& r) {
  check(r, r.n, "pattern changed before free");
  api::free(r.p);
  r.p = nullptr;
}

void worker(int id, uint64_t ops, uint64_t seed) {
  Rng rng{seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(id) + 1};
  std::vector<Rec> live;
  live.reserve(4096);
  const size_t max_live = 2000;
  for (uint64_t op = 0; op < ops; ++op) {
    g_ops.fetch_add(1, std::memory_order_relaxed);
    const uint64_t kind = rng.below(100);
    Rec r{nullptr, 0, 16, static_cast<uint8_t>(rng.next())};
    if ((kind < 35 && !live.empty()) || live.size() >= max_live) {  // free
      size_t i = rng.below(live.size());
      release(live[i]);
      live[i] = live.back();
      live.pop_back();
      continue;
    }
    if (kind < 55) {  // malloc
      r.n = pick_size(rng);
      r.p = static_cast<unsigned char*>(api::malloc(r.n));
    } else if (kind < 60) {  // calloc
      size_t count = 1 + rng.below(8);
      size_t each = pick_size(rng) / count;
      r.n = count * each;
      r.p = static_cast<unsigned char*>(api::calloc(count, each));
      if (r.p)
        for (size_t i = 0; i < r.n; ++i)
          if (r.p[i] != 0) {
            fail("calloc memory not zero", r);
            break;
          }
    } else if (kind < 75 && !live.empty()) {  // realloc / reallocarray an existing block
      size_t i = rng.below(live.size());
      Rec& old = live[i];
      check(old, old.n, "pattern changed before realloc");
      size_t n = rng.below(4) == 0 ? old.n + rng.below(64) : pick_size(rng);
      void* q = kind < 72 ? api::realloc(old.p, n) : api::reallocarray(old.p, 1, n);
      if (q == nullptr && n != 0) {
        fail("realloc failed", old);
        continue;
      }
      if (n == 0) {  // realloc(p, 0) frees (glibc semantics) and may return null
        if (q != nullptr) api::free(q);
        live[i] = live.back();
        live.pop_back();
        continue;
      }
      Rec moved{static_cast<unsigned char*>(q), n, 16, old.seed};
      check(moved, n < old.n ? n : old.n, "realloc lost contents");
      moved.seed = static_cast<uint8_t>(rng.next());
      check_meta(moved);
      fill(moved);
      old = moved;
      continue;
    } else if (kind < 90) {  // aligned forms
      r.align = size_t{16} << rng.below(13);  // 16 .. 64 KiB
      r.n = rng.below(8) == 0 ? pick_size(rng) : rng.below(3 * r.align);
      switch (rng.below(5)) {
        case 0: {
          void* p = nullptr;
          if (api::posix_memalign(&p, r.align, r.n) != 0) p = nullptr;
          r.p = static_cast<unsigned char*>(p);
          break;
        }
        case 1: r.p = static_cast<unsigned char*>(api::aligned_alloc(r.align, r.n)); break;
        case 2: r.p = static_cast<unsigned char*>(api::memalign(r.align, r.n)); break;
        case 3: r.align = 4096; r.p = static_cast<unsigned char*>(api::valloc(r.n)); break;
        default: r.align = 4096; r.p = static_cast<unsigned char*>(api::pvalloc(r.n)); break;
      }
    } else if (kind < 97) {  // hand a block to another thread, take whatever was there
      if (live.empty()) continue;
      size_t i = rng.below(live.size());
      Rec* mine = new Rec(live[i]);
      live[i] = live.back();
      live.pop_back();
      Rec* theirs = g_exchange[rng.below(64)].exchange(mine);
      if (theirs != nullptr) {
        check(*theirs, theirs->n, "pattern changed across threads");
        live.push_back(*theirs);
        delete theirs;
      }
      continue;
    } else {  // the failures the API defines
      volatile size_t big = ~size_t{0};  // volatile: keep the compiler from judging the calls
      errno = 0;
      if (api::malloc(big >> 1) != nullptr || errno != ENOMEM) fail("huge malloc did not fail with ENOMEM", r);
      errno = 0;
      if (api::calloc(big >> 2, 16) != nullptr || errno != ENOMEM) fail("overflowing calloc did not fail", r);
      void* p = nullptr;
      if (api::posix_memalign(&p, 24, 8) != EINVAL) fail("posix_memalign(24) did not fail with EINVAL", r);
      errno = 0;
      if (api::reallocarray(nullptr, big, 2) != nullptr || errno != ENOMEM) fail("reallocarray overflow", r);
      continue;
    }
    if (r.p == nullptr) {
      fail("allocation failed", r);
      continue;
    }
    check_meta(r);
    fill(r);
    live.push_back(r);
  }
  for (Rec& r : live) release(r);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t ops = 200000, seed = 1;
  int threads = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--ops")) ops = strtoull(argv[i + 1], nullptr, 10);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], nullptr, 10);
    else {
      fprintf(stderr, "usage: %s [--ops N] [--threads T] [--seed S]\n", argv[0]);
      return 2;
    }
  }
#ifdef NUMAP_STRESS_HEAP
  static numap::Os os;
  numap::Options o;
  numap::Topology t;
  numap::topology_single(&t, 0);
  if (getenv("STRESS_CLASS_SPAN") != nullptr) numap::parse_size(getenv("STRESS_CLASS_SPAN"), &o.class_span);
  static numap::Heap heap;
  if (!heap.init(o, t, &os)) return 3;
  api::heap = &heap;
#endif
#ifndef NUMAP_STRESS_HEAP
  // This build only means something with libnumap.so preloaded: prove that it serves malloc (the
  // symbol the process resolves lives in libnumap.so, and numap's own counter moves), so a preload
  // that silently did not take fails instead of stress-testing glibc.
  Dl_info where{};
  void* resolved = dlsym(RTLD_DEFAULT, "malloc");
  auto* stats_fn = reinterpret_cast<decltype(&numap_stats)>(dlsym(RTLD_DEFAULT, "numap_stats"));
  if (resolved == nullptr || dladdr(resolved, &where) == 0 || where.dli_fname == nullptr ||
      strstr(where.dli_fname, "libnumap") == nullptr || stats_fn == nullptr) {
    fprintf(stderr, "numap_stress: malloc resolves to %s, not libnumap.so (is LD_PRELOAD set?)\n",
            where.dli_fname != nullptr ? where.dli_fname : "nothing");
    return 1;
  }
  auto served = [&] {
    struct numap_stats s {};
    s.struct_size = sizeof s;
    stats_fn(&s, nullptr, 0);
    return s.allocs;
  };
  const uint64_t served_before = served();
#endif
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(worker, i, ops, seed);
  for (auto& t : ts) t.join();
  for (auto& slot : g_exchange) {
    Rec* r = slot.exchange(nullptr);
    if (r != nullptr) {
      release(*r);
      delete r;
    }
  }
  printf("numap_stress: %d threads, %llu API calls checked, %llu mismatches\n", threads,
         static_cast<unsigned long long>(g_ops.load()), static_cast<unsigned long long>(g_mismatches.load()));
#ifndef NUMAP_STRESS_HEAP
  // The workers' caches were returned at thread exit, so their hits are counted by now. Most calls
  // allocate; with NUMAP_NEXT_BELOW (velox) the small ones go to glibc, the rest still to numap.
  const uint64_t by_numap = served() - served_before;
  printf("numap_stress: libnumap served %llu allocations\n", static_cast<unsigned long long>(by_numap));
  const uint64_t at_least = getenv("NUMAP_NEXT_BELOW") != nullptr ? 1 : g_ops.load() / 10;
  if (by_numap < at_least) {
    fprintf(stderr, "numap_stress: libnumap served %llu allocations, expected at least %llu\n",
            static_cast<unsigned long long>(by_numap), static_cast<unsigned long long>(at_least));
    return 1;
  }
#endif
  return g_mismatches.load() == 0 ? 0 : 1;
}
