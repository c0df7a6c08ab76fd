#include "harness/metrics/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "harness/os/files.h"

namespace allocmark::metrics {
namespace {

// The OS layer's readers (harness/os/files.h): raw, no allocation, so phase edges may call them.
using os::proc_path;
using os::read_file;

const long kPageSize = ::sysconf(_SC_PAGESIZE);

}  // namespace

namespace {
// The number after "KEY" + `separator` at the start of a line of `text`.
bool parse_keyed_number(const char* text, const char* key, char separator, uint64_t& value) {
  const std::size_t key_len = std::strlen(key);
  for (const char* line = text; line && *line; line = std::strchr(line, '\n') ? std::strchr(line, '\n') + 1 : nullptr) {
    if (std::strncmp(line, key, key_len) == 0 && line[key_len] == separator) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(line + key_len + 1, &end, 10);
      if (end == line + key_len + 1) return false;
      value = v;
      return true;
    }
  }
  return false;
}
}  // namespace

bool parse_status_kib(const char* text, const char* key, uint64_t& kib) { return parse_keyed_number(text, key, ':', kib); }

bool parse_statm_resident_pages(const char* text, uint64_t& pages) {
  char* end = nullptr;
  std::strtoull(text, &end, 10);  // size
  if (end == text) return false;
  const char* second = end;
  unsigned long long resident = std::strtoull(second, &end, 10);
  if (end == second) return false;
  pages = resident;
  return true;
}

uint64_t NodeResidency::total() const {
  uint64_t sum = 0;
  for (int n = 0; n <= highest_node; ++n) sum += bytes[n];
  return sum;
}

std::vector<uint64_t> residency_list(const NodeResidency& r) {
  return std::vector<uint64_t>(r.bytes, r.bytes + (r.highest_node + 1));
}

void add_numa_maps_line(const char* line, std::size_t length, NodeResidency& out) {
  // Tokens are separated by single spaces (file names escape theirs as \040); the page size comes
  // after the node counts, so the counts are held until the line is read.
  uint64_t pages[kMaxNumaNodes] = {};
  int highest = -1;
  uint64_t page_kib = 4;
  const char* end = line + length;
  for (const char* tok = line; tok < end;) {
    const char* stop = static_cast<const char*>(std::memchr(tok, ' ', static_cast<std::size_t>(end - tok)));
    if (!stop) stop = end;
    if (tok[0] == 'N' && stop - tok > 2 && tok[1] >= '0' && tok[1] <= '9') {
      char* eq = nullptr;
      unsigned long node = std::strtoul(tok + 1, &eq, 10);
      if (eq < stop && *eq == '=' && node < kMaxNumaNodes) {
        pages[node] += std::strtoull(eq + 1, nullptr, 10);
        highest = std::max(highest, static_cast<int>(node));
      }
    } else if (static_cast<std::size_t>(stop - tok) > 17 && std::strncmp(tok, "kernelpagesize_kB=", 18) == 0) {
      page_kib = std::strtoull(tok + 18, nullptr, 10);
    }
    tok = stop + 1;
  }
  for (int n = 0; n <= highest; ++n) out.bytes[n] += pages[n] * page_kib * 1024;
  out.highest_node = std::max(out.highest_node, highest);
  out.mappings++;
}

bool read_numa_maps(pid_t pid, NodeResidency& out) {
  char path[64];
  proc_path(path, sizeof path, pid, "numa_maps");
  char buf[65536];  // a longer line cannot be a real mapping line: read_lines skips it
  return os::read_lines(path, buf, sizeof buf, [](void* ctx, const char* text, std::size_t length) {
    add_numa_maps_line(text, length, *static_cast<NodeResidency*>(ctx));
  }, &out);
}

