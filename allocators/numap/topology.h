// Layer 1, topology: NUMA nodes, their CPUs, distances and capacities, and the placement rule
// built on them (seed 001: fall back in increasing distance, ties by most free memory, stop at a
// distance limit). Read from sysfs with plain open/read, or from a fake sysfs root, or built by
// hand (tests convert the project's topology files, tests/topology_support.h): injectable like
// tcmalloc's NumaTopology::InitForTest, so single-node CI tests the multi-node logic.
// (Not libnuma: its constructor allocates, which recurses inside malloc.)
#pragma once

#include <cstddef>
#include <cstdint>

namespace numap {

constexpr int kMaxNodes = 64;
constexpr int kMaxCpus = 1024;

struct Topology {
  int count = 1;                           // nodes known (partition indices 0..count-1)
  int os_node[kMaxNodes] = {};             // partition -> kernel node number
  std::uint8_t distance[kMaxNodes][kMaxNodes] = {};
  std::uint64_t capacity[kMaxNodes] = {};  // bytes (MemTotal), 0 = unknown
  std::uint64_t allowed = 1;               // partitions the process may place memory on (mask)
  bool bound = false;                      // bound to one node (CPU affinity or MPOL_BIND)
  std::int16_t cpu_node[kMaxCpus] = {};    // cpu -> partition, -1 unknown

  int allowed_count() const { return __builtin_popcountll(allowed); }
  // Memory strictly bound: a node with memory (MemTotal known) that the process may not use
  // (MPOL_BIND, or the cpuset's mems, as `allowed` says). The kernel then OOM-kills rather than
  // place a page outside the allowed nodes; unbound (or nodes without memory left out) is false.
  bool mem_bound() const {
    for (int i = 0; i < count; ++i)
      if (!(allowed & (1ull << i)) && capacity[i] != 0) return true;
    return false;
  }
  int node_of_cpu(int cpu) const { return cpu >= 0 && cpu < kMaxCpus && cpu_node[cpu] >= 0 ? cpu_node[cpu] : 0; }
};

// One node holding every CPU, with `capacity` bytes.
void topology_single(Topology* t, std::uint64_t capacity);

// Reads <root>/devices/system/node/{online,nodeN/distance,nodeN/cpulist,nodeN/meminfo}. `allowed_os`
// is the mask of kernel nodes the process may use (0: all online); `cpus_allowed` the CPUs it may run on
// (null: all). False when the files are missing or unreadable (*t is then partly written: fall back
// to topology_single, as topology_detect does).
bool topology_from_sysfs(Topology* t, const char* root, std::uint64_t allowed_os, const std::uint64_t* cpus_allowed,
                         std::size_t cpu_words);

// The live process: sysfs under `root`, Mems_allowed from /proc/self/status, CPU affinity and the
// MPOL_BIND mask (policy_mask from the os layer). Falls back to one node when sysfs is unreadable.
void topology_detect(Topology* t, const char* root, std::uint64_t policy_mask, std::uint64_t mem_total_fallback);

// Whether per-node placement is on: option 1 forces it, 0 disables it, -1 (auto) enables it only
// with more than one usable node and a process not bound to one node.
bool numa_enabled(const Topology& t, int option);

// The nodes an allocation from `from` may use, in order: `from` itself, then every other allowed
// node by increasing distance, ties by most free bytes (free_bytes[node]), then by lower index;
// none farther than distance_limit (0 = no limit). Returns how many were written to out.
int fallback_order(const Topology& t, int from, const std::uint64_t* free_bytes, int distance_limit, int* out);

// What the kernel can give on each node: its free memory less the zone watermarks (below the
// low watermark the kernel reclaims, below min it stalls, and a strict policy OOM-kills), from
// nodeN/meminfo's MemFree and /proc/zoneinfo's per-zone `high` watermarks. Fed one line at a
// time (Os::read_lines), so nothing allocates.
struct ZoneinfoReader {
  std::uint64_t high_pages[kMaxNodes] = {};  // sum of the `high` watermarks of the node's zones
  int node = -1;                             // kernel node of the zone being read
  static void line(void* self, const char* text);
};
// <root>/devices/system/node/node<os_node>/<file>, bounded by size (no allocation).
void node_path(char* out, std::size_t size, const char* root, int os_node, const char* file);
// "Node 3 MemFree:  123456 kB" -> 123456; false for any other line.
bool meminfo_free_kb(const char* line, std::uint64_t* kb);
// Bytes the kernel can hand out before reclaim: free less watermark, 0 when below it.
inline std::uint64_t headroom_bytes(std::uint64_t free_bytes, std::uint64_t watermark_bytes) {
  return free_bytes > watermark_bytes ? free_bytes - watermark_bytes : 0;
}

// Parses a kernel list such as "0-3,8,10-11" into a bit mask (bits >= words*64 ignored).
bool parse_cpulist(const char* text, std::uint64_t* mask, std::size_t words);

}  // namespace numap
