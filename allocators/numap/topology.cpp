#include "allocators/numap/topology.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

namespace numap {
namespace {

// Reads a small file into buf (NUL-terminated); false if it cannot.
bool read_file(const char* path, char* buf, std::size_t size) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::size_t got = 0;
  while (got + 1 < size) {
    ssize_t n = ::read(fd, buf + got, size - 1 - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  buf[got] = '\0';
  return got > 0;
}

// path = a + b + c, bounded.
void join(char* out, std::size_t size, const char* a, const char* b, const char* c = "", const char* d = "") {
  out[0] = '\0';
  const char* parts[] = {a, b, c, d};
  for (const char* part : parts) {
    std::size_t len = strlen(out);
    strncat(out, part, size - 1 - len);
  }
}

void utoa(int v, char* out) {
  char tmp[16];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  for (int i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  out[n] = '\0';
}

const char* skip_space(const char* p) {
  while (*p == ' ' || *p == '\t' || *p == '\n') ++p;
  return p;
}

const char* read_uint(const char* p, std::uint64_t* v) {
  *v = 0;
  if (*p < '0' || *p > '9') return nullptr;
  while (*p >= '0' && *p <= '9') *v = *v * 10 + static_cast<std::uint64_t>(*p++ - '0');
  return p;
}

// Mems_allowed of /proc/self/status (0: unknown). Out of line so that its read buffer is off the
// stack before topology_from_sysfs's (a first malloc's stack depth is start-up footprint).
__attribute__((noinline)) std::uint64_t mems_allowed() {
  std::uint64_t allowed_os = 0;
  char buf[4096];
  if (read_file("/proc/self/status", buf, sizeof buf)) {
    const char* m = strstr(buf, "Mems_allowed_list:");
    if (m != nullptr) {
      char list[256];
      const char* s = skip_space(m + 18);
      std::size_t n = 0;
      while (s[n] != '\n' && s[n] != '\0' && n + 1 < sizeof list) {
        list[n] = s[n];
        ++n;
      }
      list[n] = '\0';
      parse_cpulist(list, &allowed_os, 1);
    }
  }
  return allowed_os;
}
}  // namespace

void node_path(char* out, std::size_t size, const char* root, int os_node, const char* file) {
  char num[16];
  utoa(os_node, num);
  join(out, size, root, "/devices/system/node/node", num, "/");
  strncat(out, file, size - 1 - strlen(out));
}

bool parse_cpulist(const char* text, std::uint64_t* mask, std::size_t words) {
  for (std::size_t i = 0; i < words; ++i) mask[i] = 0;
  const char* p = skip_space(text);
  if (*p == '\0') return true;  // empty list: a node without CPUs
  for (;;) {
    std::uint64_t lo = 0, hi = 0;
    p = read_uint(p, &lo);
    if (p == nullptr) return false;
    hi = lo;
    if (*p == '-') {
      p = read_uint(p + 1, &hi);
      if (p == nullptr || hi < lo) return false;
    }
    for (std::uint64_t c = lo; c <= hi && c < words * 64; ++c) mask[c / 64] |= 1ull << (c % 64);
    if (*p == ',') {
      ++p;
      continue;
    }
    p = skip_space(p);
    return *p == '\0';
  }
}

void topology_single(Topology* t, std::uint64_t capacity) {
  *t = Topology{};
  t->count = 1;
  t->os_node[0] = 0;
  t->distance[0][0] = 10;
  t->capacity[0] = capacity;
  t->allowed = 1;
  for (int c = 0; c < kMaxCpus; ++c) t->cpu_node[c] = 0;
}

bool topology_from_sysfs(Topology* t, const char* root, std::uint64_t allowed_os, const std::uint64_t* cpus_allowed,
                         std::size_t cpu_words) {
  // Built in place (no copy: the start-up footprint, issue 24's target 3); on failure the caller
  // falls back to one node.
  *t = Topology{};
  t->allowed = 0;
  char path[512];
  char buf[4096];
  join(path, sizeof path, root, "/devices/system/node/online");
  std::uint64_t online = 0;
  if (!read_file(path, buf, sizeof buf) || !parse_cpulist(buf, &online, 1) || online == 0) return false;
  int count = 0;
  for (int os = 0; os < kMaxNodes; ++os)
    if (online & (1ull << os)) t->os_node[count++] = os;
  t->count = count;
  for (int c = 0; c < kMaxCpus; ++c) t->cpu_node[c] = -1;
  std::uint64_t node_cpus_seen = 0;
  for (int i = 0; i < count; ++i) {
    // distance: one number per online node, in node order.
    node_path(path, sizeof path, root, t->os_node[i], "distance");
    if (!read_file(path, buf, sizeof buf)) return false;
    const char* p = buf;
    for (int j = 0; j < count; ++j) {
      std::uint64_t d = 0;
      p = read_uint(skip_space(p), &d);
      if (p == nullptr || d > 255) return false;
      t->distance[i][j] = static_cast<std::uint8_t>(d);
    }
    node_path(path, sizeof path, root, t->os_node[i], "cpulist");
    std::uint64_t cpus[kMaxCpus / 64];
    if (read_file(path, buf, sizeof buf) && parse_cpulist(buf, cpus, kMaxCpus / 64)) {
      for (int c = 0; c < kMaxCpus; ++c)
        if (cpus[c / 64] & (1ull << (c % 64))) {
          t->cpu_node[c] = static_cast<std::int16_t>(i);
          if (cpus_allowed == nullptr || (static_cast<std::size_t>(c / 64) < cpu_words &&
                                          (cpus_allowed[c / 64] & (1ull << (c % 64)))))
            node_cpus_seen |= 1ull << i;
        }
    }
    node_path(path, sizeof path, root, t->os_node[i], "meminfo");
    if (read_file(path, buf, sizeof buf)) {
      const char* m = strstr(buf, "MemTotal:");
      std::uint64_t kb = 0;
      if (m != nullptr && read_uint(skip_space(m + 9), &kb) != nullptr) t->capacity[i] = kb * 1024;
    }
    if (allowed_os == 0 || (allowed_os & (1ull << t->os_node[i]))) t->allowed |= 1ull << i;
  }
  if (t->allowed == 0) return false;
  // Bound: every CPU the process may run on belongs to one node.
  t->bound = __builtin_popcountll(node_cpus_seen) == 1 && count > 1;
  return true;
}

void topology_detect(Topology* t, const char* root, std::uint64_t policy_mask, std::uint64_t mem_total_fallback) {
  std::uint64_t allowed_os = mems_allowed();
  if (policy_mask != 0) allowed_os = allowed_os ? (allowed_os & policy_mask) : policy_mask;
  cpu_set_t set;
  std::uint64_t cpus[kMaxCpus / 64] = {};
  const std::uint64_t* cpus_allowed = nullptr;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < kMaxCpus && c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus[c / 64] |= 1ull << (c % 64);
    cpus_allowed = cpus;
  }
  if (!topology_from_sysfs(t, root, allowed_os, cpus_allowed, kMaxCpus / 64)) {
    topology_single(t, mem_total_fallback);
    return;
  }
  if (policy_mask != 0 && __builtin_popcountll(policy_mask) == 1) t->bound = true;
}

void ZoneinfoReader::line(void* self, const char* text) {
  auto* r = static_cast<ZoneinfoReader*>(self);
  std::uint64_t v = 0;
  if (strncmp(text, "Node ", 5) == 0) {
    // "Node 0, zone   Normal": the zone whose watermarks follow.
    const char* p = read_uint(text + 5, &v);
    r->node = p != nullptr && *p == ',' && v < kMaxNodes ? static_cast<int>(v) : -1;
    return;
  }
  const char* p = skip_space(text);
  // "        high     1234" (pages). The per-CPU pagesets' "high:  378" has a colon: not a watermark.
  if (r->node < 0 || strncmp(p, "high", 4) != 0 || (p[4] != ' ' && p[4] != '\t')) return;
  if (read_uint(skip_space(p + 4), &v) != nullptr) r->high_pages[r->node] += v;
}

bool meminfo_free_kb(const char* line, std::uint64_t* kb) {
  const char* m = strstr(line, "MemFree:");
  return m != nullptr && read_uint(skip_space(m + 8), kb) != nullptr;
}

bool numa_enabled(const Topology& t, int option) {
  if (option == 0) return false;
  if (option == 1) return true;
  return t.allowed_count() > 1 && !t.bound;
}

int fallback_order(const Topology& t, int from, const std::uint64_t* free_bytes, int distance_limit, int* out) {
  int n = 0;
  out[n++] = from;
  int cand[kMaxNodes];
  int m = 0;
  for (int i = 0; i < t.count; ++i) {
    if (i == from || !(t.allowed & (1ull << i))) continue;
    if (distance_limit > 0 && t.distance[from][i] > distance_limit) continue;
    cand[m++] = i;
  }
  // Insertion sort: few nodes, and stable by index for equal keys.
  for (int a = 1; a < m; ++a) {
    int x = cand[a];
    int b = a - 1;
    auto before = [&](int u, int v) {  // u strictly before v
      if (t.distance[from][u] != t.distance[from][v]) return t.distance[from][u] < t.distance[from][v];
      if (free_bytes != nullptr && free_bytes[u] != free_bytes[v]) return free_bytes[u] > free_bytes[v];
      return u < v;
    };
    while (b >= 0 && before(x, cand[b])) {
      cand[b + 1] = cand[b];
      --b;
    }
    cand[b + 1] = x;
  }
  for (int i = 0; i < m; ++i) out[n++] = cand[i];
  return n;
}

}  // namespace numap
