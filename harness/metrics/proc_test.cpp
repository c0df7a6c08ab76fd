#include "harness/metrics/proc.h"
#include "harness/metrics/phase_record.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

using namespace allocmark::metrics;

TEST(ProcParse, FindsStatusFieldsInKib) {
  const char* text = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t     567 kB\n";
  uint64_t kib = 0;
  ASSERT_TRUE(parse_status_kib(text, "VmHWM", kib));
  EXPECT_EQ(kib, 1234u);
  ASSERT_TRUE(parse_status_kib(text, "VmRSS", kib));
  EXPECT_EQ(kib, 567u);
  EXPECT_FALSE(parse_status_kib(text, "VmSwap", kib));
  // A key that is a prefix of another must not match it.
  EXPECT_FALSE(parse_status_kib("VmRSSx:\t1 kB\n", "VmRSS", kib));
}

TEST(ProcParse, StatmResidentIsSecondField) {
  uint64_t pages = 0;
  ASSERT_TRUE(parse_statm_resident_pages("2000 350 100 5 0 60 0\n", pages));
  EXPECT_EQ(pages, 350u);
  EXPECT_FALSE(parse_statm_resident_pages("2000\n", pages));
}

TEST(ProcParse, SchedstatIsRunThenWaitNanoseconds) {
  uint64_t run = 0, wait = 0;
  ASSERT_TRUE(parse_schedstat("290928238 575350549 166\n", run, wait));
  EXPECT_EQ(run, 290928238u);
  EXPECT_EQ(wait, 575350549u);
  EXPECT_FALSE(parse_schedstat("12\n", run, wait));
  EXPECT_FALSE(parse_schedstat("", run, wait));
}

TEST(ProcRead, SchedSnapshotCountsEveryThreadsOwnDifference) {
  SchedSnapshot before, after, same;
  std::atomic<bool> started{false}, stop{false};
  std::thread busy([&] {
    started = true;
    volatile uint64_t x = 0;
    while (!stop) x = x + 1;  // on a CPU (or waiting for one) until told to stop
  });
  while (!started) std::this_thread::yield();
  ASSERT_TRUE(before.read(0));
  EXPECT_FALSE(before.truncated());
  // Spin until the busy thread has been on a CPU since `before`: the scheduler's own clock says when.
  for (;;) {
    ASSERT_TRUE(after.read(0));
    if (after.since(before).run_ns > 0) break;
  }
  SchedTotals t = after.since(before);
  // This thread and the busy one, and any a preloaded allocator runs itself (numap's decay thread).
  EXPECT_GE(t.threads, 2u);
  EXPECT_GT(t.run_ns, 0u);
  ASSERT_TRUE(same.read(0));
  SchedTotals none = same.since(same);
  EXPECT_EQ(none.run_ns, 0u);
  EXPECT_EQ(none.wait_ns, 0u);
  SchedSnapshot small(1);
  ASSERT_TRUE(small.read(0));
  EXPECT_TRUE(small.truncated()) << "two threads, room for one";
  stop = true;
  busy.join();
  EXPECT_FALSE(SchedSnapshot().read(999999999)) << "no such process";
}

TEST(ProcRead, SelfStatusAndStatmAgreeRoughly) {
  MemStatus st;
  ASSERT_TRUE(read_mem_status(0, st));
  EXPECT_GT(st.rss_bytes, 0u);
  EXPECT_GE(st.hwm_bytes, st.rss_bytes);
  uint64_t statm = 0;
  ASSERT_TRUE(read_statm_rss(getpid(), statm));
  EXPECT_GT(statm, 0u);
}

// The measurement rule the harness rests on: after a reset, VmHWM follows a new peak and falls back
// to the current RSS on the next reset.
TEST(ProcRead, PeakResetTracksNewPeak) {
  if (!reset_peak_rss()) GTEST_FAIL() << "clear_refs is not writable here; peak RSS per phase cannot be exact";
  const std::size_t size = 64 << 20;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  MemStatus before;
  ASSERT_TRUE(read_mem_status(0, before));
  std::memset(p, 1, size);
  munmap(p, size);
  MemStatus after;
  ASSERT_TRUE(read_mem_status(0, after));
  EXPECT_GE(after.hwm_bytes, before.rss_bytes + size - (4u << 20));
  ASSERT_TRUE(reset_peak_rss());
  MemStatus reset;
  ASSERT_TRUE(read_mem_status(0, reset));
  EXPECT_LT(reset.hwm_bytes, after.hwm_bytes - (32u << 20));
}

