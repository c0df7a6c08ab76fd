// Layer 7, the malloc override: the symbols libnumap.so exports (the whole malloc API, every
// operator new/delete, and the numap_* C API). Everything else in the library is hidden. The heap
// is built on first use from the environment; nothing here allocates through the C++ runtime.
//
// numap:velox (NUMAP_NEXT_BELOW=3072): requests below the threshold go to the next allocator in
// the process (dlsym(RTLD_NEXT, "malloc"), i.e. glibc, or jemalloc when it is preloaded after
// numap), as Velox deploys its mmap allocator; frees are routed by address.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "allocators/numap/heap.h"
#include "allocators/numap/include/numap.h"

#define NUMAP_EXPORT extern "C" __attribute__((visibility("default")))
#define NUMAP_EXPORT_CXX __attribute__((visibility("default")))

namespace numap {
namespace {

alignas(64) char heap_storage[sizeof(Heap)];
alignas(64) char os_storage[sizeof(Os)];
Options g_options;
Heap* g_heap = nullptr;
std::atomic<int> g_state{0};  // 0 none, 1 initialising, 2 ready
// The heap once it is ready, when no next allocator is configured: malloc's one check before the
// heap's inline fast path (null before init and in velox mode, which take the full path).
std::atomic<Heap*> g_direct{nullptr};

struct Next {
  void* (*malloc)(std::size_t);
  void (*free)(void*);
  void* (*calloc)(std::size_t, std::size_t);
  void* (*realloc)(void*, std::size_t);
  void* (*memalign)(std::size_t, std::size_t);
  std::size_t (*usable)(void*);
};
Next g_next;
std::atomic<int> g_next_state{0};  // 0 unresolved, 1 resolving, 2 ready, 3 unavailable
__thread bool t_resolving __attribute__((tls_model("initial-exec")));

void atfork_prepare() { g_heap->fork_prepare(); }
void atfork_parent() { g_heap->fork_parent(); }
void atfork_child() { g_heap->fork_child(); }

__attribute__((noinline)) Heap* init_heap() {
  int expected = 0;
  if (!g_state.compare_exchange_strong(expected, 1)) {
    while (g_state.load(std::memory_order_acquire) != 2) {
    }
    return g_heap;
  }
  g_options = options_from_env();
  Os* os = new (os_storage) Os(real_os());
  Heap* h = new (heap_storage) Heap();
  topology_detect(h->own_topology(), g_options.sysfs_root, os->policy_nodes(), 0);
  // A smaller span than NUMAP_CLASS_SPAN's is one warning (Heap::init); not even the smallest: the
  // heap cannot exist, and nothing could serve this first malloc or any after it.
  if (!h->init(g_options, *h->own_topology(), os))
    fatal("cannot reserve the arena even at the smallest NUMAP_CLASS_SPAN (an address-space limit, ulimit -v, "
          "or vm.overcommit_memory=2): nothing to allocate from");
  g_heap = h;
  g_state.store(2, std::memory_order_release);
  if (g_options.next_below == 0) g_direct.store(h, std::memory_order_release);
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  if (g_options.print) print_options(g_options);
  return h;
}

inline Heap* heap() {
  if (__builtin_expect(g_state.load(std::memory_order_acquire) == 2, 1)) return g_heap;
  return init_heap();
}

// True when the next allocator should serve n bytes (and is available).
bool use_next(Heap* h, std::size_t n) {
  if (n >= h->options().next_below) return false;
  int s = g_next_state.load(std::memory_order_acquire);
  if (s == 2) return true;
  if (s == 3 || t_resolving) return false;
  int expected = 0;
  if (!g_next_state.compare_exchange_strong(expected, 1)) {
    // Another thread resolves; serve this one from numap (frees route by address).
    return false;
  }
  t_resolving = true;  // dlsym may allocate: those requests are numap's
  Next n2;
  n2.malloc = reinterpret_cast<void* (*)(std::size_t)>(dlsym(RTLD_NEXT, "malloc"));
  n2.free = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_NEXT, "free"));
  n2.calloc = reinterpret_cast<void* (*)(std::size_t, std::size_t)>(dlsym(RTLD_NEXT, "calloc"));
  n2.realloc = reinterpret_cast<void* (*)(void*, std::size_t)>(dlsym(RTLD_NEXT, "realloc"));
  n2.memalign = reinterpret_cast<void* (*)(std::size_t, std::size_t)>(dlsym(RTLD_NEXT, "memalign"));
  n2.usable = reinterpret_cast<std::size_t (*)(void*)>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  t_resolving = false;
  const bool ok = n2.malloc && n2.free && n2.calloc && n2.realloc && n2.memalign && n2.usable;
  if (ok) g_next = n2;
  g_next_state.store(ok ? 2 : 3, std::memory_order_release);
  if (!ok) write_stderr("numap: NUMAP_NEXT_BELOW set but no next allocator found; numap serves everything\n");
  return ok;
}

