// numap on a real multi-node kernel (the lab's 8-node guest: configs/topologies/seed-8node.toml),
// with libnumap.so preloaded. Each scenario asserts from the KERNEL's view (move_pages for the node
// of every sampled page, sysfs for free memory, /proc for RSS), prints `PASS name: ...` or
// `FAIL name: ...` and exits 1 on a failure. Being OOM-killed shows as no PASS line.
//   overflow  with 96 MiB of node 1 and 48 MiB of node 3 taken outside numap, one thread on CPU 0
//             allocates past node 0's free memory: continues on distance-16 nodes, the freest
//             (by MemFree just before the call that first fell back; node 2 when nothing else
//             moved), never beyond
//   huge      one allocation larger than any node's free memory (from CPU 4) succeeds, split
//   membind   under set_mempolicy(MPOL_BIND, {0,1}) (as numactl --membind=0,1; re-executed so
//             numap starts under it), threads on CPUs 2-7 spread over nodes 0 and 1
//   metadata  with THP `always` (set for a re-executed child, then restored), a small program's
//             RSS stays small (numap's metadata is MADV_NOHUGEPAGE)
//   limit     NUMAP_DISTANCE_LIMIT=16 NUMAP_BEYOND_LIMIT=fail (re-executed): a thread on CPU 0
//             fills nodes 0-3 and then gets a clean ENOMEM, nothing placed at distance 32
//   bind      under set_mempolicy(MPOL_BIND, {0}) (as numactl --membind=0; re-executed, so numap
//             starts under it with NUMA placement off), a thread on CPU 0 allocates and touches
//             4 MiB blocks past node 0's free memory: malloc returns NULL with ENOMEM after most of
//             it, operator new throws std::bad_alloc, every page is on node 0, and once 32 MiB are
//             freed a 16 MiB block (another class: numap purges its free pages first) succeeds; the
//             program is not killed. Then, as a contrast (recorded on an INFO line, not asserted),
//             the same loop under glibc (re-executed without the preload, named glibc-contrast):
//             the kernel OOM-kills it
// Scenarios that need numap to start under another policy or option re-execute this program
// (numap reads both at its first allocation, before main).
//
// In the lab (allocmark lab --under, tests/numap_lab_test.py) it runs as a prefix of the guest's
// allocmark command:  numap_numa_probe --preload LIB S1 S2 ... --then COMMAND ARGS...
// runs each scenario in a child with LD_PRELOAD=LIB (its lines go to the guest console), then
// becomes COMMAND without the preload.
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "allocators/numap/include/numap.h"

namespace {

constexpr int kNodes = 8;
constexpr std::uint64_t kMiB = 1 << 20;
constexpr long kPage = 4096;

bool failed = false;

void report(bool ok, const char* name, const std::string& detail) {
  printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name, detail.c_str());
  fflush(stdout);
  failed |= !ok;
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    printf("FAIL pin: CPU %d: %s\n", cpu, strerror(errno));
    exit(1);
  }
}

// Allocation-free (open/read into the stack): the bind scenario reads it when malloc fails.
std::uint64_t node_free(int node) {
  char path[96];
  snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", node);
  char buf[8192];
  std::size_t got = 0;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n;
    while (got + 1 < sizeof buf && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0) got += static_cast<std::size_t>(n);
    close(fd);
  }
  buf[got] = '\0';
  const char* m = strstr(buf, "MemFree:");
  return m != nullptr ? strtoull(m + 8, nullptr, 10) * 1024 : 0;
}

// Adds the bytes of [p, p+n) per node, sampling one page in `stride` (the node of each page from
// move_pages in query mode).
// Allocation-free (batches on the stack): the limit scenario calls it when every allowed node is
// full, where a small malloc gets NULL and a std::vector would throw.
void count_nodes(const char* p, std::uint64_t n, std::uint64_t stride, std::uint64_t* per_node) {
  constexpr std::uint64_t kBatch = 256;
  void* pages[kBatch];
  int status[kBatch];
  for (std::uint64_t start = 0; start < n; start += kBatch * stride) {
    std::uint64_t count = 0;
    for (std::uint64_t off = start; off < n && count < kBatch; off += stride) pages[count++] = const_cast<char*>(p) + off;
    std::fill(status, status + count, -1);
    if (syscall(SYS_move_pages, 0, count, pages, nullptr, status, 0) != 0) {
      printf("FAIL move_pages: %s\n", strerror(errno));
      exit(1);
    }
    for (std::uint64_t i = 0; i < count; ++i)
      if (status[i] >= 0 && status[i] < kNodes) per_node[status[i]] += stride;
  }
}

