// Layer 0, the platform: the ONLY code in numap that calls mmap, mremap, munmap, madvise, mbind,
// set_mempolicy_home_node, get_mempolicy, getcpu and membarrier, and that reads the kernel's free-memory
// files after start. Everything above asks this narrow interface (like snmalloc's PAL), and
// tests swap the function table to inject failures. Every call is counted (calls and bytes).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allocators/numap/counters.h"

namespace numap {

// The raw operations. Return values follow the system calls: null on failure for reserve
// (errno set), 0 / -1 for the rest.
struct OsOps {
  void* (*reserve)(std::size_t bytes);                       // PROT_READ|WRITE, MAP_NORESERVE
  int (*unmap)(void* p, std::size_t bytes);
  int (*advise_free)(void* p, std::size_t bytes);            // MADV_DONTNEED: pages read as zero after
  int (*advise_huge)(void* p, std::size_t bytes, bool huge); // MADV_HUGEPAGE / MADV_NOHUGEPAGE
  // MADV_POPULATE_WRITE (Linux 5.14): the range's missing pages are allocated and mapped writable
  // in one call, as if each were written (zero-filled, placed by the range's policy, counted as
  // minor faults), without a trap per page. Fails with EINVAL before 5.14.
  int (*populate)(void* p, std::size_t bytes);
  // mremap(MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, Linux 5.7): the resident pages of
  // [from, from + bytes) move to `to` (page-table entries only: no copy, no fault, no zeroing), and
  // `from` stays mapped as it was, reading zero. `to` becomes a mapping of its own (its pages keep
  // their old offsets), one more entry in /proc/self/maps until `replace` covers it.
  int (*move_pages)(void* from, void* to, std::size_t bytes);
  // mmap(MAP_FIXED | MAP_NORESERVE) over [p, p + bytes): fresh zero pages as in `reserve`, no
  // advice, no policy; with the neighbours' advice and policy set again it merges back into them.
  int (*replace)(void* p, std::size_t bytes);
  // mbind(MPOL_BIND) to the kernel nodes in `mask` (the process's allowed nodes) with `os_node`
  // as the home node (set_mempolicy_home_node, Linux 5.17): pages fault in on os_node and, when
  // it is really out of memory, on the nearest node of the mask, so the kernel never OOM-kills
  // for a policy numap chose while an allowed node has room.
  int (*bind_home)(void* p, std::size_t bytes, int os_node, std::uint64_t mask);
  int (*prefer)(void* p, std::size_t bytes, int os_node);    // mbind(MPOL_PREFERRED): older kernels
  int (*current_cpu)();                                      // getcpu; -1 when unknown
  // Nodes the memory policy binds the process to (MPOL_BIND, also with MPOL_F_STATIC_NODES or
  // MPOL_F_NUMA_BALANCING), as a mask; 0 = not bound (MPOL_PREFERRED(_MANY) falls back) / unknown.
  std::uint64_t (*policy_nodes)();
  // Milliseconds of a monotonic clock (CLOCK_MONOTONIC_COARSE: a vDSO read, no system call);
  // tests inject a clock they move by hand to check decay by age.
  std::uint64_t (*now_ms)();
  // Calls line(ctx, text) for each line of the file at `path` (plain open/read into a stack
  // buffer: no allocation, callable inside malloc); lines longer than 255 bytes are cut. False
  // when the file cannot be opened.
  bool (*read_lines)(const char* path, void (*line)(void* ctx, const char* text), void* ctx);
  // membarrier(2) with `cmd` (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, then
  // MEMBARRIER_CMD_PRIVATE_EXPEDITED: every running thread of the process passes a full memory
  // barrier); -1 when the kernel, a sandbox or valgrind refuses it.
  int (*membarrier)(int cmd);
  // mincore(2): one byte per page of [p, p + bytes) into vec, bit 0 set where the page is resident.
  int (*resident)(void* p, std::size_t bytes, unsigned char* vec);
};

// What Os::bind achieved for a range.
enum class BindResult { kHome, kPreferred, kFailed };

// The system-call totals of counters.h (their meaning: include/numap.h).
struct OsCounters {
#define NUMAP_OS_COUNTER(name, counted_by, exit_line, alloc_stats) \
  NUMAP_COUNTED_BY(os, counted_by, std::atomic<std::uint64_t> name{0};)
  NUMAP_TOTALS(NUMAP_OS_COUNTER)
#undef NUMAP_OS_COUNTER
};

const OsOps& real_os();

// What every layer above calls: the ops in force plus counters.
class Os {
 public:
  explicit Os(const OsOps& ops = real_os()) : ops_(&ops) {}
  void set_ops(const OsOps& ops) { ops_ = &ops; }

  void* reserve(std::size_t bytes);
  bool unmap(void* p, std::size_t bytes);
  bool advise_free(void* p, std::size_t bytes);
  bool advise_huge(void* p, std::size_t bytes, bool huge);
  // False with errno set when refused (see OsOps::populate).
  bool populate(void* p, std::size_t bytes);
  bool move_pages(void* from, void* to, std::size_t bytes);
  bool replace(void* p, std::size_t bytes);
  // Bytes of [p, p + bytes) (page-aligned) resident now: pages written, or made resident by numap
  // (populated, moved in); 0 when the kernel does not say.
  std::uint64_t resident_bytes(void* p, std::size_t bytes);
  // The home-node bind, else the preferred policy, else nothing: counted, never fatal.
  BindResult bind(void* p, std::size_t bytes, int os_node, std::uint64_t allowed_os_mask);
  bool read_lines(const char* path, void (*line)(void* ctx, const char* text), void* ctx) const {
    return ops_->read_lines(path, line, ctx);
  }
  int current_cpu() const { return ops_->current_cpu(); }
  std::uint64_t policy_nodes() const { return ops_->policy_nodes(); }
  std::uint64_t now_ms() const { return ops_->now_ms(); }
  // Registers the process for expedited process-wide barriers; false when they are unavailable.
  bool register_barrier() const;
  // A full memory barrier in every running thread of the process (after register_barrier).
  bool barrier() const;
  // Sleeps up to `ms` unless *word != expected or wake(word) is called (futex: the background
  // decay thread sleeps here so that a heap being destroyed need not wait out its period).
  static void sleep_unless(const std::uint32_t* word, std::uint32_t expected, long ms);
  static void wake(const std::uint32_t* word);

  OsCounters counters;

 private:
  const OsOps* ops_;
};

constexpr std::size_t kPage = 4096;

// Allocation-free stderr output for messages from inside malloc; never raises SIGPIPE in the host
// and leaves errno as it was.
void write_stderr(const char* s);
void write_stderr(const char* s, std::size_t n);  // n bytes of s
void write_stderr_u64(std::uint64_t v);
[[noreturn]] void fatal(const char* message);

}  // namespace numap
