// The lab's pure parts: the qemu command line from the topology files themselves, the guest's
// init script and the data channel's framing, the initramfs tree's handling of links and ldd.
// Booting is tests/lab_test.py's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "harness/lab/guest.h"
#include "harness/lab/initramfs.h"
#include "harness/lab/vm.h"
#include "harness/topology/topology.h"

namespace allocmark::lab {
namespace {

namespace fs = std::filesystem;

topology::Topology seed8() { return topology::load_topology_file(std::string(ALLOCMARK_CONFIG_DIR) + "/topologies/seed-8node.toml"); }

VmOptions options() {
  VmOptions o;
  o.kernel = "/boot/vmlinuz-test";
  o.initrd = "/tmp/initrd.cpio";
  o.console_log = "/tmp/console.log";
  o.data_log = "/tmp/data.txt";
  return o;
}

// The values of every `flag` in argv, in order.
std::vector<std::string> values_of(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) out.push_back(argv[i + 1]);
  return out;
}

std::string value_of(const std::vector<std::string>& argv, const std::string& flag) {
  auto v = values_of(argv, flag);
  EXPECT_EQ(v.size(), 1u) << flag;
  return v.empty() ? "" : v.front();
}

TEST(LabQemuCommand, Seed8NodeHasEveryNodeDistanceAndMemory) {
  const auto argv = qemu_command(seed8(), options());
  EXPECT_EQ(argv.front(), "qemu-system-x86_64");
  EXPECT_EQ(value_of(argv, "-smp"), "8");
  EXPECT_EQ(value_of(argv, "-m"), "4096M");
  EXPECT_EQ(value_of(argv, "-accel"), "tcg");
  EXPECT_EQ(value_of(argv, "-kernel"), "/boot/vmlinuz-test");
  EXPECT_EQ(value_of(argv, "-initrd"), "/tmp/initrd.cpio");
  EXPECT_EQ(values_of(argv, "-serial"), (std::vector<std::string>{"file:/tmp/console.log", "file:/tmp/data.txt"}));
  EXPECT_NE(value_of(argv, "-append").find("numa_balancing=disable"), std::string::npos);

  std::set<std::string> objects, nodes, dists;
  for (const auto& o : values_of(argv, "-object")) objects.insert(o);
  for (const auto& n : values_of(argv, "-numa")) (n.rfind("node,", 0) == 0 ? nodes : dists).insert(n);
  ASSERT_EQ(objects.size(), 8u);
  ASSERT_EQ(nodes.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(objects.count("memory-backend-ram,id=mem" + std::to_string(i) + ",size=512M")) << i;
    EXPECT_TRUE(nodes.count("node,nodeid=" + std::to_string(i) + ",cpus=" + std::to_string(i) + ",memdev=mem" + std::to_string(i)))
        << i;
  }
  // 56 ordered pairs, each with the seed's distance: 16 within a group of four, 32 across.
  ASSERT_EQ(dists.size(), 56u);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      if (i == j) continue;
      const int expected = (i / 4 == j / 4) ? 16 : 32;
      EXPECT_TRUE(dists.count("dist,src=" + std::to_string(i) + ",dst=" + std::to_string(j) + ",val=" + std::to_string(expected)))
          << i << "->" << j;
    }
}

TEST(LabQemuCommand, EveryTopologyFileBoots) {
  for (const auto& e : fs::directory_iterator(std::string(ALLOCMARK_CONFIG_DIR) + "/topologies")) {
    auto t = topology::load_topology_file(e.path().string());
    auto argv = qemu_command(t, options());
    EXPECT_EQ(values_of(argv, "-object").size(), t.nodes.size()) << e.path();
    EXPECT_EQ(std::stoi(value_of(argv, "-smp")), t.cpu_count()) << e.path();
  }
}

TEST(LabQemuCommand, MemoryOverrideAndKvmAndThp) {
  VmOptions o = options();
  o.memory_per_node = 256ull << 20;
  o.accel = Accel::kKvm;
  o.thp = "always";
  const auto argv = qemu_command(seed8(), o);
  EXPECT_EQ(value_of(argv, "-m"), "2048M");
  for (const auto& obj : values_of(argv, "-object")) EXPECT_NE(obj.find(",size=256M"), std::string::npos) << obj;
  EXPECT_EQ(value_of(argv, "-accel"), "kvm");
  EXPECT_EQ(value_of(argv, "-cpu"), "host");
  EXPECT_NE(value_of(argv, "-append").find("transparent_hugepage=always"), std::string::npos);
}