std::string histogram(const std::uint64_t* per_node) {
  std::string s;
  for (int i = 0; i < kNodes; ++i) s += " n" + std::to_string(i) + "=" + std::to_string(per_node[i] / kMiB) + "M";
  return s;
}

struct numap_stats stats() {
  struct numap_stats s{};
  s.struct_size = sizeof s;
  auto* fn = reinterpret_cast<decltype(&numap_stats)>(dlsym(RTLD_DEFAULT, "numap_stats"));
  if (fn == nullptr) {
    printf("FAIL numap: not preloaded (no numap_stats)\n");
    exit(1);
  }
  fn(&s, nullptr, 0);
  return s;
}

std::uint64_t fallback_at(const struct numap_stats& s, std::uint32_t distance) {
  for (int i = 0; i < NUMAP_MAX_DISTANCES; ++i)
    if (s.fallback_distance[i] == distance) return s.fallback_count[i];
  return 0;
}

// Takes `bytes` of `node`'s memory outside numap (mmap, mbind to the node, touched), as another
// program would; numap learns of it only from the kernel's free memory.
void occupy(int node, std::uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned long mask = 1ul << node;
  if (p == MAP_FAILED || syscall(SYS_mbind, p, bytes, 2 /* MPOL_BIND */, &mask, 64, 0) != 0) {
    printf("FAIL occupy: node %d: %s\n", node, strerror(errno));
    exit(1);
  }
  memset(p, 5, bytes);
}

void overflow() {
  pin(0);
  // Nodes 1 and 3 lose memory to someone else after numap started: node 2 is then clearly the
  // freest at distance 16, and numap must see it from its periodic re-read of MemFree.
  occupy(1, 96 * kMiB);
  occupy(3, 48 * kMiB);
  std::uint64_t free_at_start[kNodes];
  for (int i = 0; i < kNodes; ++i) free_at_start[i] = node_free(i);
  const std::uint64_t target = free_at_start[0] + 192 * kMiB;
  std::uint64_t per_node[kNodes] = {};
  int first_fallback = -1;
  // The distance-16 nodes' free memory just before the call that first fell back: numap decides
  // on its own reading of it (at most NUMAP_FREE_REFRESH_MS old), and the kernel's own allocations
  // move the nodes' free memory between the start and that moment (a CI guest once had node 2
  // less free than node 3 at the start, despite the 48 MiB taken from node 3).
  std::uint64_t free_before[kNodes] = {}, free_at_fallback[kNodes] = {};
  std::vector<char*> keep;
  for (std::uint64_t done = 0; done < target; done += 4 * kMiB) {
    if (first_fallback < 0)
      for (int i = 1; i <= 3; ++i) free_before[i] = node_free(i);
    char* p = static_cast<char*>(malloc(4 * kMiB));
    if (p == nullptr) {
      report(false, "overflow", "malloc failed after " + std::to_string(done / kMiB) + " MiB");
      return;
    }
    memset(p, 1, 4 * kMiB);
    std::uint64_t here[kNodes] = {};
    count_nodes(p, 4 * kMiB, 64 * 1024, here);
    for (int i = 0; i < kNodes; ++i) {
      per_node[i] += here[i];
      if (i != 0 && here[i] != 0 && first_fallback < 0) {
        first_fallback = i;
        std::copy(std::begin(free_before), std::end(free_before), std::begin(free_at_fallback));
      }
    }
    keep.push_back(p);
  }
  const struct numap_stats s = stats();
  std::uint64_t far = 0;
  for (int i = 4; i < kNodes; ++i) far += per_node[i];
  int freest = 1;
  for (int i = 2; i <= 3; ++i)
    if (free_at_fallback[i] > free_at_fallback[freest]) freest = i;
  // "Freest" within what numap's refresh period lets MemFree drift: 8 MiB (two of these calls).
  const bool chose_freest = first_fallback >= 1 && first_fallback <= 3 &&
                            free_at_fallback[first_fallback] + 8 * kMiB >= free_at_fallback[freest];
  auto mib_list = [](const std::uint64_t* free) {
    return std::to_string(free[1] / kMiB) + "/" + std::to_string(free[2] / kMiB) + "/" + std::to_string(free[3] / kMiB) + "M";
  };
  const bool ok = per_node[0] >= free_at_start[0] / 2 && per_node[1] + per_node[2] + per_node[3] >= 128 * kMiB &&
                  far == 0 && chose_freest && fallback_at(s, 16) > 0 && fallback_at(s, 32) == 0;
  report(ok, "overflow",
         "node0 free at start " + std::to_string(free_at_start[0] / kMiB) + "M, allocated " +
             std::to_string(target / kMiB) + "M:" + histogram(per_node) + "; first fallback node " +
             std::to_string(first_fallback) + " (freest at distance 16: " + std::to_string(freest) +
             "; nodes 1/2/3 free at start " + mib_list(free_at_start) + ", at the fallback " + mib_list(free_at_fallback) +
             "); numap fallbacks d16=" + std::to_string(fallback_at(s, 16)) + " d32=" + std::to_string(fallback_at(s, 32)));
  for (char* p : keep) free(p);
}

