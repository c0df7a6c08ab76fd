// liballocmark-trace-record.so: preloaded first into the program `allocmark trace record` runs
// (the allocator under test, if any, after it), it records every allocation call as the record
// stream of encoding.h on the pipe named by ALLOCMARK_TRACE_FD.
//
// Who records: only the process whose parent is the driver (ALLOCMARK_TRACE_DRIVER_PID), in every
// image it execs into (each begins with an 'I' chunk); the program's children load this library
// too but stay silent, and a fork child of the traced process stops recording (pthread_atfork).
//
// What it costs the program (the rules of issue 26): nothing here allocates through the traced
// allocator (thread state, buffers and the address table are mmap'ed) and no global lock is taken
// per call. Each thread appends its events to its own 64 KiB buffer and publishes the committed
// length after each complete event; a full buffer goes to a writer thread through a queue (one
// mutex, touched once per buffer), which writes it as a 'C' chunk. Live blocks are found in a
// sharded address table (address_table.h). A block leaves the table before the real free or
// realloc runs: the allocator may hand the address to another thread at once.
//
// Calls made while the real functions are being resolved (dlsym may allocate) come from a static
// bump arena and are never recorded; their frees are ignored. A call made inside another one
// (libstdc++'s operator new calling malloc) is recorded once, as the outer call. The writer and
// phase threads never record.
//
// The end: exit (atexit, registered at load) and _exit/_Exit (interposed: dash leaves that way)
// flush every thread's committed events, then send 'E' and close the pipe. A process killed by a
// signal sends no 'E'. Before exec the pipe is quiesced (no chunk is cut in half by the image
// change); the new image starts over with its 'I'.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

#include "harness/trace/address_table.h"
#include "harness/trace/encoding.h"
#include "harness/os/clock.h"