TEST(LabQemuCommand, CpuRangesAreContiguousRuns) {
  EXPECT_EQ(cpu_ranges({0, 1, 2, 5, 7, 8}), (std::vector<std::string>{"0-2", "5", "7-8"}));
  EXPECT_EQ(cpu_ranges({3}), (std::vector<std::string>{"3"}));
  EXPECT_TRUE(cpu_ranges({}).empty());
  topology::Topology t = seed8();
  t.nodes[0].cpus = {0, 8};  // node 0 gets CPUs 0 and 8: nine CPUs, 0..8, no gap
  auto argv = qemu_command(t, options());
  EXPECT_EQ(value_of(argv, "-smp"), "9");
  const auto numa = values_of(argv, "-numa");
  EXPECT_NE(std::find(numa.begin(), numa.end(), "node,nodeid=0,cpus=0,cpus=8,memdev=mem0"), numa.end());
}

TEST(LabQemuCommand, RefusesWhatQemuCannotBootAsWritten) {
  topology::Topology gap_cpu = seed8();
  gap_cpu.nodes[7].cpus = {9};  // CPU 7 missing
  EXPECT_THROW(qemu_command(gap_cpu, options()), LabError);
  topology::Topology gap_node = seed8();
  gap_node.nodes[7].id = 9;
  EXPECT_THROW(qemu_command(gap_node, options()), LabError);
  VmOptions odd = options();
  odd.memory_per_node = (256ull << 20) + 4096;
  try {
    qemu_command(seed8(), odd);
    FAIL() << "memory not in whole MiB was accepted";
  } catch (const LabError& e) {
    EXPECT_NE(std::string(e.what()).find("whole MiB"), std::string::npos) << e.what();
  }
}

TEST(LabGuest, InitScriptSwitchesBalancingOffRunsTheCommandAndSendsResults) {
  GuestCommand c{{"/work/build/bin/allocmark", "run", "-w", "size_mix", "--set", "size_mix.ops=it's", "--out", kGuestResults},
                 "/work/my dir", "lab-seed-8node", {{"ALLOCMARK_CONFIG_DIR", "/cfg"}}, "/usr/bin:/bin"};
  const std::string s = init_script(c);
  EXPECT_EQ(s.rfind(std::string("#!") + kGuestBusybox + " sh\n", 0), 0u);
  EXPECT_NE(s.find("echo 0 > /proc/sys/kernel/numa_balancing"), std::string::npos);
  EXPECT_NE(s.find("cd '/work/my dir' && exec /lab/busybox sh -c 'echo $$ > \"$0\"; exec \"$@\"' $pidfile '/work/build/bin/allocmark' 'run' '-w' 'size_mix' '--set' 'size_mix.ops=it'\\''s' '--out' '/lab/out/results'"),
            std::string::npos)
      << s;
  // The command finds programs where the host does, busybox's applets after them.
  EXPECT_NE(s.find("export PATH='/usr/bin:/bin:/lab/bin'"), std::string::npos) << s;
  EXPECT_NE(s.find("export ALLOCMARK_CONFIG_DIR='/cfg'"), std::string::npos);
  EXPECT_NE(s.find("hostname 'lab-seed-8node'"), std::string::npos);
  EXPECT_NE(s.find(kBootedMarker), std::string::npos);
  // The results go out on the data port, framed, after the command.
  EXPECT_LT(s.find(kCommandEnded), s.find(kDataBegin));
  EXPECT_NE(s.find("> /dev/ttyS1"), std::string::npos);
  EXPECT_NE(s.find("poweroff -f"), std::string::npos);
}