void huge() {
  pin(4);
  std::uint64_t most = 0;
  for (int i = 0; i < kNodes; ++i) most = node_free(i) > most ? node_free(i) : most;
  const std::uint64_t n = most + 128 * kMiB;
  char* p = static_cast<char*>(malloc(n));
  if (p == nullptr) {
    report(false, "huge", "malloc(" + std::to_string(n / kMiB) + " MiB) failed: " + strerror(errno));
    return;
  }
  memset(p, 2, n);
  std::uint64_t per_node[kNodes] = {};
  count_nodes(p, n, 64 * 1024, per_node);
  const struct numap_stats s = stats();
  std::uint64_t near = per_node[4] + per_node[5] + per_node[6] + per_node[7];
  const bool ok = s.split_allocs == 1 && per_node[4] > 0 && near == (n + 64 * 1024 - 1) / (64 * 1024) * (64 * 1024);
  report(ok, "huge",
         "malloc(" + std::to_string(n / kMiB) + "M), largest node free " + std::to_string(most / kMiB) + "M:" +
             histogram(per_node) + "; split_allocs=" + std::to_string(s.split_allocs));
  free(p);
}

void membind_child() {
  constexpr int kThreads = 6;
  constexpr std::uint64_t kEach = 40 * kMiB;
  std::uint64_t per_thread[kThreads][kNodes] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &per_thread] {
      pin(2 + t);
      for (std::uint64_t done = 0; done < kEach; done += kMiB) {
        char* p = static_cast<char*>(malloc(kMiB));
        if (p == nullptr) return;
        memset(p, 3, kMiB);
        count_nodes(p, kMiB, 64 * 1024, per_thread[t]);
      }
    });
  for (auto& th : threads) th.join();
  std::uint64_t per_node[kNodes] = {};
  for (auto& row : per_thread)
    for (int i = 0; i < kNodes; ++i) per_node[i] += row[i];
  std::uint64_t outside = 0;
  for (int i = 2; i < kNodes; ++i) outside += per_node[i];
  const std::uint64_t total = per_node[0] + per_node[1];
  const struct numap_stats s = stats();
  const bool ok = outside == 0 && total == kThreads * kEach && per_node[0] >= total / 4 && per_node[1] >= total / 4 &&
                  s.numa_enabled == 1;
  report(ok, "membind", "6 threads on CPUs 2-7 x 40M under MPOL_BIND {0,1}:" + histogram(per_node));
}