bool read_mem_and_nodes(pid_t pid, MemAndNodes& out) {
  MemStatus before{};
  for (int attempt = 0; attempt < kSteadyTries; ++attempt) {
    if (!read_mem_status(pid, before)) return false;
    out.nodes = NodeResidency{};
    out.nodes_ok = read_numa_maps(pid, out.nodes);
    if (!read_mem_status(pid, out.mem)) return false;
    const uint64_t drift = before.rss_bytes > out.mem.rss_bytes ? before.rss_bytes - out.mem.rss_bytes
                                                                : out.mem.rss_bytes - before.rss_bytes;
    out.steady = drift <= std::max<uint64_t>(out.mem.rss_bytes / 64, 64 << 10);
    if (out.steady) break;
  }
  return true;
}

bool parse_node_meminfo_kib(const char* text, int node, const char* key, uint64_t& kib) {
  const std::size_t key_len = std::strlen(key);
  for (const char* line = text; line && *line; line = std::strchr(line, '\n') ? std::strchr(line, '\n') + 1 : nullptr) {
    if (std::strncmp(line, "Node ", 5) != 0) continue;
    char* end = nullptr;
    const unsigned long n = std::strtoul(line + 5, &end, 10);
    if (end == line + 5 || *end != ' ' || n != static_cast<unsigned long>(node)) continue;
    while (*end == ' ') ++end;
    if (std::strncmp(end, key, key_len) != 0 || end[key_len] != ':') continue;
    const char* number = end + key_len + 1;
    unsigned long long v = std::strtoull(number, &end, 10);
    if (end == number) return false;
    kib = v;
    return true;
  }
  return false;
}

bool read_system_node_huge(const int* ids, std::size_t count, SystemNodeHuge& out) {
  bool all = true;
  for (std::size_t i = 0; i < count; ++i) {
    const int id = ids[i];
    if (id < 0 || id >= kMaxNumaNodes) {
      all = false;
      continue;
    }
    out.bytes[id].reset();
    char path[64];
    char buf[8192];  // a node's meminfo is about 1.3 KiB on Debian 12's kernels
    std::snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", id);
    uint64_t kib = 0;
    if (read_file(path, buf, sizeof buf) > 0 && parse_node_meminfo_kib(buf, id, "AnonHugePages", kib))
      out.bytes[id] = kib * 1024;
    else
      all = false;
  }
  return all;
}

bool read_mem_status(pid_t pid, MemStatus& out) {
  char path[64];
  char buf[4096];
  proc_path(path, sizeof path, pid, "status");
  if (read_file(path, buf, sizeof buf) <= 0) return false;
  uint64_t rss_kib = 0, hwm_kib = 0;
  if (!parse_status_kib(buf, "VmRSS", rss_kib) || !parse_status_kib(buf, "VmHWM", hwm_kib)) return false;
  out.rss_bytes = rss_kib * 1024;
  out.hwm_bytes = hwm_kib * 1024;
  return true;
}

bool read_anon_huge_bytes(pid_t pid, uint64_t& bytes) {
  char path[64];
  char buf[4096];
  proc_path(path, sizeof path, pid, "smaps_rollup");
  if (read_file(path, buf, sizeof buf) <= 0) return false;
  uint64_t kib = 0;
  if (!parse_status_kib(buf, "AnonHugePages", kib)) return false;
  bytes = kib * 1024;
  return true;
}

bool parse_vmstat_value(const char* text, const char* key, uint64_t& value) { return parse_keyed_number(text, key, ' ', value); }

std::string bracketed_choice(const std::string& text) {
  auto open = text.find('['), close = text.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return text;
  return text.substr(open + 1, close - open - 1);
}

namespace {
std::string sysfs_choice(const char* path) {
  char buf[256];
  const ssize_t n = read_file(path, buf, sizeof buf);
  std::string text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "" : bracketed_choice(text);
}
}  // namespace

std::string thp_enabled_mode() { return sysfs_choice("/sys/kernel/mm/transparent_hugepage/enabled"); }
std::string thp_defrag_mode() { return sysfs_choice("/sys/kernel/mm/transparent_hugepage/defrag"); }

