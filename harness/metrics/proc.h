// /proc readers. The worker calls these at phase edges, so they allocate nothing: fixed buffers,
// raw open/read, no iostreams.
#pragma once

#include <sys/resource.h>

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/record/figure_names.h"

namespace allocmark::metrics {

struct MemStatus {
  uint64_t rss_bytes = 0;  // VmRSS
  uint64_t hwm_bytes = 0;  // VmHWM: peak RSS since start or the last clear_refs reset
};

// Reads /proc/<pid>/status (pid 0: self). False if the file or a field is missing.
bool read_mem_status(pid_t pid, MemStatus& out);
// Anonymous memory the process holds in transparent huge pages (AnonHugePages of
// /proc/<pid>/smaps_rollup, pid 0: self). The kernel walks the page tables to say it (about
// 10-12 ms per GiB resident in small pages, 0.07 ms in huge pages: docs/benchmarks.md "Huge-page
// readings"), so it is read at phase edges only, after the phase's other figures.
bool read_anon_huge_bytes(pid_t pid, uint64_t& bytes);

// The system's transparent-huge-page events (/proc/vmstat; ALLOCMARK_THP_EVENTS names them), counted
// since boot for every process: a phase's figure is the difference of two readings, system-wide.
struct ThpEvents {
#define ALLOCMARK_THP_MEMBER(name) uint64_t name = 0;
  ALLOCMARK_THP_EVENTS(ALLOCMARK_THP_MEMBER)
#undef ALLOCMARK_THP_MEMBER
};
bool read_thp_events(ThpEvents& out);
ThpEvents thp_events_since(const ThpEvents& now, const ThpEvents& before);
// The machine's transparent-huge-page modes, the bracketed word of
// /sys/kernel/mm/transparent_hugepage/{enabled,defrag} ("always [madvise] never" -> "madvise");
// "" where the kernel has no THP. For the driver (a plan, meta.json), never at a phase edge.
std::string thp_enabled_mode();
std::string thp_defrag_mode();
// The bracketed word of such a line; the text itself when it has none.
std::string bracketed_choice(const std::string& text);
// "key value" lines of /proc/vmstat; for tests and read_thp_events.
bool parse_vmstat_value(const char* text, const char* key, uint64_t& value);

// Resets the kernel's RSS high-water mark of this process to its current RSS (clear_refs 5).
// False where the kernel refuses (then VmHWM keeps its value since process start).
bool reset_peak_rss(pid_t pid = 0);

// What getrusage says of a process, read from the outside (/proc/<pid>/stat and status): for the
// phase edges of a program the driver runs, where the process cannot measure itself. Its members
// are ALLOCMARK_PROCESS_COUNTERS (harness/record/figure_names.h), which the records and the model expand.
struct TaskCounters {
  uint64_t minor_faults = 0, major_faults = 0;
  double user_s = 0, sys_s = 0;
  uint64_t voluntary_ctx_switches = 0, involuntary_ctx_switches = 0;
};
bool read_task_counters(pid_t pid, TaskCounters& out);
// From getrusage/wait4's figures.
TaskCounters counters_of(const struct rusage& usage);
// What happened between two readings (`later` - `earlier`, field by field).
TaskCounters counters_since(const TaskCounters& later, const TaskCounters& earlier);
// The fields of a /proc/<pid>/stat line, for tests.
bool parse_stat_counters(const char* text, TaskCounters& out);
// Resident bytes of a process from /proc/<pid>/statm: cheaper than status, for the parent sampler.
bool read_statm_rss(pid_t pid, uint64_t& rss_bytes);

// Resident bytes of a process per NUMA node, from /proc/<pid>/numa_maps: each mapping's N<node>=<pages>
// times its kernelpagesize_kB (4 for normal and transparent huge pages, whose pages the kernel counts
// in base pages; 2048 or 1048576 for hugetlbfs mappings). It counts the pages mapped in the
// process's page tables, so it is close to VmRSS but not equal (see docs/results-schema.md).
inline constexpr int kMaxNumaNodes = 64;
struct NodeResidency {
  uint64_t bytes[kMaxNumaNodes] = {};
  int highest_node = -1;  // the highest node with a count, -1 if none
  uint64_t mappings = 0;
  uint64_t total() const;
};
// Allocation-free (streamed through a stack buffer): the worker calls it right after a phase.
bool read_numa_maps(pid_t pid, NodeResidency& out);
// VmRSS and numa_maps read as one moment. Between two reads an allocator's own thread (numap's
// decay, jemalloc's background_thread) can give back megabytes: a program's companion at exit once
// saw numa_maps 18 MB below VmRSS. So: status, numa_maps, status again, at most kSteadyTries times,
// until the two status reads agree to max(1/64, 64 KiB); `mem` is the second read. `steady` says
// whether they agreed. A munmap under way is beyond any reader: the kernel takes the mapping out of
// what numa_maps walks before it zaps the pages VmRSS still counts (proc_test.cpp, NumaMaps). Allocation-free. False where status could not be read (`nodes_ok` says
// whether numa_maps could).
struct MemAndNodes {
  MemStatus mem;
  NodeResidency nodes;
  bool nodes_ok = false;
  bool steady = false;
};
inline constexpr int kSteadyTries = 8;
bool read_mem_and_nodes(pid_t pid, MemAndNodes& out);
// [bytes on node 0, node 1, ... up to the highest node with a count]: how a program cell's
// companion reports it at exit.
std::vector<uint64_t> residency_list(const NodeResidency& r);
// One line of numa_maps (no newline), added to `out`; for tests and read_numa_maps.
void add_numa_maps_line(const char* line, std::size_t length, NodeResidency& out);

// The whole system's anonymous memory in transparent huge pages on each NUMA node: the
// "Node N AnonHugePages:   X kB" line of /sys/devices/system/node/nodeN/meminfo. Every process's
// huge pages on the node, not one process's (the kernel says a process's only summed over nodes,
// in smaps_rollup): on a shared machine others' are in it. By node number; absent where the
// node's file could not be read or has no such line.
struct SystemNodeHuge {
  std::optional<uint64_t> bytes[kMaxNumaNodes];
};
// Reads the nodes `ids` (numbers below kMaxNumaNodes; others are skipped). Allocation-free (raw
// read into a stack buffer): the worker calls it right after a phase. True if every one was read.
bool read_system_node_huge(const int* ids, std::size_t count, SystemNodeHuge& out);
// The kB of a "Node N KEY: V kB" line of node `node`'s meminfo text; for tests and the reader.
bool parse_node_meminfo_kib(const char* text, int node, const char* key, uint64_t& kib);

// Parsers, exposed for tests. `text` is NUL-terminated.
bool parse_status_kib(const char* text, const char* key, uint64_t& kib);
bool parse_statm_resident_pages(const char* text, uint64_t& pages);
// /proc/<pid>/task/<tid>/schedstat: nanoseconds on a CPU, nanoseconds runnable but waiting on a
// run queue, time slices.
bool parse_schedstat(const char* text, uint64_t& run_ns, uint64_t& wait_ns);

// The scheduler's view of every thread of a process: time on a CPU and time waiting for one.
struct SchedTotals {
  uint64_t run_ns = 0, wait_ns = 0;
  uint32_t threads = 0;  // threads counted
};

// One reading of /proc/<pid>/task/*/schedstat (pid 0: self), kept per thread so a phase's figure
// is each thread's own difference. The room for threads is allocated by the constructor; read()
// allocates nothing (getdents64 into a stack buffer), so the worker can read at phase edges.
class SchedSnapshot {
 public:
  explicit SchedSnapshot(std::size_t max_threads = 4096);
  // False when the process's task folder cannot be read; threads beyond max_threads are left out
  // (truncated() says so).
  bool read(pid_t pid);
  // What the threads did since `earlier`: threads in both readings count their difference, threads
  // started since count whole. Threads that ended in between are missing: their time left with them.
  SchedTotals since(const SchedSnapshot& earlier) const;
  bool truncated() const { return truncated_; }

 private:
  struct Task {
    pid_t tid;
    uint64_t run_ns, wait_ns;
  };
  std::vector<Task> tasks_;
  std::size_t capacity_;
  bool truncated_ = false;
};

}  // namespace allocmark::metrics

#include <nlohmann/json.hpp>

namespace allocmark::metrics {

// Counts of this process's mappings from /proc/self/maps: all, anonymous, and glibc-heap-like
// ones (anonymous, starting on a 64 MiB boundary: glibc reserves each non-main arena's heap as a
// 64 MiB-aligned 64 MiB region). Called between phases; allocates.
nlohmann::json summarize_maps();
// The same from the text of a maps file, for tests.
nlohmann::json summarize_maps_text(const std::string& text);

}  // namespace allocmark::metrics