// A pointer numap does not own comes from the next allocator (velox mode) or is invalid.
inline bool from_next(Heap* h, void* p) {
  return g_next_state.load(std::memory_order_relaxed) == 2 && !h->owns(p);
}

__attribute__((noinline)) void* alloc_slow(std::size_t n) {
  Heap* h = heap();
  if (__builtin_expect(h->options().next_below != 0, 0) && use_next(h, n)) return g_next.malloc(n);
  return h->malloc(n);
}

inline void* alloc(std::size_t n) {
  if (Heap* h = g_direct.load(std::memory_order_acquire); __builtin_expect(h != nullptr, 1)) return h->malloc(n);
  return alloc_slow(n);
}

void* alloc_aligned(std::size_t align, std::size_t n) {
  Heap* h = heap();
  if (__builtin_expect(h->options().next_below != 0, 0) && use_next(h, n)) return g_next.memalign(align, n);
  return h->memalign(align, n);
}

__attribute__((noinline)) void release_slow(void* p) {
  // Without a next allocator every pointer is numap's (free_slow handles null and huge blocks).
  if (Heap* h = g_direct.load(std::memory_order_acquire); __builtin_expect(h != nullptr, 1)) {
    h->free_slow(p);
    return;
  }
  if (p == nullptr) return;
  Heap* h = heap();
  if (__builtin_expect(!h->in_arena(p), 0) && from_next(h, p)) {
    g_next.free(p);
    return;
  }
  h->free_slow(p);
}

// The thread cache takes the home node's small objects and page chunks up to 256 KiB whatever
// the heap's state (an unready cache matches no pointer), so the common free needs no other check.
__attribute__((always_inline)) inline void release(void* p) {
  if (!cache_push(thread_cache_tls(), p)) release_slow(p);
}

// Finds std::__throw_bad_alloc in the process (only C++ programs call operator new), so the
// library itself does not depend on libstdc++.
[[noreturn]] void throw_bad_alloc() {
  auto fn = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv"));
  if (fn != nullptr) fn();
  fatal("operator new: out of memory");
}

void* new_impl(std::size_t n, std::size_t align, bool nothrow) {
  for (;;) {
    void* p = align > 16 ? alloc_aligned(align, n) : alloc(n);
    if (p != nullptr) return p;
    auto get = reinterpret_cast<std::new_handler (*)()>(dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv"));
    std::new_handler handler = get != nullptr ? get() : nullptr;
    if (handler == nullptr) {
      if (nothrow) return nullptr;
      throw_bad_alloc();
    }
    handler();
  }
}

}  // namespace
}  // namespace numap

using numap::alloc;
using numap::alloc_aligned;
using numap::release;

NUMAP_EXPORT void* malloc(size_t n) { return alloc(n); }
NUMAP_EXPORT void free(void* p) { release(p); }
NUMAP_EXPORT void cfree(void* p) { release(p); }