TEST(LabGuest, TheGuestStopsItsCommandAMarginBeforeTheHostsTimeout) {
  EXPECT_EQ(guest_margin_s(1200), 120);
  EXPECT_EQ(guest_margin_s(300), 30);
  EXPECT_EQ(guest_margin_s(60), 10);
  EXPECT_EQ(guest_margin_s(7200), 120);
  EXPECT_EQ(lab_deadline_arguments(1764567000, 300), "allocmark_launched=1764567000 allocmark_budget=270");
  EXPECT_EQ(lab_deadline_arguments(1764567000, 2), "allocmark_launched=1764567000 allocmark_budget=0");
  VmOptions o = options();
  o.guest_arguments = lab_deadline_arguments(1764567000, 300);
  EXPECT_NE(kernel_command_line(o).find(" allocmark_launched=1764567000 allocmark_budget=270"), std::string::npos);
  GuestCommand c{{"/b/allocmark", "run"}, "/w", "lab-x", {}, ""};
  const std::string s = init_script(c);
  // The deadline comes from the kernel command line; the watchdog stops the command with SIGTERM
  // (allocmark run records its finished cells), and the results are sent after it, flagged.
  EXPECT_NE(s.find("allocmark_budget="), std::string::npos);
  EXPECT_NE(s.find("/proc/cmdline"), std::string::npos);
  EXPECT_NE(s.find("kill -TERM $(cat $pidfile)"), std::string::npos);
  EXPECT_LT(s.find("kill -TERM $(cat $pidfile)"), s.find("kill -KILL $(cat $pidfile)"));
  EXPECT_NE(s.find("echo \"stopped_by_timeout=1\" >> $facts"), std::string::npos);
  EXPECT_LT(s.find("stopped_by_timeout=1"), s.find(kDataBegin));
  EXPECT_NE(s.find("export PATH='/lab/bin'"), std::string::npos);
}

TEST(LabGuest, DataPayloadNeedsBothMarkers) {
  EXPECT_EQ(data_payload("noise\r\nALLOCMARK-LAB-DATA-BEGIN\r\nH4sI\r\nAAAA\r\nALLOCMARK-LAB-DATA-END\r\n"), "\nH4sI\nAAAA\n");
  EXPECT_FALSE(data_payload("ALLOCMARK-LAB-DATA-BEGIN\nH4sI\n").has_value());  // cut off: the guest died sending
  EXPECT_FALSE(data_payload("").has_value());
}

TEST(LabGuest, Facts) {
  auto f = parse_facts("kernel=6.1.0-57-amd64\nnodes_online=0-7\nnode3_memtotal_kib=524288\nexit=1\njunk\n");
  EXPECT_EQ(f.at("nodes_online"), "0-7");
  EXPECT_EQ(f.at("node3_memtotal_kib"), "524288");
  EXPECT_EQ(f.at("exit"), "1");
  EXPECT_EQ(f.size(), 4u);
}

TEST(LabInitramfs, LddOutput) {
  const std::string out =
      "\tlinux-vdso.so.1 (0x00007ffd)\n"
      "\tlibnuma.so.1 => /lib/x86_64-linux-gnu/libnuma.so.1 (0x00007f)\n"
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
  EXPECT_EQ(libraries_in_ldd_output(out, "x"),
            (std::vector<std::string>{"/lib/x86_64-linux-gnu/libnuma.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}));
  try {
    libraries_in_ldd_output("\tlibgone.so.3 => not found\n", "/usr/lib/libx.so");
    FAIL() << "a missing library was accepted";
  } catch (const LabError& e) {
    EXPECT_NE(std::string(e.what()).find("libgone.so.3"), std::string::npos);
  }
}

TEST(LabInitramfs, CarriedPathsKeepTheirLinks) {
  const fs::path host = fs::temp_directory_path() / ("lab_test_host_" + std::to_string(::getpid()));
  const fs::path tree = fs::temp_directory_path() / ("lab_test_tree_" + std::to_string(::getpid()));
  fs::remove_all(host);
  fs::remove_all(tree);
  // host/lib -> usr/lib (merged /usr), usr/lib/libx.so.1 -> libx.so.1.2.3 (a versioned library)
  fs::create_directories(host / "usr/lib");
  fs::create_symlink("usr/lib", host / "lib");
  { std::ofstream(host / "usr/lib/libx.so.1.2.3") << "library"; }
  fs::create_symlink("libx.so.1.2.3", host / "usr/lib/libx.so.1");
  RootTree root(tree.string());
  root.carry((host / "lib/libx.so.1").string());
  const fs::path in_tree = tree / host.relative_path();
  EXPECT_TRUE(fs::is_symlink(in_tree / "lib"));
  EXPECT_EQ(fs::read_symlink(in_tree / "lib"), "usr/lib");
  EXPECT_TRUE(fs::is_symlink(in_tree / "usr/lib/libx.so.1"));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(in_tree / "usr/lib/libx.so.1.2.3")));
  std::ifstream in(in_tree / "lib/libx.so.1");
  std::string text;
  in >> text;
  EXPECT_EQ(text, "library");
  EXPECT_THROW(root.carry((host / "missing.so").string()), LabError);
  fs::remove_all(host);
  fs::remove_all(tree);
}

}  // namespace
}  // namespace allocmark::lab