TEST(Maps, CountsAnonymousAndGlibcHeapLikeMappings) {
  const char* text =
      "55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]\n"
      "7f3c4c000000-7f3c4c021000 rw-p 00000000 00:00 0 \n"
      "7f3c4c021000-7f3c50000000 ---p 00000000 00:00 0 \n"
      "7f3c51000000-7f3c51001000 rw-p 00000000 00:00 0 \n"
      "7f3c52000000-7f3c52100000 r-xp 00000000 fd:01 1234                       /usr/lib/libc.so.6\n";
  auto s = summarize_maps_text(text);
  EXPECT_EQ(s["mappings"], 5);
  EXPECT_EQ(s["anonymous"], 4);
  EXPECT_EQ(s["aligned_64mib_anonymous"], 1);  // 7f3c4c000000 only: 7f3c51000000 is not 64 MiB aligned
}

TEST(Maps, SelfHasMappings) { EXPECT_GT(summarize_maps()["mappings"].get<int>(), 5); }

TEST(ProcParse, StatCountersAfterTheCommandName) {
  // A command name with spaces and a ')' must not shift the fields.
  const char* line = "4242 (a b) c)) S 1 4242 4242 0 -1 4194560 111 5 22 7 300 40 0 0 20 0 1 0 100 0 0";
  allocmark::metrics::TaskCounters c;
  ASSERT_TRUE(allocmark::metrics::parse_stat_counters(line, c));
  EXPECT_EQ(c.minor_faults, 111u);
  EXPECT_EQ(c.major_faults, 22u);
  EXPECT_DOUBLE_EQ(c.user_s * sysconf(_SC_CLK_TCK), 300);
  EXPECT_DOUBLE_EQ(c.sys_s * sysconf(_SC_CLK_TCK), 40);
  EXPECT_FALSE(allocmark::metrics::parse_stat_counters("no paren here", c));
}

TEST(ProcRead, OwnTaskCounters) {
  allocmark::metrics::TaskCounters c;
  ASSERT_TRUE(allocmark::metrics::read_task_counters(getpid(), c));
  EXPECT_GT(c.minor_faults, 0u);
}

TEST(PhaseRecord, OneSpellingOfThePhaseFieldsWithAbsentFiguresAsNull) {
  rusage before{}, after{};
  before.ru_minflt = 10;
  after.ru_minflt = 25;
  after.ru_utime.tv_sec = 1;
  after.ru_utime.tv_usec = 500000;
  after.ru_nvcsw = 7;
  allocmark::metrics::PhaseFigures f;
  f.name = "churn";
  f.begin_ns = 1'000'000'000;
  f.end_ns = 3'000'000'000;
  f.ops = 500;
  f.peak_rss_bytes = 4096;
  f.peak_rss_reset = true;
  f.counters = allocmark::metrics::counters_since(allocmark::metrics::counters_of(after), allocmark::metrics::counters_of(before));
  nlohmann::json p = allocmark::metrics::phase_record(f);
  EXPECT_EQ(p["name"], "churn");
  EXPECT_DOUBLE_EQ(p["wall_s"].get<double>(), 2.0);
  EXPECT_EQ(p["ops"], 500);
  EXPECT_FALSE(p.contains("ops_per_s")) << "a rate is the results model's, from ops and wall_s";
  EXPECT_EQ(p["peak_rss_bytes"], 4096);
  EXPECT_EQ(p["peak_rss_exact"], true);
  EXPECT_TRUE(p["end_rss_bytes"].is_null());
  EXPECT_TRUE(p["peak_live_bytes"].is_null());  // not counted: null, never 0
  EXPECT_EQ(p["minor_faults"], 15);
  EXPECT_DOUBLE_EQ(p["user_s"].get<double>(), 1.5);
  EXPECT_EQ(p["voluntary_ctx_switches"], 7);
  f.peak_rss_bytes.reset();
  EXPECT_EQ(allocmark::metrics::phase_record(f)["peak_rss_exact"], false);  // no reading, nothing exact
}