NUMAP_EXPORT void* calloc(size_t count, size_t size) {
  numap::Heap* h = numap::heap();
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (__builtin_expect(h->options().next_below != 0, 0) && numap::use_next(h, n))
    return numap::g_next.calloc(count, size);
  return h->calloc(count, size);
}

NUMAP_EXPORT void* realloc(void* p, size_t n) {
  numap::Heap* h = numap::heap();
  if (__builtin_expect(h->options().next_below == 0, 1)) return h->realloc(p, n);
  if (p == nullptr) return alloc(n);
  if (n == 0) {
    release(p);
    return nullptr;
  }
  const bool mine = h->owns(p) || numap::g_next_state.load() != 2;
  const bool want_next = numap::use_next(h, n);
  if (mine && !want_next) return h->realloc(p, n);
  if (!mine && want_next) return numap::g_next.realloc(p, n);
  // Crossing between the allocators: copy.
  const size_t old = mine ? h->usable_size(p) : numap::g_next.usable(p);
  void* q = want_next ? numap::g_next.malloc(n) : h->malloc(n);
  if (q == nullptr) return nullptr;
  memcpy(q, p, old < n ? old : n);
  release(p);
  return q;
}

NUMAP_EXPORT void* reallocarray(void* p, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, n);
}

NUMAP_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  const int saved = errno;
  void* p = alloc_aligned(align, n);
  if (p == nullptr) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

NUMAP_EXPORT void* aligned_alloc(size_t align, size_t n) {
  if (align == 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return alloc_aligned(align, n);
}

NUMAP_EXPORT void* memalign(size_t align, size_t n) {
  if (align != 0 && (align & (align - 1)) != 0) {  // glibc: round up to a power of two
    if (align > (size_t{1} << 62)) {
      errno = EINVAL;
      return nullptr;
    }
    align = size_t{1} << (64 - __builtin_clzll(align));
  }
  return alloc_aligned(align, n);
}

NUMAP_EXPORT void* valloc(size_t n) { return alloc_aligned(numap::kPage, n); }

NUMAP_EXPORT void* pvalloc(size_t n) {
  if (n > ~size_t{0} - numap::kPage) {
    errno = ENOMEM;
    return nullptr;
  }
  return alloc_aligned(numap::kPage, (n + numap::kPage - 1) & ~(numap::kPage - 1));
}

NUMAP_EXPORT size_t malloc_usable_size(void* p) {
  if (p == nullptr) return 0;
  numap::Heap* h = numap::heap();
  if (!h->in_arena(p) && numap::from_next(h, p)) return numap::g_next.usable(p);
  return h->usable_size(p);
}

// ---- C++ ----------------------------------------------------------------------------------------

NUMAP_EXPORT_CXX void* operator new(std::size_t n) { return numap::new_impl(n, 0, false); }
NUMAP_EXPORT_CXX void* operator new[](std::size_t n) { return numap::new_impl(n, 0, false); }
NUMAP_EXPORT_CXX void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return numap::new_impl(n, 0, true); }
NUMAP_EXPORT_CXX void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return numap::new_impl(n, 0, true); }
NUMAP_EXPORT_CXX void* operator new(std::size_t n, std::align_val_t a) {
  return numap::new_impl(n, static_cast<std::size_t>(a), false);
}
NUMAP_EXPORT_CXX void* operator new[](std::size_t n, std::align_val_t a) {
  return numap::new_impl(n, static_cast<std::size_t>(a), false);
}
NUMAP_EXPORT_CXX void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return numap::new_impl(n, static_cast<std::size_t>(a), true);
}
NUMAP_EXPORT_CXX void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return numap::new_impl(n, static_cast<std::size_t>(a), true);
}
NUMAP_EXPORT_CXX void operator delete(void* p) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete[](void* p) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete(void* p, std::size_t) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete[](void* p, std::size_t) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete(void* p, std::align_val_t) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
NUMAP_EXPORT_CXX void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }

// ---- glibc's malloc extras: numap's own figures, not glibc's unused arena ----------------------

// <malloc.h>'s layouts, spelled out: including it would redeclare the exported names noexcept.
struct numap_mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
struct numap_mallinfo {
  int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};

namespace numap {
namespace {
// arena: bytes charged (may be resident) in numap's arena; hblkhd: huge mappings; uordblks: in
// use (thread-cached objects count as in use, as in numap_stats); fordblks: charged but free.
numap_mallinfo2 info() {
  numap_mallinfo2 m{};
  struct numap_stats s{};
  s.struct_size = sizeof s;
  heap()->stats(&s, nullptr, 0);
  m.hblkhd = s.huge_bytes;
  m.arena = s.mapped_bytes - s.huge_bytes;
  m.uordblks = s.in_use_bytes - s.huge_bytes;
  m.fordblks = m.arena > m.uordblks ? m.arena - m.uordblks : 0;
  return m;
}
int clamp_int(size_t v) { return v > 0x7fffffff ? 0x7fffffff : static_cast<int>(v); }

void print_counters(const char* what) {
  struct numap_stats s{};
  s.struct_size = sizeof s;
  g_heap->stats(&s, nullptr, 0);
  write_stderr("numap: ");
  write_stderr(what);
  write_stderr(" pid=");
  write_stderr_u64(static_cast<std::uint64_t>(getpid()));
#define NUMAP_EXIT_LINE_FIELD(name, counted_by, exit_line, alloc_stats) \
  NUMAP_WHEN(exit_line, write_stderr(" " #name "="); write_stderr_u64(s.name);)
  NUMAP_TOTALS(NUMAP_EXIT_LINE_FIELD)
#undef NUMAP_EXIT_LINE_FIELD
  write_stderr("\n");
}

// NUMAP_STATS_AT_EXIT=1: proof, from inside any program, that numap served it (the preload tests
// read this line; a silently failed preload prints nothing).
__attribute__((destructor)) void stats_at_exit() {
  if (g_state.load(std::memory_order_acquire) == 2 && g_options.stats_at_exit) print_counters("exit");
}
}  // namespace
}  // namespace numap

NUMAP_EXPORT struct numap_mallinfo2 mallinfo2(void) { return numap::info(); }

NUMAP_EXPORT struct numap_mallinfo mallinfo(void) {
  const numap_mallinfo2 m = numap::info();
  numap_mallinfo o{};
  o.arena = numap::clamp_int(m.arena);
  o.hblkhd = numap::clamp_int(m.hblkhd);
  o.uordblks = numap::clamp_int(m.uordblks);
  o.fordblks = numap::clamp_int(m.fordblks);
  return o;
}

NUMAP_EXPORT int malloc_trim(size_t) { return numap::heap()->trim() > 0 ? 1 : 0; }

NUMAP_EXPORT void malloc_stats(void) {
  numap::heap();
  numap::print_counters("malloc_stats");
}

// ---- numap's own API ----------------------------------------------------------------------------

NUMAP_EXPORT size_t numap_stats(struct numap_stats* out, struct numap_class_stats* classes, size_t max_classes) {
  if (numap::g_state.load(std::memory_order_acquire) != 2) return 0;
  return numap::g_heap->stats(out, classes, max_classes);
}

NUMAP_EXPORT size_t numap_purge(void) { return numap::heap()->purge(); }

NUMAP_EXPORT int numap_option(size_t index, const char** name, long long* value, const char** text) {
  std::size_t count = 0;
  const numap::OptionInfo* table = numap::option_table(&count);
  if (index >= count) return 0;
  numap::heap();
  *name = table[index].name;
  *value = numap::option_value(numap::g_options, index, text);
  return 1;
}

NUMAP_EXPORT const char* numap_version(void) { return "numap 0.3.0"; }