// Runs this program's `scenario` in a child (which inherits the memory policy and environment);
// its PASS/FAIL lines are its own. A child killed by a signal (the OOM killer) is a FAIL here.
void run_child(const char* name, const char* scenario) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "numap_numa_probe", scenario, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) report(false, name, "killed by signal " + std::to_string(WTERMSIG(status)));
  else if (WEXITSTATUS(status) != 0) failed = true;
}

void membind() {
  unsigned long mask = 0b11;
  if (syscall(SYS_set_mempolicy, 2 /* MPOL_BIND */, &mask, 64, nullptr, 0) != 0) {
    report(false, "membind", std::string("set_mempolicy: ") + strerror(errno));
    return;
  }
  run_child("membind", "membind-child");
}

void limit_child() {
  pin(0);
  std::uint64_t per_node[kNodes] = {};
  // Room for every block before the nodes fill: once they are full, a small allocation (a vector
  // growing, the report's strings) gets NULL too, and operator new's bad_alloc would abort the
  // probe (a CI run once died of SIGABRT here).
  std::vector<char*> keep;
  keep.reserve(4096 / 4);
  int err = 0;
  for (std::uint64_t done = 0; done < 4096 * kMiB; done += 4 * kMiB) {
    char* p = static_cast<char*>(malloc(4 * kMiB));
    if (p == nullptr) {
      err = errno;
      break;
    }
    memset(p, 4, 4 * kMiB);
    count_nodes(p, 4 * kMiB, 64 * 1024, per_node);
    keep.push_back(p);
  }
  const struct numap_stats s = stats();
  std::uint64_t near = 0, far = 0;
  for (int i = 0; i < kNodes; ++i) (i < 4 ? near : far) += per_node[i];
  const bool ok = err == ENOMEM && far == 0 && near >= 1024 * kMiB && fallback_at(s, 32) == 0;
  for (char* p : keep) free(p);  // before the report allocates
  report(ok, "limit", std::string("DISTANCE_LIMIT=16, BEYOND_LIMIT=fail from CPU 0: ") +
                          (err == ENOMEM ? "ENOMEM" : "no ENOMEM") + " after " + std::to_string(near / kMiB) +
                          "M:" + histogram(per_node));
}

void limit() {
  setenv("NUMAP_DISTANCE_LIMIT", "16", 1);
  setenv("NUMAP_BEYOND_LIMIT", "fail", 1);
  run_child("limit", "limit-child");
}

// bind: numap's side (the preloaded child under MPOL_BIND {0}).
void bind_child() {
  pin(0);
  const std::uint64_t advised_at_start = stats().advised_bytes, moved_at_start = stats().moved_bytes;
  const std::uint64_t free0 = node_free(0);
  const std::uint64_t most = free0 + 256 * kMiB;
  std::uint64_t per_node[kNodes] = {};
  // Room for every block before the node fills: after ENOMEM a small allocation may fail too.
  std::vector<char*> keep;
  keep.reserve(most / (4 * kMiB) + 1);
  int err = 0;
  for (std::uint64_t done = 0; done < most; done += 4 * kMiB) {
    char* p = static_cast<char*>(malloc(4 * kMiB));
    if (p == nullptr) {
      err = errno;
      break;
    }
    memset(p, 6, 4 * kMiB);
    count_nodes(p, 4 * kMiB, 64 * 1024, per_node);
    keep.push_back(p);
  }
  const std::uint64_t free_at_enomem = node_free(0);
  bool threw = false;
  if (err == ENOMEM) {
    try {
      char* q = new char[4 * kMiB];
      asm volatile("" : : "r"(q) : "memory");  // not elided
      delete[] q;
    } catch (const std::bad_alloc&) {
      threw = true;
    }
  }
  // The program reacts (a cache shrinks): 32 MiB freed, and a 16 MiB block, a class none of them
  // can serve, gets their pages: moved into it (mremap), or advised away and charged again.
  for (int i = 0; i < 8 && !keep.empty(); ++i) {
    free(keep.back());
    keep.pop_back();
  }
  char* again = static_cast<char*>(malloc(16 * kMiB));
  if (again != nullptr) memset(again, 7, 16 * kMiB);
  const struct numap_stats s = stats();
  std::uint64_t allocated = 0, elsewhere = 0;
  for (int i = 0; i < kNodes; ++i) (i == 0 ? allocated : elsewhere) += per_node[i];
  const std::uint64_t advised = s.advised_bytes - advised_at_start, moved = s.moved_bytes - moved_at_start;
  const bool ok = err == ENOMEM && threw && elsewhere == 0 && allocated >= free0 / 4 * 3 && again != nullptr &&
                  advised + moved >= 16 * kMiB && s.numa_enabled == 0 && s.node[0].capacity_bytes != 0;
  free(again);
  for (char* p : keep) free(p);  // before the report allocates
  report(ok, "bind", std::string("MPOL_BIND {0} from CPU 0, node0 free at start ") + std::to_string(free0 / kMiB) +
                         "M: " + (err == ENOMEM ? "ENOMEM" : err != 0 ? strerror(err) : "no failure") + " after " +
                         std::to_string(allocated / kMiB) + "M (node0 free then " + std::to_string(free_at_enomem / kMiB) +
                         "M, numap capacity " + std::to_string(s.node[0].capacity_bytes / kMiB) + "M):" + histogram(per_node) +
                         "; operator new " + (threw ? "threw bad_alloc" : "did not throw") + "; 16M after freeing 32M " +
                         (again != nullptr ? "ok" : "failed") + " (advised " + std::to_string(advised / kMiB) +
                         "M, moved " + std::to_string(moved / kMiB) + "M); numa_enabled=" + std::to_string(s.numa_enabled));
}