bool read_thp_events(ThpEvents& out) {
  char buf[16384];  // /proc/vmstat is about 6 KiB on Debian 12's kernels
  if (read_file("/proc/vmstat", buf, sizeof buf) <= 0) return false;
#define ALLOCMARK_READ_THP(name) parse_vmstat_value(buf, "thp_" #name, out.name) &&
  return ALLOCMARK_THP_EVENTS(ALLOCMARK_READ_THP) true;
#undef ALLOCMARK_READ_THP
}

ThpEvents thp_events_since(const ThpEvents& now, const ThpEvents& before) {
  ThpEvents d;
#define ALLOCMARK_THP_SINCE(name) d.name = now.name >= before.name ? now.name - before.name : 0;
  ALLOCMARK_THP_EVENTS(ALLOCMARK_THP_SINCE)
#undef ALLOCMARK_THP_SINCE
  return d;
}

bool reset_peak_rss(pid_t pid) {
  char path[64];
  proc_path(path, sizeof path, pid, "clear_refs");
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

bool parse_stat_counters(const char* text, TaskCounters& out) {
  // The command name may hold spaces and parentheses: fields are counted after the last ')'.
  const char* p = std::strrchr(text, ')');
  if (!p) return false;
  ++p;
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  unsigned long long v[13] = {};
  // Fields 3..15 of proc(5): state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt, cminflt,
  // majflt, cmajflt, utime, stime; the state is a letter, the rest numbers.
  while (*p == ' ') ++p;
  if (!*p) return false;
  ++p;
  for (int i = 1; i < 13; ++i) {
    char* end = nullptr;
    v[i] = std::strtoull(p, &end, 10);
    if (end == p) return false;
    p = end;
  }
  out.minor_faults = v[7];
  out.major_faults = v[9];
  out.user_s = static_cast<double>(v[11]) / ticks;
  out.sys_s = static_cast<double>(v[12]) / ticks;
  return true;
}

bool read_task_counters(pid_t pid, TaskCounters& out) {
  char path[64];
  char buf[4096];
  proc_path(path, sizeof path, pid, "stat");
  if (read_file(path, buf, sizeof buf) <= 0 || !parse_stat_counters(buf, out)) return false;
  proc_path(path, sizeof path, pid, "status");
  if (read_file(path, buf, sizeof buf) <= 0) return false;
  uint64_t vol = 0, invol = 0;
  if (!parse_status_kib(buf, "voluntary_ctxt_switches", vol) || !parse_status_kib(buf, "nonvoluntary_ctxt_switches", invol))
    return false;
  out.voluntary_ctx_switches = vol;
  out.involuntary_ctx_switches = invol;
  return true;
}

bool read_statm_rss(pid_t pid, uint64_t& rss_bytes) {
  char path[64];
  char buf[256];
  proc_path(path, sizeof path, pid, "statm");
  if (read_file(path, buf, sizeof buf) <= 0) return false;
  uint64_t pages = 0;
  if (!parse_statm_resident_pages(buf, pages)) return false;
  rss_bytes = pages * static_cast<uint64_t>(kPageSize);
  return true;
}

bool parse_schedstat(const char* text, uint64_t& run_ns, uint64_t& wait_ns) {
  char* end = nullptr;
  unsigned long long run = std::strtoull(text, &end, 10);
  if (end == text) return false;
  const char* second = end;
  unsigned long long wait = std::strtoull(second, &end, 10);
  if (end == second) return false;
  run_ns = run;
  wait_ns = wait;
  return true;
}

SchedSnapshot::SchedSnapshot(std::size_t max_threads) : capacity_(max_threads) { tasks_.reserve(max_threads); }

bool SchedSnapshot::read(pid_t pid) {
  tasks_.clear();
  truncated_ = false;
  char path[64];
  proc_path(path, sizeof path, pid, "task");
  int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char entries[8192];
  for (;;) {
    ssize_t n = ::getdents64(dir, entries, sizeof entries);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(entries + off);
      off += e->d_reclen;
      char* end = nullptr;
      long tid = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0') continue;  // "." and ".."
      if (tasks_.size() == capacity_) {
        truncated_ = true;
        continue;
      }
      char file[96], buf[128];
      std::snprintf(file, sizeof file, "%s/%ld/schedstat", path, tid);
      Task t{static_cast<pid_t>(tid), 0, 0};
      // A thread that ended between the listing and this read has nothing more to say.
      if (read_file(file, buf, sizeof buf) > 0 && parse_schedstat(buf, t.run_ns, t.wait_ns)) tasks_.push_back(t);
    }
  }
  ::close(dir);
  std::sort(tasks_.begin(), tasks_.end(), [](const Task& a, const Task& b) { return a.tid < b.tid; });
  return true;
}

