#include "allocators/numap/os.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace numap {
namespace {

// <numaif.h> constants, spelled out so numap does not link libnuma (its constructor mallocs).
constexpr int kMpolPreferred = 1;
constexpr int kMpolBind = 2;
// Mode flags get_mempolicy reports with the mode: MPOL_F_STATIC_NODES, MPOL_F_NUMA_BALANCING
// (`numactl --membind=N --balancing`). MPOL_F_RELATIVE_NODES is not stripped: its mask is relative
// to the cpuset, not kernel node numbers (the cpuset's mems still bound the process).
constexpr int kMpolAbsoluteFlags = (1 << 15) | (1 << 13);
#ifndef SYS_set_mempolicy_home_node
#define SYS_set_mempolicy_home_node 450  // the same number on every architecture (Linux 5.17)
#endif
constexpr int kMaskWords = 16;  // node masks of up to 1024 nodes

void* real_reserve(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}
int real_unmap(void* p, std::size_t bytes) { return ::munmap(p, bytes); }
int real_advise_free(void* p, std::size_t bytes) { return ::madvise(p, bytes, MADV_DONTNEED); }
int real_advise_huge(void* p, std::size_t bytes, bool huge) {
  return ::madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
}
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack the name
#endif
int real_populate(void* p, std::size_t bytes) { return ::madvise(p, bytes, MADV_POPULATE_WRITE); }
int real_resident(void* p, std::size_t bytes, unsigned char* vec) { return ::mincore(p, bytes, vec); }
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4  // Linux 5.7; older headers lack the name
#endif
int real_move_pages(void* from, void* to, std::size_t bytes) {
  return ::mremap(from, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to) == MAP_FAILED ? -1 : 0;
}
int real_replace(void* p, std::size_t bytes) {
  return ::mmap(p, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
                 MAP_FAILED
             ? -1
             : 0;
}
int real_bind_home(void* p, std::size_t bytes, int os_node, std::uint64_t allowed) {
  unsigned long mask[kMaskWords] = {};
  if (os_node < 0 || os_node >= 64) return -1;
  mask[0] = allowed | (1UL << os_node);
  if (::syscall(SYS_mbind, p, bytes, kMpolBind, mask, 64 * kMaskWords + 1, 0) != 0) return -1;
  // Without a home node a multi-node bind places pages on the faulting CPU's node, not os_node.
  return static_cast<int>(::syscall(SYS_set_mempolicy_home_node, p, bytes, os_node, 0));
}
int real_prefer(void* p, std::size_t bytes, int os_node) {
  unsigned long mask[kMaskWords] = {};
  if (os_node < 0 || os_node >= 64 * kMaskWords) return -1;
  mask[os_node / 64] = 1UL << (os_node % 64);
  return static_cast<int>(::syscall(SYS_mbind, p, bytes, kMpolPreferred, mask, 64 * kMaskWords + 1, 0));
}
int real_current_cpu() {
  unsigned cpu = 0, node = 0;
  return ::getcpu(&cpu, &node) == 0 ? static_cast<int>(cpu) : -1;
}
std::uint64_t real_policy_nodes() {
  int mode = 0;
  unsigned long mask[kMaskWords] = {};
  if (::syscall(SYS_get_mempolicy, &mode, mask, 64 * kMaskWords + 1, nullptr, 0) != 0) return 0;
  return (mode & ~kMpolAbsoluteFlags) == kMpolBind ? mask[0] : 0;
}

int real_membarrier(int cmd) { return static_cast<int>(::syscall(SYS_membarrier, cmd, 0, 0)); }

std::uint64_t real_now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000 + static_cast<std::uint64_t>(ts.tv_nsec) / 1000000;
}

bool real_read_lines(const char* path, void (*line)(void* ctx, const char* text), void* ctx) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  char cur[256];
  std::size_t len = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        cur[len] = '\0';
        line(ctx, cur);
        len = 0;
      } else if (len + 1 < sizeof cur) {
        cur[len++] = buf[i];
      }
    }
  }
  if (len > 0) {
    cur[len] = '\0';
    line(ctx, cur);
  }
  ::close(fd);
  return true;
}

const OsOps kReal{real_reserve,     real_unmap,        real_advise_free,  real_advise_huge, real_populate,
                  real_move_pages,  real_replace,      real_bind_home,    real_prefer,      real_current_cpu,
                  real_policy_nodes, real_now_ms,      real_read_lines,   real_membarrier,   real_resident};

}  // namespace