namespace {

using allocmark::trace::AddressTable;
using allocmark::trace::kMaxEventBytes;
using allocmark::trace::Op;
using allocmark::trace::put_varint;

// ---- The next definitions (the allocator under test, or the C and C++ libraries) ----

using NoThrow = const std::nothrow_t&;
using Align = std::align_val_t;

struct Real {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void (*free)(void*);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  void* (*new_)(size_t);
  void* (*new_nt)(size_t, NoThrow);
  void* (*new_al)(size_t, Align);
  void* (*new_al_nt)(size_t, Align, NoThrow);
  void* (*newa)(size_t);
  void* (*newa_nt)(size_t, NoThrow);
  void* (*newa_al)(size_t, Align);
  void* (*newa_al_nt)(size_t, Align, NoThrow);
  void (*del)(void*);
  void (*del_nt)(void*, NoThrow);
  void (*del_sz)(void*, size_t);
  void (*del_al)(void*, Align);
  void (*del_al_nt)(void*, Align, NoThrow);
  void (*del_sz_al)(void*, size_t, Align);
  void (*dela)(void*);
  void (*dela_nt)(void*, NoThrow);
  void (*dela_sz)(void*, size_t);
  void (*dela_al)(void*, Align);
  void (*dela_al_nt)(void*, Align, NoThrow);
  void (*dela_sz_al)(void*, size_t, Align);
  int (*execve)(const char*, char* const[], char* const[]);
  int (*execv)(const char*, char* const[]);
  int (*execvp)(const char*, char* const[]);
  int (*execvpe)(const char*, char* const[], char* const[]);
  int (*fexecve)(int, char* const[], char* const[]);
};
Real real;
std::atomic<int> g_resolve{0};  // 0: not yet, 1: in progress, 2: done

// ---- Per thread ----

struct Buffer;
struct ThreadRec;

struct Tls {
  int depth;         // > 0: inside a recorded call, or a thread that never records
  bool resolving;    // this thread is inside dlsym: serve from the bump arena
  bool no_record;    // registration refused (recording not on, no memory, no thread left): do not retry
  bool lost_calls;   // ... for want of memory or of a thread (kMaxThreads): its calls are counted as lost
  ThreadRec* rec;
};
thread_local Tls t_tls __attribute__((tls_model("initial-exec"))) = {};

constexpr std::size_t kBufferBytes = 64 * 1024;
constexpr std::size_t kMaxQueued = 256;  // 16 MiB waiting for the pipe: then a full thread waits

struct Buffer {
  Buffer* next;
  uint32_t thread;
  std::size_t from, to;  // the chunk to write: data[from, to)
  uint64_t events;
  uint8_t data[1];
};
constexpr std::size_t kBufferData = kBufferBytes - offsetof(Buffer, data);

struct ThreadRec {
  ThreadRec* next;               // the registry
  std::atomic<bool> lock;        // the owner takes it to hand a buffer over; the exit flush takes them all
  Buffer* buf;                   // changes under lock only; null once the thread has finished
  std::atomic<std::size_t> committed;  // bytes of buf->data holding complete events
  std::size_t flushed;           // bytes of buf already written by the exit flush
  uint32_t thread;
  uint64_t id_next, id_end;
  uint64_t last_us;
  uint64_t epoch;
  bool skipped;                  // the exit flush could not lock it
};

// ---- Global state ----

enum State : int { kOff = 0, kRecording = 1, kEnding = 2, kDone = 3 };
std::atomic<int> g_state{kOff};
int g_fd = -1;
pid_t g_pid = -1;
uint64_t g_start_ns = 0;
std::atomic<uint64_t> g_epoch{0};
std::atomic<uint64_t> g_next_id{1};
std::atomic<uint32_t> g_next_thread{0};
std::atomic<uint64_t> g_unknown_frees{0}, g_lost_events{0};
std::atomic<bool> g_pipe_broken{false};
constinit AddressTable g_table;
constexpr uint64_t kIdBlock = 1024;

pthread_key_t g_key;
std::atomic<bool> g_registry_lock{false};
ThreadRec* g_registry = nullptr;

pthread_mutex_t g_pipe_mu = PTHREAD_MUTEX_INITIALIZER;  // held for every chunk written whole
pthread_mutex_t g_q_mu = PTHREAD_MUTEX_INITIALIZER;     // the queue and the pool
pthread_cond_t g_q_ready = PTHREAD_COND_INITIALIZER;
pthread_cond_t g_q_space = PTHREAD_COND_INITIALIZER;
Buffer *g_q_head = nullptr, *g_q_tail = nullptr, *g_pool = nullptr;
std::size_t g_queued = 0;
bool g_writer_stop = false;
int g_phase_sock = -1;

// ---- Small tools ----

uint64_t now_ns() { return static_cast<uint64_t>(allocmark::os::monotonic_ns()); }
uint64_t now_us() { return (now_ns() - g_start_ns) / 1000; }

void spin_lock(std::atomic<bool>& l) {
  while (l.exchange(true, std::memory_order_acquire))
    while (l.load(std::memory_order_relaxed)) sched_yield();
}
// At the end, perhaps in a signal handler that interrupted the holder: give up after ~2 s.
bool spin_lock_bounded(std::atomic<bool>& l) {
  for (int k = 0; k < 20000; ++k) {
    if (!l.exchange(true, std::memory_order_acquire)) return true;
    timespec ts{0, 100000};
    nanosleep(&ts, nullptr);
  }
  return false;
}
void spin_unlock(std::atomic<bool>& l) { l.store(false, std::memory_order_release); }
bool mutex_lock_bounded(pthread_mutex_t& m) {
  for (int k = 0; k < 20000; ++k) {
    if (pthread_mutex_trylock(&m) == 0) return true;
    timespec ts{0, 100000};
    nanosleep(&ts, nullptr);
  }
  return false;
}

void* map(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Every byte, or false (the pipe is gone: the driver stopped reading).
bool write_all(int fd, const uint8_t* head, std::size_t head_len, const uint8_t* body, std::size_t body_len) {
  iovec iov[2] = {{const_cast<uint8_t*>(head), head_len}, {const_cast<uint8_t*>(body), body_len}};
  int first = 0;
  while (first < 2) {
    ssize_t n = ::writev(fd, iov + first, 2 - first);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    auto left = static_cast<std::size_t>(n);
    while (first < 2 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < 2) {
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return true;
}

// A chunk with its tag and varints, then `body`; the caller holds g_pipe_mu.
bool write_chunk(uint8_t tag, std::initializer_list<uint64_t> fields, const void* body, std::size_t body_len,
                 uint64_t events) {
  if (g_pipe_broken.load(std::memory_order_relaxed) || g_fd < 0) {
    g_lost_events.fetch_add(events, std::memory_order_relaxed);
    return false;
  }
  uint8_t head[1 + 4 * allocmark::trace::kMaxVarint];
  std::size_t n = 0;
  head[n++] = tag;
  for (uint64_t f : fields) n += put_varint(head + n, f);
  if (!write_all(g_fd, head, n, static_cast<const uint8_t*>(body), body_len)) {
    g_pipe_broken.store(true, std::memory_order_relaxed);
    g_lost_events.fetch_add(events, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void write_buffer(Buffer* b) {
  if (b->to > b->from)
    write_chunk(allocmark::trace::kTagChunk, {b->thread, b->to - b->from}, b->data + b->from, b->to - b->from, b->events);
}

// ---- The bump arena (before the real functions are known) ----

alignas(64) unsigned char g_arena[256 * 1024];
std::atomic<std::size_t> g_arena_used{0};

bool in_arena(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(g_arena);
  return a >= base && a < base + sizeof g_arena;
}
// A header of 16 bytes before each block holds its size (realloc copies it).
void* arena_alloc(std::size_t size, std::size_t align = 16) {
  if (align < 16) align = 16;
  std::size_t used = g_arena_used.load(std::memory_order_relaxed);
  for (;;) {
    std::size_t start = (used + 16 + align - 1) & ~(align - 1);
    if (start + size > sizeof g_arena || start + size < start) return nullptr;
    if (g_arena_used.compare_exchange_weak(used, start + size, std::memory_order_relaxed)) {
      std::memcpy(g_arena + start - 16, &size, sizeof size);
      return g_arena + start;
    }
  }
}
std::size_t arena_size(const void* p) {
  std::size_t size;
  std::memcpy(&size, static_cast<const unsigned char*>(p) - 16, sizeof size);
  return size;
}

template <typename F>
void resolve_one(F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void resolve() {
  int expected = 0;
  if (!g_resolve.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    while (g_resolve.load(std::memory_order_acquire) != 2) sched_yield();
    return;
  }
  t_tls.resolving = true;
  resolve_one(real.malloc, "malloc");
  resolve_one(real.calloc, "calloc");
  resolve_one(real.realloc, "realloc");
  resolve_one(real.free, "free");
  resolve_one(real.posix_memalign, "posix_memalign");
  resolve_one(real.aligned_alloc, "aligned_alloc");
  resolve_one(real.memalign, "memalign");
  resolve_one(real.valloc, "valloc");
  resolve_one(real.pvalloc, "pvalloc");
  resolve_one(real.new_, "_Znwm");
  resolve_one(real.new_nt, "_ZnwmRKSt9nothrow_t");
  resolve_one(real.new_al, "_ZnwmSt11align_val_t");
  resolve_one(real.new_al_nt, "_ZnwmSt11align_val_tRKSt9nothrow_t");
  resolve_one(real.newa, "_Znam");
  resolve_one(real.newa_nt, "_ZnamRKSt9nothrow_t");
  resolve_one(real.newa_al, "_ZnamSt11align_val_t");
  resolve_one(real.newa_al_nt, "_ZnamSt11align_val_tRKSt9nothrow_t");
  resolve_one(real.del, "_ZdlPv");
  resolve_one(real.del_nt, "_ZdlPvRKSt9nothrow_t");
  resolve_one(real.del_sz, "_ZdlPvm");
  resolve_one(real.del_al, "_ZdlPvSt11align_val_t");
  resolve_one(real.del_al_nt, "_ZdlPvSt11align_val_tRKSt9nothrow_t");
  resolve_one(real.del_sz_al, "_ZdlPvmSt11align_val_t");
  resolve_one(real.dela, "_ZdaPv");
  resolve_one(real.dela_nt, "_ZdaPvRKSt9nothrow_t");
  resolve_one(real.dela_sz, "_ZdaPvm");
  resolve_one(real.dela_al, "_ZdaPvSt11align_val_t");
  resolve_one(real.dela_al_nt, "_ZdaPvSt11align_val_tRKSt9nothrow_t");
  resolve_one(real.dela_sz_al, "_ZdaPvmSt11align_val_t");
  resolve_one(real.execve, "execve");
  resolve_one(real.execv, "execv");
  resolve_one(real.execvp, "execvp");
  resolve_one(real.execvpe, "execvpe");
  resolve_one(real.fexecve, "fexecve");
  t_tls.resolving = false;
  if (!real.malloc || !real.free || !real.calloc || !real.realloc) {
    static const char msg[] = "allocmark trace recorder: the next malloc was not found\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::syscall(SYS_exit_group, 127);
  }
  g_resolve.store(2, std::memory_order_release);
}

// True when the real functions can be called; false: serve this call from the arena.
inline bool ready() {
  if (__builtin_expect(g_resolve.load(std::memory_order_acquire) == 2, 1)) return true;
  if (t_tls.resolving) return false;
  resolve();
  return true;
}

// ---- Buffers, the queue and the writer thread ----

// A fresh buffer from the pool (or mmap); waits while the pipe is kMaxQueued buffers behind.
Buffer* take_buffer() {
  Buffer* b = nullptr;
  pthread_mutex_lock(&g_q_mu);
  while (g_queued >= kMaxQueued && g_state.load(std::memory_order_relaxed) == kRecording && !g_writer_stop)
    pthread_cond_wait(&g_q_space, &g_q_mu);
  if (g_pool) {
    b = g_pool;
    g_pool = b->next;
  }
  pthread_mutex_unlock(&g_q_mu);
  if (!b) b = static_cast<Buffer*>(map(kBufferBytes));
  if (b) {
    b->next = nullptr;
    b->events = 0;
    b->from = b->to = 0;
  }
  return b;
}

void recycle(Buffer* b) {
  pthread_mutex_lock(&g_q_mu);
  b->next = g_pool;
  g_pool = b;
  pthread_mutex_unlock(&g_q_mu);
}

// The thread's buffer goes to the writer; it gets a fresh one (none when `last`: it is finishing).
void hand_over(ThreadRec* r, bool last) {
  Buffer* fresh = last ? nullptr : take_buffer();
  spin_lock(r->lock);
  Buffer* old = r->buf;
  const std::size_t end = r->committed.load(std::memory_order_relaxed);
  bool queued = false;
  if (old && end > r->flushed && g_state.load(std::memory_order_acquire) != kDone) {
    old->thread = r->thread;
    old->from = r->flushed;
    old->to = end;
    pthread_mutex_lock(&g_q_mu);
    old->next = nullptr;
    (g_q_tail ? g_q_tail->next : g_q_head) = old;
    g_q_tail = old;
    ++g_queued;
    pthread_cond_signal(&g_q_ready);
    pthread_mutex_unlock(&g_q_mu);
    queued = true;
  }
  r->buf = fresh;
  r->flushed = 0;
  r->committed.store(0, std::memory_order_relaxed);
  spin_unlock(r->lock);
  if (old && !queued) recycle(old);
}

void* writer_main(void*) {
  t_tls.depth = 1;  // never records
  for (;;) {
    pthread_mutex_lock(&g_q_mu);
    while (!g_q_head && !g_writer_stop) pthread_cond_wait(&g_q_ready, &g_q_mu);
    const bool stop = g_writer_stop;
    pthread_mutex_unlock(&g_q_mu);
    if (stop) return nullptr;
    // The pipe lock first, then the pop: the exit flush (which holds the pipe lock) writes what is
    // queued in order, and a thread's chunks never overtake each other.
    pthread_mutex_lock(&g_pipe_mu);
    pthread_mutex_lock(&g_q_mu);
    Buffer* b = g_q_head;
    if (b) {
      g_q_head = b->next;
      if (!g_q_head) g_q_tail = nullptr;
    }
    pthread_mutex_unlock(&g_q_mu);
    if (b) write_buffer(b);
    pthread_mutex_unlock(&g_pipe_mu);
    if (b) {
      pthread_mutex_lock(&g_q_mu);
      b->next = g_pool;
      g_pool = b;
      --g_queued;
      pthread_cond_broadcast(&g_q_space);
      pthread_mutex_unlock(&g_q_mu);
    }
  }
}

// ---- Recording ----

// Thread records are carved from mmap'ed slabs under the registry lock and kept to the end (the
// exit flush walks them all); a finished thread's record keeps only its number.
constexpr std::size_t kSlabBytes = 64 * 1024;
unsigned char* g_slab = nullptr;
std::size_t g_slab_used = kSlabBytes;

ThreadRec* register_thread(Tls& t) {
  Buffer* b = take_buffer();
  if (!b) {
    t.no_record = t.lost_calls = true;
    g_lost_events.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  spin_lock(g_registry_lock);
  ThreadRec* r = nullptr;
  // A trace holds at most kMaxThreads threads (encoding.h): a thread past them is not recorded.
  const bool room = g_next_thread.load(std::memory_order_relaxed) < allocmark::trace::kMaxThreads;
  if (g_state.load(std::memory_order_acquire) == kRecording && room) {
    if (g_slab_used + sizeof(ThreadRec) > kSlabBytes) {
      if (auto* slab = static_cast<unsigned char*>(map(kSlabBytes))) {
        g_slab = slab;
        g_slab_used = 0;
      }
    }
    if (g_slab_used + sizeof(ThreadRec) <= kSlabBytes) {
      r = new (g_slab + g_slab_used) ThreadRec{};
      g_slab_used += (sizeof(ThreadRec) + 63) & ~std::size_t{63};
    }
  }
  if (!r) {
    const bool recording_on = g_state.load(std::memory_order_acquire) == kRecording;
    spin_unlock(g_registry_lock);
    recycle(b);
    t.no_record = true;
    if (recording_on) {  // no slab (out of memory), or no room for another thread
      t.lost_calls = true;
      g_lost_events.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  r->buf = b;
  r->thread = g_next_thread.fetch_add(1, std::memory_order_relaxed);
  r->next = g_registry;
  g_registry = r;
  spin_unlock(g_registry_lock);
  t.rec = r;
  pthread_setspecific(g_key, r);  // the thread's end hands its last buffer over
  return r;
}

// The calling thread's record; null when it does not record (a call it made is then counted as
// lost when that is for want of memory or of a thread).
inline ThreadRec* rec_of(Tls& t) {
  if (__builtin_expect(t.rec != nullptr, 1)) return t.rec;
  if (t.no_record) {
    if (t.lost_calls) g_lost_events.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  return register_thread(t);
}

inline uint64_t new_id(ThreadRec* r) {
  if (r->id_next == r->id_end) {
    r->id_next = g_next_id.fetch_add(kIdBlock, std::memory_order_relaxed);
    r->id_end = r->id_next + kIdBlock;
  }
  return r->id_next++;
}

// A thread past its end-of-thread hook still allocates and frees: another pthread key's destructor
// freeing its value (64 threads lost 64 frees so), glibc's own teardown. Each such event goes out
// in a buffer of its own, through the queue, after the thread's last one.
bool late_buffer(ThreadRec* r) {
  Buffer* b = take_buffer();
  if (!b) return false;
  spin_lock(r->lock);
  r->buf = b;
  r->flushed = 0;
  r->committed.store(0, std::memory_order_relaxed);
  spin_unlock(r->lock);
  return true;
}

// Appends one event (after an Op::Phase event when a phase mark came since the thread's last);
// false when it was lost (counted) for want of a buffer.
bool emit(ThreadRec* r, Op op, std::initializer_list<uint64_t> args) {
  const bool late = r->buf == nullptr;
  if (late && !late_buffer(r)) {
    g_lost_events.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  std::size_t pos = r->committed.load(std::memory_order_relaxed);
  if (pos + 2 * kMaxEventBytes > kBufferData) {
    hand_over(r, false);
    pos = 0;
  }
  Buffer* b = r->buf;
  if (!b) {
    g_lost_events.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const uint64_t now = now_us();
  uint8_t* const start = b->data + pos;
  uint8_t* q = start;
  const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  if (epoch != r->epoch) {
    r->epoch = epoch;
    *q++ = static_cast<uint8_t>(Op::Phase);
    q += put_varint(q, now - r->last_us);
    q += put_varint(q, epoch);
    r->last_us = now;
    ++b->events;
  }
  *q++ = static_cast<uint8_t>(op);
  q += put_varint(q, now - r->last_us);
  r->last_us = now;
  for (uint64_t a : args) q += put_varint(q, a);
  ++b->events;
  r->committed.store(pos + static_cast<std::size_t>(q - start), std::memory_order_release);
  if (late) hand_over(r, true);
  return true;
}

inline bool recording(const Tls& t) {
  return t.depth == 0 && g_state.load(std::memory_order_relaxed) == kRecording;
}

// The outer call's guard: nested calls pass through; errno is the real call's.
struct Outer {
  explicit Outer(Tls& t) : t_(t) { t_.depth = 1; }
  ~Outer() { t_.depth = 0; }
  Tls& t_;
};

// The id of realloc's new block q, entered in the table; 0 (and counted as lost) when the table
// cannot grow: the replay then keeps the old block and never sees the new one.
uint64_t realloc_id(ThreadRec* r, void* q, std::size_t n) {
  const uint64_t id = new_id(r);
  if (g_table.insert(reinterpret_cast<uintptr_t>(q), id, n)) return id;
  g_lost_events.fetch_add(1, std::memory_order_relaxed);
  return 0;
}
// A block whose allocation was lost leaves the table: its free is then counted, not recorded.
void forget(void* p) {
  AddressTable::Entry dropped{};
  g_table.remove(reinterpret_cast<uintptr_t>(p), dropped);
}

void record_alloc(Tls& t, Op op, void* p, uint64_t size, uint64_t align, bool with_align) {
  const int saved = errno;
  if (ThreadRec* r = rec_of(t)) {
    uint64_t id = 0;
    if (p) {
      id = new_id(r);
      if (!g_table.insert(reinterpret_cast<uintptr_t>(p), id, size)) {
        g_lost_events.fetch_add(1, std::memory_order_relaxed);
        errno = saved;
        return;
      }
    }
    const bool kept = with_align ? emit(r, op, {id, size, align}) : emit(r, op, {id, size});
    // A block whose allocation was lost is unknown to the trace: its free is counted, not recorded.
    if (!kept && p) forget(p);
  }
  errno = saved;
}

// Takes p out of the table and records its free; the caller then calls the real free.
void record_free(Tls& t, Op op, void* p) {
  const int saved = errno;
  AddressTable::Entry e{};
  if (!g_table.remove(reinterpret_cast<uintptr_t>(p), e)) {
    g_unknown_frees.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (ThreadRec* r = rec_of(t)) emit(r, op, {e.id, e.size});
  }
  errno = saved;
}

// ---- Start and end ----

bool write_small_chunk(uint8_t tag, std::initializer_list<uint64_t> fields, const void* body = nullptr,
                       std::size_t len = 0) {
  pthread_mutex_lock(&g_pipe_mu);
  bool ok = write_chunk(tag, fields, body, len, 0);
  pthread_mutex_unlock(&g_pipe_mu);
  return ok;
}

// Everything committed goes out, then 'E'. Runs once, in the traced process only.
void finish_recording() {
  if (g_pid < 0 || ::getpid() != g_pid) return;  // a fork or vfork child
  int expected = kRecording;
  if (!g_state.compare_exchange_strong(expected, kEnding, std::memory_order_acq_rel)) return;
  const int saved = errno;
  ++t_tls.depth;
  const bool have_pipe = mutex_lock_bounded(g_pipe_mu);
  const bool have_registry = spin_lock_bounded(g_registry_lock);
  // Every record stays locked until the end: no thread hands a buffer over meanwhile.
  uint64_t skipped_events = 0;
  if (have_registry) {
    for (ThreadRec* r = g_registry; r; r = r->next) {
      r->skipped = !spin_lock_bounded(r->lock);  // its holder never let go (a signal handler's _exit)
      if (r->skipped && r->buf) skipped_events += r->buf->events;
    }
  }
  Buffer* queue = nullptr;
  if (mutex_lock_bounded(g_q_mu)) {
    queue = g_q_head;
    g_q_head = g_q_tail = nullptr;
    g_queued = 0;
    pthread_cond_broadcast(&g_q_space);
    pthread_mutex_unlock(&g_q_mu);
  }
  if (have_pipe) {
    for (Buffer* b = queue; b; b = b->next) write_buffer(b);
    if (have_registry) {
      for (ThreadRec* r = g_registry; r; r = r->next) {
        if (r->skipped || !r->buf) continue;
        const std::size_t end = r->committed.load(std::memory_order_acquire);
        if (end > r->flushed)
          write_chunk(allocmark::trace::kTagChunk, {r->thread, end - r->flushed}, r->buf->data + r->flushed,
                      end - r->flushed, r->buf->events);
        r->flushed = end;
      }
    }
    g_lost_events.fetch_add(skipped_events, std::memory_order_relaxed);
    write_chunk(allocmark::trace::kTagEnd,
                {g_unknown_frees.load(std::memory_order_relaxed), g_lost_events.load(std::memory_order_relaxed)},
                nullptr, 0, 0);
    ::close(g_fd);
    g_fd = -1;
  }
  g_state.store(kDone, std::memory_order_release);
  if (have_registry) {
    for (ThreadRec* r = g_registry; r; r = r->next)
      if (!r->skipped) spin_unlock(r->lock);
    spin_unlock(g_registry_lock);
  }
  if (have_pipe) pthread_mutex_unlock(&g_pipe_mu);
  if (mutex_lock_bounded(g_q_mu)) {
    g_writer_stop = true;
    pthread_cond_broadcast(&g_q_ready);
    pthread_cond_broadcast(&g_q_space);
    pthread_mutex_unlock(&g_q_mu);
  }
  --t_tls.depth;
  errno = saved;
}

void on_exit() { finish_recording(); }

void on_thread_end(void* p) {
  auto* r = static_cast<ThreadRec*>(p);
  ++t_tls.depth;
  hand_over(r, true);  // r->buf becomes null: later calls of this thread are not recorded
  --t_tls.depth;
}

void on_fork_child() {
  // The child records nothing and never writes the pipe; its locks may be held by parent threads
  // that do not exist here, so it touches nothing of the recorder either.
  g_state.store(kOff, std::memory_order_relaxed);
  g_pid = -1;
}

// Exec replaces the image and kills the writer where it stands: no chunk may be half written
// then. The pipe is held across the exec; if the exec fails, recording goes on. An 'X' chunk names
// the image first: when the recorder cannot load into it (statically linked, set-uid), `trace
// record` says which image that was.
struct ExecGuard {
  explicit ExecGuard(const char* path) {
    if (g_state.load(std::memory_order_relaxed) == kRecording && g_pid == ::getpid()) {
      held_ = mutex_lock_bounded(g_pipe_mu);
      if (held_) {
        std::size_t n = path ? std::strlen(path) : 0;
        if (n > allocmark::trace::kMaxExecPath) n = allocmark::trace::kMaxExecPath;
        write_chunk(allocmark::trace::kTagExec, {n}, path, n, 0);
      }
    }
  }
  ~ExecGuard() {
    if (held_) pthread_mutex_unlock(&g_pipe_mu);
  }
  bool held_ = false;
};

// ---- Phases ----

void answer(const char* text) {
  for (std::size_t off = 0, len = std::strlen(text); off < len;) {
    ssize_t n = ::send(g_phase_sock, text + off, len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the program closed its end: the mark still counts
    off += static_cast<std::size_t>(n);
  }
}

void phase_line(const char* line, std::size_t len, bool overlong) {
  if (overlong || len < 6 || std::memcmp(line, "phase ", 6) != 0 || !allocmark::trace::valid_phase_name(line + 6, len - 6)) {
    answer("error\n");
    return;
  }
  const uint64_t at = now_us();
  const uint64_t epoch = g_epoch.load(std::memory_order_relaxed) + 1;
  if (epoch > allocmark::trace::kMaxPhaseMarks) {  // a trace holds at most so many (encoding.h)
    answer("error\n");
    return;
  }
  if (g_state.load(std::memory_order_relaxed) == kRecording) {
    pthread_mutex_lock(&g_pipe_mu);
    if (g_state.load(std::memory_order_relaxed) == kRecording)
      write_chunk(allocmark::trace::kTagPhase, {epoch, at, len - 6}, line + 6, len - 6, 0);
    pthread_mutex_unlock(&g_pipe_mu);
  }
  // After the 'P' chunk: a reader meets the mark before any thread's Op::Phase can name it.
  g_epoch.store(epoch, std::memory_order_release);
  answer("ok\n");
}

void* phase_main(void*) {
  t_tls.depth = 1;  // never records
  char line[80];
  std::size_t len = 0;
  bool overlong = false;
  char in[512];
  for (;;) {
    ssize_t n = ::read(g_phase_sock, in, sizeof in);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return nullptr;  // every copy of the program's end is closed
    for (ssize_t i = 0; i < n; ++i) {
      if (in[i] == '\n') {
        phase_line(line, len, overlong);
        len = 0;
        overlong = false;
      } else if (len < sizeof line) {
        line[len++] = in[i];
      } else {
        overlong = true;
      }
    }
  }
}

// The program's end of a socketpair on descriptor K (inherited by later images), ours CLOEXEC.
bool start_phases(int k, pthread_t& thread) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  if (sv[1] == k) {
    int moved = ::fcntl(sv[1], F_DUPFD_CLOEXEC, k + 1);
    ::close(sv[1]);
    sv[1] = moved;
  }
  if (sv[0] == k) {
    ::fcntl(k, F_SETFD, 0);
  } else {
    if (::dup2(sv[0], k) < 0) return false;
    ::close(sv[0]);
  }
  g_phase_sock = sv[1];
  return pthread_create(&thread, nullptr, phase_main, nullptr) == 0;
}

__attribute__((constructor)) void on_load() {
  ++t_tls.depth;  // nothing here is recorded
  ready();
  const char* fd = std::getenv("ALLOCMARK_TRACE_FD");
  const char* driver = std::getenv("ALLOCMARK_TRACE_DRIVER_PID");
  if (!fd || !driver || ::getppid() != std::atoi(driver)) {
    --t_tls.depth;
    return;
  }
  g_fd = std::atoi(fd);
  g_pid = ::getpid();
  g_start_ns = now_ns();
  if (pthread_key_create(&g_key, on_thread_end) != 0) {
    --t_tls.depth;
    return;
  }
  pthread_atfork(nullptr, nullptr, on_fork_child);
  write_small_chunk(allocmark::trace::kTagImage, {static_cast<uint64_t>(g_pid)});
  // Our threads take none of the program's signals.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t writer, phases;
  bool ok = pthread_create(&writer, nullptr, writer_main, nullptr) == 0;
  if (ok) pthread_detach(writer);
  if (ok) {
    if (const char* k = std::getenv("ALLOCMARK_PHASE_FD"); k && *k) {
      if (start_phases(std::atoi(k), phases)) pthread_detach(phases);
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (ok) {
    std::atexit(on_exit);
    g_state.store(kRecording, std::memory_order_release);
  }
  --t_tls.depth;
}

[[noreturn]] void exit_group(int status) {
  for (;;) ::syscall(SYS_exit_group, status);
}

// ---- The interposed calls ----

template <typename Call>
inline void free_with(Op op, void* p, Call&& call) {
  Tls& t = t_tls;
  if (!recording(t)) return call();
  Outer outer(t);
  record_free(t, op, p);
  call();
}

template <typename Call>
inline void* new_with(Op op, std::size_t n, uint64_t align, bool with_align, Call&& call) {
  Tls& t = t_tls;
  if (!recording(t)) return call();
  Outer outer(t);  // resets the depth when the real operator new throws
  void* p = call();
  record_alloc(t, op, p, n, align, with_align);
  return p;
}

// Without a next operator new (no C++ library after us, which cannot be: we link it), malloc.
void* fallback_new(std::size_t n, std::size_t align, bool nothrow) {
  void* p = align > 16 ? real.aligned_alloc(align, (n + align - 1) / align * align) : real.malloc(n ? n : 1);
  if (!p && !nothrow) throw std::bad_alloc();
  return p;
}

}  // namespace

extern "C" {

void* malloc(size_t n) {
  if (!ready()) return arena_alloc(n);
  Tls& t = t_tls;
  if (!recording(t)) return real.malloc(n);
  Outer outer(t);
  void* p = real.malloc(n);
  record_alloc(t, Op::Malloc, p, n, 0, false);
  return p;
}

void* calloc(size_t n, size_t m) {
  if (!ready()) {
    std::size_t bytes;
    return __builtin_mul_overflow(n, m, &bytes) ? nullptr : arena_alloc(bytes);  // the arena is zero
  }
  Tls& t = t_tls;
  if (!recording(t)) return real.calloc(n, m);
  Outer outer(t);
  void* p = real.calloc(n, m);
  std::size_t bytes;
  if (__builtin_mul_overflow(n, m, &bytes)) bytes = SIZE_MAX;
  record_alloc(t, Op::Calloc, p, bytes, 0, false);
  return p;
}

void free(void* p) {
  if (!p || in_arena(p)) return;
  if (!ready()) return;
  free_with(Op::Free, p, [p] { real.free(p); });
}

void* realloc(void* p, size_t n) {
  if (in_arena(p)) {
    void* q = malloc(n);
    if (q) std::memcpy(q, p, arena_size(p) < n ? arena_size(p) : n);
    return q;
  }
  if (!ready()) return arena_alloc(n);  // p is null here: nothing before the arena
  Tls& t = t_tls;
  if (!recording(t)) return real.realloc(p, n);
  Outer outer(t);
  AddressTable::Entry old{};
  const bool known = p && g_table.remove(reinterpret_cast<uintptr_t>(p), old);
  void* q = real.realloc(p, n);
  const int saved = errno;
  ThreadRec* r = rec_of(t);
  if (!q && p && n != 0) {
    // Failed: p is still live (recorded with new id 0 and the size asked for).
    if (known) g_table.insert(reinterpret_cast<uintptr_t>(p), old.id, old.size);
    if (r && known) emit(r, Op::Realloc, {old.id, 0, n, old.size});
  } else if (p && !known) {
    // A block from before the recording: recorded as a realloc of NULL, its free counted.
    g_unknown_frees.fetch_add(1, std::memory_order_relaxed);
    if (r) {
      const uint64_t id = q ? realloc_id(r, q, n) : 0;
      if (!emit(r, Op::Realloc, {0, id, n, 0}) && id) forget(q);
    }
  } else if (!r) {
    // not recorded (rec_of counted it when that is a loss)
  } else {
    const uint64_t id = q ? realloc_id(r, q, n) : 0;
    if (!emit(r, Op::Realloc, {known ? old.id : 0, id, n, known ? old.size : 0}) && id) forget(q);
  }
  errno = saved;
  return q;
}

int posix_memalign(void** out, size_t align, size_t n) {
  if (!ready()) {
    *out = arena_alloc(n, align);
    return *out ? 0 : ENOMEM;
  }
  Tls& t = t_tls;
  if (!recording(t)) return real.posix_memalign(out, align, n);
  Outer outer(t);
  void* p = nullptr;
  int rc = real.posix_memalign(&p, align, n);
  if (rc == 0) *out = p;
  record_alloc(t, Op::PosixMemalign, rc == 0 ? p : nullptr, n, align, true);
  return rc;
}

#define ALLOCMARK_ALIGNED(name, op, arena_align, call_args, align_value, with_align, ...) \
  void* name(__VA_ARGS__) {                                                              \
    if (!ready()) return arena_alloc(n, arena_align);                                    \
    Tls& t = t_tls;                                                                      \
    if (!recording(t)) return real.name call_args;                                       \
    Outer outer(t);                                                                      \
    void* p = real.name call_args;                                                       \
    record_alloc(t, op, p, n, align_value, with_align);                                  \
    return p;                                                                            \
  }
ALLOCMARK_ALIGNED(aligned_alloc, Op::AlignedAlloc, align, (align, n), align, true, size_t align, size_t n)
ALLOCMARK_ALIGNED(memalign, Op::Memalign, align, (align, n), align, true, size_t align, size_t n)
ALLOCMARK_ALIGNED(valloc, Op::Valloc, 4096, (n), 0, false, size_t n)
ALLOCMARK_ALIGNED(pvalloc, Op::Pvalloc, 4096, (n), 0, false, size_t n)
#undef ALLOCMARK_ALIGNED

[[noreturn]] void _exit(int status) {
  finish_recording();
  exit_group(status);
}
[[noreturn]] void _Exit(int status) noexcept {
  finish_recording();
  exit_group(status);
}

int execve(const char* path, char* const argv[], char* const envp[]) {
  ready();
  ExecGuard guard(path);
  return real.execve(path, argv, envp);
}
int execv(const char* path, char* const argv[]) {
  ready();
  ExecGuard guard(path);
  return real.execv(path, argv);
}
int execvp(const char* file, char* const argv[]) {
  ready();
  ExecGuard guard(file);
  return real.execvp(file, argv);
}
int execvpe(const char* file, char* const argv[], char* const envp[]) {
  ready();
  ExecGuard guard(file);
  return real.execvpe(file, argv, envp);
}
int fexecve(int fd, char* const argv[], char* const envp[]) {
  ready();
  char name[32] = "descriptor ";  // no allocation here
  std::size_t at = std::strlen(name);
  char digits[12];
  std::size_t k = 0;
  for (unsigned v = static_cast<unsigned>(fd); k == 0 || v; v /= 10) digits[k++] = static_cast<char>('0' + v % 10);
  while (k) name[at++] = digits[--k];
  name[at] = '\0';
  ExecGuard guard(name);
  return real.fexecve(fd, argv, envp);
}

}  // extern "C"

// The execl family collects its arguments and goes through the vector forms above.
#define ALLOCMARK_COLLECT_ARGS(first, ap, argv)              \
  std::size_t argc = 1;                                      \
  va_start(ap, first);                                       \
  while (va_arg(ap, const char*)) ++argc;                    \
  va_end(ap);                                                \
  char** argv = static_cast<char**>(__builtin_alloca((argc + 1) * sizeof(char*))); \
  argv[0] = const_cast<char*>(first);                        \
  va_start(ap, first);                                       \
  for (std::size_t i = 1; i <= argc; ++i) argv[i] = va_arg(ap, char*);

extern "C" int execl(const char* path, const char* arg, ...) {
  va_list ap;
  ALLOCMARK_COLLECT_ARGS(arg, ap, argv)
  va_end(ap);
  return execv(path, argv);
}
extern "C" int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  ALLOCMARK_COLLECT_ARGS(arg, ap, argv)
  va_end(ap);
  return execvp(file, argv);
}
extern "C" int execle(const char* path, const char* arg, ...) {
  va_list ap;
  ALLOCMARK_COLLECT_ARGS(arg, ap, argv)
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, argv, envp);
}
#undef ALLOCMARK_COLLECT_ARGS

// ---- C++ ----

void* operator new(std::size_t n) {
  ready();
  return new_with(Op::New, n, 0, false, [n] { return real.new_ ? real.new_(n) : fallback_new(n, 0, false); });
}
void* operator new[](std::size_t n) {
  ready();
  return new_with(Op::NewArray, n, 0, false, [n] { return real.newa ? real.newa(n) : fallback_new(n, 0, false); });
}
void* operator new(std::size_t n, const std::nothrow_t& nt) noexcept {
  ready();
  return new_with(Op::New, n, 0, false, [&] { return real.new_nt ? real.new_nt(n, nt) : fallback_new(n, 0, true); });
}
void* operator new[](std::size_t n, const std::nothrow_t& nt) noexcept {
  ready();
  return new_with(Op::NewArray, n, 0, false,
                  [&] { return real.newa_nt ? real.newa_nt(n, nt) : fallback_new(n, 0, true); });
}
void* operator new(std::size_t n, std::align_val_t al) {
  ready();
  return new_with(Op::NewAligned, n, static_cast<uint64_t>(al), true, [&] {
    return real.new_al ? real.new_al(n, al) : fallback_new(n, static_cast<std::size_t>(al), false);
  });
}
void* operator new[](std::size_t n, std::align_val_t al) {
  ready();
  return new_with(Op::NewArrayAligned, n, static_cast<uint64_t>(al), true, [&] {
    return real.newa_al ? real.newa_al(n, al) : fallback_new(n, static_cast<std::size_t>(al), false);
  });
}
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t& nt) noexcept {
  ready();
  return new_with(Op::NewAligned, n, static_cast<uint64_t>(al), true, [&] {
    return real.new_al_nt ? real.new_al_nt(n, al, nt) : fallback_new(n, static_cast<std::size_t>(al), true);
  });
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t& nt) noexcept {
  ready();
  return new_with(Op::NewArrayAligned, n, static_cast<uint64_t>(al), true, [&] {
    return real.newa_al_nt ? real.newa_al_nt(n, al, nt) : fallback_new(n, static_cast<std::size_t>(al), true);
  });
}

// Deletes: without a next definition, the memory came from malloc or aligned_alloc (fallback_new).
#define ALLOCMARK_DELETE(op, fn, field, args, ...)                               \
  void fn(__VA_ARGS__) noexcept {                                                \
    if (!p || in_arena(p)) return;                                               \
    ready();                                                                     \
    free_with(op, p, [&] {                                                       \
      if (real.field)                                                            \
        real.field args;                                                         \
      else                                                                       \
        real.free(p);                                                            \
    });                                                                          \
  }
ALLOCMARK_DELETE(Op::Delete, operator delete, del, (p), void* p)
ALLOCMARK_DELETE(Op::DeleteArray, operator delete[], dela, (p), void* p)
ALLOCMARK_DELETE(Op::Delete, operator delete, del_nt, (p, nt), void* p, const std::nothrow_t& nt)
ALLOCMARK_DELETE(Op::DeleteArray, operator delete[], dela_nt, (p, nt), void* p, const std::nothrow_t& nt)
ALLOCMARK_DELETE(Op::DeleteSized, operator delete, del_sz, (p, n), void* p, std::size_t n)
ALLOCMARK_DELETE(Op::DeleteArraySized, operator delete[], dela_sz, (p, n), void* p, std::size_t n)
ALLOCMARK_DELETE(Op::DeleteAligned, operator delete, del_al, (p, al), void* p, std::align_val_t al)
ALLOCMARK_DELETE(Op::DeleteArrayAligned, operator delete[], dela_al, (p, al), void* p, std::align_val_t al)
ALLOCMARK_DELETE(Op::DeleteAligned, operator delete, del_al_nt, (p, al, nt), void* p, std::align_val_t al,
                 const std::nothrow_t& nt)
ALLOCMARK_DELETE(Op::DeleteArrayAligned, operator delete[], dela_al_nt, (p, al, nt), void* p, std::align_val_t al,
                 const std::nothrow_t& nt)
ALLOCMARK_DELETE(Op::DeleteAligned, operator delete, del_sz_al, (p, n, al), void* p, std::size_t n,
                 std::align_val_t al)
ALLOCMARK_DELETE(Op::DeleteArrayAligned, operator delete[], dela_sz_al, (p, n, al), void* p, std::size_t n,
                 std::align_val_t al)
#undef ALLOCMARK_DELETE