SchedTotals SchedSnapshot::since(const SchedSnapshot& earlier) const {
  SchedTotals out;
  for (const Task& t : tasks_) {
    auto it = std::lower_bound(earlier.tasks_.begin(), earlier.tasks_.end(), t.tid,
                               [](const Task& a, pid_t tid) { return a.tid < tid; });
    const bool known = it != earlier.tasks_.end() && it->tid == t.tid;
    out.run_ns += t.run_ns - (known ? std::min(it->run_ns, t.run_ns) : 0);
    out.wait_ns += t.wait_ns - (known ? std::min(it->wait_ns, t.wait_ns) : 0);
    ++out.threads;
  }
  return out;
}

}  // namespace allocmark::metrics

#include <sstream>

namespace allocmark::metrics {

nlohmann::json summarize_maps_text(const std::string& text) {
  constexpr uint64_t k64MiB = 64ull << 20;
  uint64_t total = 0, anonymous = 0, heaps64 = 0, anon_bytes = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++total;
    unsigned long long start = 0, end = 0;
    char perms[8] = {0};
    unsigned long long offset = 0, inode = 0;
    char dev[16] = {0};
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu %n", &start, &end, perms, &offset, dev, &inode, &consumed) < 6)
      continue;
    std::string path = consumed > 0 && static_cast<std::size_t>(consumed) <= line.size() ? line.substr(consumed) : "";
    bool anon = inode == 0 && (path.empty() || path == "[heap]");
    if (!anon) continue;
    ++anonymous;
    anon_bytes += end - start;
    if (path.empty() && start % k64MiB == 0 && perms[0] == 'r') ++heaps64;
  }
  return {{"mappings", total}, {"anonymous", anonymous}, {"anonymous_bytes", anon_bytes}, {"aligned_64mib_anonymous", heaps64}};
}

nlohmann::json summarize_maps() { return summarize_maps_text(os::read_text("/proc/self/maps")); }

TaskCounters counters_of(const struct rusage& usage) {
  TaskCounters c;
  c.minor_faults = static_cast<uint64_t>(usage.ru_minflt);
  c.major_faults = static_cast<uint64_t>(usage.ru_majflt);
  c.user_s = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6;
  c.sys_s = usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
  c.voluntary_ctx_switches = static_cast<uint64_t>(usage.ru_nvcsw);
  c.involuntary_ctx_switches = static_cast<uint64_t>(usage.ru_nivcsw);
  return c;
}

TaskCounters counters_since(const TaskCounters& later, const TaskCounters& earlier) {
  TaskCounters c;
#define ALLOCMARK_COUNTER_SINCE(name) c.name = later.name - earlier.name;
  ALLOCMARK_PROCESS_COUNTERS(ALLOCMARK_COUNTER_SINCE)
#undef ALLOCMARK_COUNTER_SINCE
  return c;
}

}  // namespace allocmark::metrics