const OsOps& real_os() { return kReal; }

bool Os::register_barrier() const { return ops_->membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0; }
bool Os::barrier() const { return ops_->membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0; }

void* Os::reserve(std::size_t bytes) {
  void* p = ops_->reserve(bytes);
  if (p != nullptr) {
    counters.mmap_calls.fetch_add(1, std::memory_order_relaxed);
    counters.mmap_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  return p;
}
bool Os::unmap(void* p, std::size_t bytes) {
  counters.munmap_calls.fetch_add(1, std::memory_order_relaxed);
  counters.munmap_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return ops_->unmap(p, bytes) == 0;
}
bool Os::advise_free(void* p, std::size_t bytes) {
  counters.madvise_calls.fetch_add(1, std::memory_order_relaxed);
  counters.madvise_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return ops_->advise_free(p, bytes) == 0;
}
bool Os::advise_huge(void* p, std::size_t bytes, bool huge) {
  counters.madvise_calls.fetch_add(1, std::memory_order_relaxed);
  return ops_->advise_huge(p, bytes, huge) == 0;
}
bool Os::populate(void* p, std::size_t bytes) {
  counters.madvise_calls.fetch_add(1, std::memory_order_relaxed);
  if (ops_->populate(p, bytes) != 0) return false;
  counters.populated_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return true;
}
std::uint64_t Os::resident_bytes(void* p, std::size_t bytes) {
  unsigned char vec[1024];  // 4 MiB a call, on the stack: called inside free()
  std::uint64_t resident = 0;
  for (std::size_t off = 0; off < bytes; off += sizeof vec * kPage) {
    const std::size_t n = bytes - off < sizeof vec * kPage ? bytes - off : sizeof vec * kPage;
    const int saved_errno = errno;
    const int r = ops_->resident(static_cast<char*>(p) + off, n, vec);
    errno = saved_errno;
    if (r != 0) return 0;
    for (std::size_t i = 0; i < (n + kPage - 1) / kPage; ++i) resident += (vec[i] & 1) * kPage;
  }
  return resident;
}
bool Os::move_pages(void* from, void* to, std::size_t bytes) {
  counters.mremap_calls.fetch_add(1, std::memory_order_relaxed);
  if (ops_->move_pages(from, to, bytes) != 0) return false;
  counters.mremap_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return true;
}
bool Os::replace(void* p, std::size_t bytes) {
  counters.mmap_calls.fetch_add(1, std::memory_order_relaxed);
  return ops_->replace(p, bytes) == 0;
}
BindResult Os::bind(void* p, std::size_t bytes, int os_node, std::uint64_t allowed_os_mask) {
  counters.mbind_calls.fetch_add(1, std::memory_order_relaxed);
  if (ops_->bind_home(p, bytes, os_node, allowed_os_mask) == 0) return BindResult::kHome;
  counters.mbind_calls.fetch_add(1, std::memory_order_relaxed);
  if (ops_->prefer(p, bytes, os_node) == 0) {
    counters.bind_fallbacks.fetch_add(1, std::memory_order_relaxed);
    return BindResult::kPreferred;
  }
  counters.bind_failures.fetch_add(1, std::memory_order_relaxed);
  return BindResult::kFailed;
}

void Os::sleep_unless(const std::uint32_t* word, std::uint32_t expected, long ms) {
  timespec ts{static_cast<time_t>(ms / 1000), (ms % 1000) * 1000000};
  ::syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

void Os::wake(const std::uint32_t* word) { ::syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0); }

void write_stderr(const char* s) { write_stderr(s, ::strlen(s)); }

void write_stderr(const char* s, std::size_t n) {
  // numap's message must not kill the host: SIGPIPE (stderr a pipe whose reader is gone) is
  // blocked around the write, and the one this write raised is taken back unless one was already
  // pending; errno is the caller's again after.
  const int saved_errno = errno;
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  bool broken = false;
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      broken = w < 0 && errno == EPIPE;
      break;
    }
    s += w;
    n -= static_cast<std::size_t>(w);
  }
  if (broken && !was_pending) {
    const timespec now{0, 0};
    ::sigtimedwait(&pipe_only, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved_errno;
}

void write_stderr_u64(std::uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '\0';
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  write_stderr(p);
}

void fatal(const char* message) {
  write_stderr("numap: ");
  write_stderr(message);
  write_stderr("\n");
  ::abort();
}

}  // namespace numap