TEST(ProcParse, VmstatValuesByWholeName) {
  const char* text = "nr_free_pages 10\nthp_fault_alloc 23431\nthp_fault_alloc_x 9\nthp_split_page 0\n";
  uint64_t v = 7;
  EXPECT_TRUE(parse_vmstat_value(text, "thp_fault_alloc", v));
  EXPECT_EQ(v, 23431u);
  EXPECT_TRUE(parse_vmstat_value(text, "thp_split_page", v));
  EXPECT_EQ(v, 0u);
  EXPECT_FALSE(parse_vmstat_value(text, "thp_collapse_alloc", v));
  EXPECT_FALSE(parse_vmstat_value(text, "thp_fault", v)) << "a prefix is not the name";
}

TEST(ProcRead, HugePagesOfThisProcessAndTheSystemsThpEvents) {
  uint64_t huge = 1;
  ASSERT_TRUE(read_anon_huge_bytes(0, huge));
  EXPECT_EQ(huge % (2u << 20), 0u) << "whole 2 MiB pages";
  ThpEvents a, b;
  ASSERT_TRUE(read_thp_events(a));
  ASSERT_TRUE(read_thp_events(b));
  EXPECT_GE(b.fault_alloc, a.fault_alloc);
  EXPECT_EQ(thp_events_since(b, a).fault_alloc, b.fault_alloc - a.fault_alloc);
  EXPECT_EQ(thp_events_since(a, b).fault_alloc, 0u) << "never below zero";
}

TEST(PhaseRecord, ContentionHoldsTheMeasuredCountersNotTheirShares) {
  allocmark::metrics::PhaseContention c;
  c.native = {{"num_ops", 10}};
  c.latency_absent = "not timed";
  c.sched = allocmark::metrics::SchedTotals{3000, 1000, 2};
  const nlohmann::json out = allocmark::metrics::contention_record(c);
  EXPECT_EQ(out["num_ops"], 10);
  EXPECT_EQ(out["run_ns"], 3000);
  EXPECT_EQ(out["runqueue_wait_ns"], 1000);
  EXPECT_EQ(out["runqueue_threads"], 2);
  EXPECT_TRUE(out["latency"].is_null());
  // runqueue_wait_share and vol_ctx_switches_per_mop are metrics of the results model.
  EXPECT_FALSE(out.contains("runqueue_wait_share"));
  EXPECT_FALSE(out.contains("voluntary_ctx_switches_per_mop"));
}

// Lines as a two-node kernel writes them (from an 8-node qemu guest and this machine, trimmed):
// normal, transparent-huge-page (counted in 4 KiB pages), hugetlbfs (2 MiB pages), a file name
// with an escaped space, a mapping with no resident page, and one spread over both nodes.
TEST(NumaMaps, SumsNodePagesTimesEachMappingsPageSize) {
  const std::string text =
      "55e878669000 default file=/usr/bin/cat mapped=2 N0=2 kernelpagesize_kB=4\n"
      "7f2a40000000 default anon=512 dirty=512 active=0 N1=512 kernelpagesize_kB=4\n"
      "7f2a80000000 bind:1 file=/anon_hugepage\\040(deleted) huge anon=3 dirty=3 N1=3 kernelpagesize_kB=2048\n"
      "7f2b00000000 default file=/tmp/a\\040b.dat mapped=1 N0=1 kernelpagesize_kB=4\n"
      "7f2c00000000 default anon=0 kernelpagesize_kB=4\n"
      "7ffd5b0e0000 interleave:0-1 stack anon=6 dirty=6 N0=4 N1=2 kernelpagesize_kB=4\n";
  allocmark::metrics::NodeResidency r;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    allocmark::metrics::add_numa_maps_line(text.data() + start, nl - start, r);
    start = nl + 1;
  }
  EXPECT_EQ(r.mappings, 6u);
  EXPECT_EQ(r.highest_node, 1);
  EXPECT_EQ(r.bytes[0], (2u + 1u + 4u) * 4096u);
  EXPECT_EQ(r.bytes[1], 512u * 4096u + 3u * 2048u * 1024u + 2u * 4096u);
  EXPECT_EQ(r.total(), r.bytes[0] + r.bytes[1]);
}