// bind's contrast: the same loop under glibc; to `fd` it writes node 0's free MiB at its start, then
// its progress (MiB touched) as it goes.
void bind_glibc(int fd) {
  prctl(PR_SET_NAME, "glibc-contrast");
  pin(0);
  const std::uint64_t free0 = node_free(0);
  const std::uint64_t most = free0 + 256 * kMiB;
  const std::uint64_t free_mib = free0 / kMiB;
  if (write(fd, &free_mib, sizeof free_mib) != sizeof free_mib) _exit(1);
  std::uint64_t done = 0;
  for (; done < most; done += 4 * kMiB) {
    char* p = static_cast<char*>(malloc(4 * kMiB));
    if (p == nullptr) break;
    memset(p, 6, 4 * kMiB);
    const std::uint64_t mib = (done + 4 * kMiB) / kMiB;
    if (write(fd, &mib, sizeof mib) != sizeof mib) break;
  }
  _exit(done >= most ? 0 : 1);
}

void bind() {
  unsigned long mask = 1;
  if (syscall(SYS_set_mempolicy, 2 /* MPOL_BIND */, &mask, 64, nullptr, 0) != 0) {
    report(false, "bind", std::string("set_mempolicy: ") + strerror(errno));
    return;
  }
  run_child("bind", "bind-child");
  int fds[2];
  if (pipe(fds) != 0) return;
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    unsetenv("LD_PRELOAD");
    char fd[16];
    snprintf(fd, sizeof fd, "%d", fds[1]);
    execl("/proc/self/exe", "numap_numa_probe", "bind-glibc", fd, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::uint64_t mib = 0, free0 = 0, last = 0;
  if (read(fds[0], &free0, sizeof free0) != sizeof free0) free0 = 0;
  while (read(fds[0], &mib, sizeof mib) == sizeof mib) last = mib;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                              : "exit " + std::to_string(WEXITSTATUS(status));
  printf("INFO bind: glibc under the same MPOL_BIND {0} (the contrast, not asserted), node0 free at start %lluM: %s "
         "after %lluM touched\n",
         static_cast<unsigned long long>(free0), how.c_str(), static_cast<unsigned long long>(last));
  fflush(stdout);
}

std::uint64_t status_kib(const char* file, const char* key) {
  FILE* f = fopen(file, "r");
  char line[256];
  std::uint64_t v = 0;
  while (f != nullptr && fgets(line, sizeof line, f) != nullptr)
    if (strncmp(line, key, strlen(key)) == 0) v += strtoull(line + strlen(key), nullptr, 10);
  if (f != nullptr) fclose(f);
  return v;
}

constexpr const char* kThpMode = "/sys/kernel/mm/transparent_hugepage/enabled";

bool write_text(const char* path, const std::string& text) {
  FILE* f = fopen(path, "w");
  if (f == nullptr) return false;
  const bool ok = fputs(text.c_str(), f) >= 0;
  return fclose(f) == 0 && ok;
}

void metadata() {
  // The mode in force, e.g. "always [madvise] never".
  char mode[128] = {};
  FILE* f = fopen(kThpMode, "r");
  if (f == nullptr || fgets(mode, sizeof mode, f) == nullptr) {
    report(false, "metadata", std::string("cannot read ") + kThpMode);
    if (f != nullptr) fclose(f);
    return;
  }
  fclose(f);
  const char* open = strchr(mode, '[');
  const char* close = open != nullptr ? strchr(open, ']') : nullptr;
  const std::string before = open != nullptr && close != nullptr ? std::string(open + 1, close) : "madvise";
  if (!write_text(kThpMode, "always")) {
    report(false, "metadata", std::string("cannot set THP always in ") + kThpMode + " (needs root)");
    return;
  }
  run_child("metadata", "metadata-child");
  write_text(kThpMode, before);
}

void metadata_child() {
  pin(0);
  std::vector<void*> keep;
  for (int i = 0; i < 1000; ++i) keep.push_back(malloc(100 + i % 900));
  for (int i = 0; i < 8; ++i) keep.push_back(malloc(200 * 1024));
  for (int c = 1; c < kNodes; ++c) {  // touch metadata of every node
    std::thread([c] {
      pin(c);
      void* p = malloc(64 * 1024);
      memset(p, 1, 64 * 1024);
      free(p);
    }).join();
  }
  const std::uint64_t rss = status_kib("/proc/self/status", "VmRSS:");
  const std::uint64_t huge_kib = status_kib("/proc/self/smaps_rollup", "AnonHugePages:");
  const bool ok = rss < 32 * 1024;
  report(ok, "metadata", "THP " + std::string("always") + ": VmRSS " + std::to_string(rss) + " KiB, AnonHugePages " +
                             std::to_string(huge_kib) + " KiB (numap metadata bound ~2.5 MiB + 0.3% of charged)");
  for (void* p : keep) free(p);
}

}  // namespace