TEST(NumaMaps, ThisProcessHasResidentBytesOnSomeNodeNearItsRss) {
  allocmark::metrics::NodeResidency r;
  ASSERT_TRUE(allocmark::metrics::read_numa_maps(0, r)) << "/proc/self/numa_maps must be readable (CONFIG_NUMA)";
  allocmark::metrics::MemStatus status;
  ASSERT_TRUE(allocmark::metrics::read_mem_status(0, status));
  EXPECT_GT(r.mappings, 10u);
  EXPECT_GE(r.highest_node, 0);
  // numa_maps counts each mapping's mapped pages; VmRSS the process's resident pages. Both count
  // shared library pages once per mapping here, so they agree within a few pages for a process
  // this small; 25 % leaves room for pages touched between the two reads.
  EXPECT_NEAR(static_cast<double>(r.total()), static_cast<double>(status.rss_bytes), 0.25 * status.rss_bytes);
}

// A thread writes 32 MiB and gives it back with madvise every few milliseconds, as an allocator's
// decay thread does while a phase edge is read: each steady snapshot's numa_maps total is VmRSS's
// moment (within numa_maps' few left-out pages), never a reading from before a 32 MiB change, nor
// one where the pages went and came back between the reads (the faults say so). Not munmap: the
// kernel takes the mapping out of what numa_maps walks before it zaps its pages, so a preempted
// munmap leaves pages VmRSS counts and numa_maps cannot see, which no reader can tell (a loaded CI
// run read 4.2 MB against 11.7 MB with VmRSS and the faults unchanged across the read).
TEST(NumaMaps, ReadWithRssAsOneMomentWhileAnotherThreadGivesMemoryBack) {
  constexpr std::size_t kBytes = 32u << 20;
  // A real program's numa_maps has hundreds of lines (Python's about 400), each a mapping the
  // kernel walks: 4000 one-page mappings of alternating protection make this one as slow to read.
  constexpr std::size_t kMappings = 4000;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* many = mmap(nullptr, kMappings * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(many, MAP_FAILED);
  for (std::size_t i = 0; i < kMappings; i += 2) mprotect(static_cast<char*>(many) + i * page, page, PROT_READ);
  std::atomic<bool> stop{false};
  void* churned = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(churned, MAP_FAILED);
  std::thread churn([&] {
    while (!stop.load()) {
      std::memset(churned, 1, kBytes);
      usleep(3000);
      madvise(churned, kBytes, MADV_DONTNEED);
      usleep(3000);
    }
  });
  int steady = 0;
  for (int i = 0; i < 60; ++i) {
    MemAndNodes now;
    ASSERT_TRUE(read_mem_and_nodes(0, now));
    ASSERT_TRUE(now.nodes_ok);
    if (!now.steady) continue;
    ++steady;
    const double rss = static_cast<double>(now.mem.rss_bytes);
    EXPECT_NEAR(static_cast<double>(now.nodes.total()), rss, std::max(0.05 * rss, 2.0 * (1 << 20))) << "snapshot " << i;
    usleep(1000);
  }
  stop = true;
  churn.join();
  munmap(churned, kBytes);
  munmap(many, kMappings * page);
  EXPECT_GT(steady, 0) << "no snapshot in 60 found VmRSS still across its numa_maps read";
}

TEST(ProcParse, NodeMeminfoValueOfItsOwnNodeAndWholeName) {
  const char* text =
      "Node 1 MemTotal:       13592392 kB\n"
      "Node 1 AnonPages:        247344 kB\n"
      "Node 1 AnonHugePagesX:       99 kB\n"
      "Node 1 AnonHugePages:     43008 kB\n"
      "Node 1 ShmemHugePages:        0 kB\n"
      "Node 12 AnonHugePages:     2048 kB\n";
  uint64_t kib = 7;
  ASSERT_TRUE(parse_node_meminfo_kib(text, 1, "AnonHugePages", kib));
  EXPECT_EQ(kib, 43008u) << "the whole name, not a longer one";
  ASSERT_TRUE(parse_node_meminfo_kib(text, 12, "AnonHugePages", kib));
  EXPECT_EQ(kib, 2048u) << "node 12, not node 1";
  EXPECT_FALSE(parse_node_meminfo_kib(text, 2, "AnonHugePages", kib)) << "another node's lines do not count";
  EXPECT_FALSE(parse_node_meminfo_kib(text, 1, "FilePages", kib));
  EXPECT_FALSE(parse_node_meminfo_kib("Node 1 AnonHugePages:  \n", 1, "AnonHugePages", kib)) << "no number";
  EXPECT_FALSE(parse_node_meminfo_kib("", 0, "AnonHugePages", kib));
}

TEST(ProcRead, SystemHugePagesOfNodeZeroAsItsMeminfoSays) {
  // The real file of this machine: node 0 exists on every Linux with CONFIG_NUMA.
  char text[8192] = {};
  FILE* f = std::fopen("/sys/devices/system/node/node0/meminfo", "r");
  ASSERT_NE(f, nullptr) << "/sys/devices/system/node/node0/meminfo must be readable";
  const std::size_t got = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  ASSERT_GT(got, 0u);
  uint64_t kib = 0;
  ASSERT_TRUE(parse_node_meminfo_kib(text, 0, "AnonHugePages", kib)) << text;
  ASSERT_TRUE(parse_node_meminfo_kib(text, 0, "MemTotal", kib)) << text;
  EXPECT_GT(kib, 0u);

  const int ids[] = {0, 4096};
  SystemNodeHuge huge;
  EXPECT_FALSE(read_system_node_huge(ids, 2, huge)) << "a node number out of range is not read";
  ASSERT_TRUE(huge.bytes[0].has_value());
  EXPECT_EQ(*huge.bytes[0] % 1024, 0u) << "kB as bytes";
  EXPECT_TRUE(read_system_node_huge(ids, 1, huge));
  // The system's huge pages hold this process's (read before, so a page faulted in between only adds).
  uint64_t mine = 0;
  ASSERT_TRUE(read_anon_huge_bytes(0, mine));
  const int all[] = {0};
  ASSERT_TRUE(read_system_node_huge(all, 1, huge));
  if (::access("/sys/devices/system/node/node1", F_OK) != 0) {
    EXPECT_GE(*huge.bytes[0], mine);
  }

  nlohmann::json list = allocmark::metrics::system_node_huge_list(huge);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0], *huge.bytes[0]);
  SystemNodeHuge sparse;
  sparse.bytes[2] = 4u << 20;
  EXPECT_EQ(allocmark::metrics::system_node_huge_list(sparse).dump(), "[null,null,4194304]") << "nodes not read are null";
}

TEST(PhaseRecord, OneSpellingOfTheNodeFieldsWithAbsentFiguresAsNull) {
  allocmark::metrics::PhaseNodeFigures n;
  n.node = 1;
  n.resident_bytes = 8192;
  n.system_anon_huge_bytes = 2u << 20;
  nlohmann::json r = allocmark::metrics::node_record(n);
  EXPECT_EQ(r["node"], 1);
  EXPECT_EQ(r["resident_bytes"], 8192);
  EXPECT_EQ(r["system_anon_huge_bytes"], 2u << 20);
  for (const char* absent : {"threads", "ops", "sampled_blocks", "local_blocks", "local_fraction", "latency"})
    EXPECT_TRUE(r[absent].is_null()) << absent;
  n.system_anon_huge_bytes.reset();
  EXPECT_TRUE(allocmark::metrics::node_record(n)["system_anon_huge_bytes"].is_null());
}