// The lab's prefix mode: scenarios in preloaded children, then the command itself.
int run_then(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: numap_numa_probe --preload LIB SCENARIO... --then COMMAND ARGS...\n");
    return 2;
  }
  const char* lib = argv[2];
  int i = 3;
  for (; i < argc && strcmp(argv[i], "--then") != 0; ++i) {
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("LD_PRELOAD", lib, 1);
      execl("/proc/self/exe", "numap_numa_probe", argv[i], static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) printf("FAIL %s: killed by signal %d\n", argv[i], WTERMSIG(status));
    else if (WEXITSTATUS(status) != 0) printf("FAIL %s: exit %d\n", argv[i], WEXITSTATUS(status));
  }
  printf("numap_numa_probe: scenarios done\n");
  fflush(stdout);
  if (i + 1 >= argc) return 0;
  execv(argv[i + 1], argv + i + 1);
  fprintf(stderr, "numap_numa_probe: exec %s: %s\n", argv[i + 1], strerror(errno));
  return 127;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "--preload") == 0) return run_then(argc, argv);
  if (argc < 2) {
    fprintf(stderr, "usage: numap_numa_probe overflow|huge|membind|metadata|limit|bind\n");
    return 2;
  }
  const std::string what = argv[1];
  if (what == "overflow") overflow();
  else if (what == "huge") huge();
  else if (what == "membind") membind();
  else if (what == "membind-child") membind_child();
  else if (what == "metadata") metadata();
  else if (what == "metadata-child") metadata_child();
  else if (what == "limit") limit();
  else if (what == "limit-child") limit_child();
  else if (what == "bind") bind();
  else if (what == "bind-child") bind_child();
  else if (what == "bind-glibc" && argc >= 3) bind_glibc(atoi(argv[2]));
  else {
    fprintf(stderr, "numap_numa_probe: unknown scenario '%s'\n", what.c_str());
    return 2;
  }
  return failed ? 1 : 0;
}
