#include "harness/lab/runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/lab/guest.h"
#include "harness/lab/initramfs.h"
#include "harness/os/clock.h"
#include "harness/results/folder_layout.h"
#include "harness/results/meta.h"
#include "harness/results/results_dir.h"
#include "harness/runner/process.h"
#include "units/input_file.h"

extern char** environ;

namespace allocmark::lab {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kLabNote =
    "timings under emulation are meaningless; placement, per-node RSS, capacities and fallback are the real kernel's";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string missing(const std::string& what, const std::string& package) {
  return fmt::format("{}: the lab needs Debian's {} (apt-get install {}; ci/setup.sh --lab installs it)", what, package, package);
}

// The newest /boot/vmlinuz-* by version order (6.1.0-10 after 6.1.0-9).
std::string newest_kernel() {
  std::string best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/boot", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vmlinuz-", 0) != 0) continue;
    if (best.empty() || ::strverscmp(name.c_str(), fs::path(best).filename().c_str()) > 0) best = e.path().string();
  }
  return best;
}

// SIGINT and SIGTERM stop the guest (it is in its own process group, so a terminal's Ctrl-C does
// not reach qemu) and the lab returns 130.
volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

struct StopSignals {
  struct sigaction old_int {}, old_term {};
  StopSignals() {
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int);
    ::sigaction(SIGTERM, &sa, &old_term);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
  }
};

// The lab's scratch folder (initramfs tree, consoles), removed at the end unless kept.
struct WorkFolder {
  std::string path;
  bool keep = false;
  WorkFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/allocmark-lab-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a scratch folder " + pattern + ": " + std::strerror(errno));
    path = pattern;
  }
  ~WorkFolder() {
    std::error_code ec;
    if (keep) std::cerr << "allocmark lab: kept " << path << " (initramfs, consoles)\n";
    else fs::remove_all(path, ec);
  }
};

// Forwards the guest command's output from the console capture as it grows: the lines between the
// command markers, progress redraws (\r) included; notices the markers.
class ConsoleFollower {
 public:
  explicit ConsoleFollower(std::string path) : path_(std::move(path)) {}
  void poll(std::ostream& out) {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return;
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset_ += chunk.size();
    pending_ += chunk;
    std::size_t nl;
    while ((nl = pending_.find('\n')) != std::string::npos) {
      line(pending_.substr(0, nl + 1), out);
      pending_.erase(0, nl + 1);
    }
    // A progress line redrawn with \r and no newline yet: show what is complete of it.
    if (state_ == kInCommand)
      if (std::size_t cr = pending_.rfind('\r'); cr != std::string::npos && pending_.find("allocmark-lab:") == std::string::npos) {
        out << pending_.substr(0, cr + 1) << std::flush;
        pending_.erase(0, cr + 1);
      }
  }
  bool booted() const { return !booted_line_.empty(); }
  const std::string& booted_line() const { return booted_line_; }
  bool command_ended() const { return state_ == kAfter; }

 private:
  void line(const std::string& text, std::ostream& out) {
    if (text.find(kBootedMarker) != std::string::npos) {
      booted_line_ = text.substr(text.find(kBootedMarker) + std::string(kBootedMarker).size());
      if (booted_line_.rfind(": ", 0) == 0) booted_line_.erase(0, 2);
      while (!booted_line_.empty() && (booted_line_.back() == '\n' || booted_line_.back() == '\r')) booted_line_.pop_back();
      return;
    }
    if (text.find(kCommandBegins) != std::string::npos) {
      state_ = kInCommand;
      return;
    }
    if (text.find(kCommandEnded) != std::string::npos) {
      state_ = kAfter;
      return;
    }
    if (state_ == kInCommand) out << text << std::flush;
  }
  enum State { kBefore, kInCommand, kAfter };
  std::string path_, pending_, booted_line_;
  std::size_t offset_ = 0;
  State state_ = kBefore;
};

std::vector<std::string> host_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

struct Boot {
  int status = -1;  // qemu's exit status (128+signal)
  bool timed_out = false, stopped = false, booted = false;
};

Boot boot(const std::vector<std::string>& argv, const std::string& work, double timeout_s, ConsoleFollower& console) {
  runner::Spawned qemu = runner::spawn_process(argv, host_environment(), work + "/qemu.log", {});
  ::close(qemu.report_fd);
  const auto start = os::Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  Boot b;
  bool announced = false;
  for (;;) {
    int ws = 0;
    pid_t done = ::waitpid(qemu.pid, &ws, WNOHANG);
    console.poll(std::cout);
    if (console.booted() && !announced) {
      announced = true;
      std::cerr << fmt::format("allocmark lab: the guest booted after {:.0f} s: {}\n",
                               std::chrono::duration<double>(os::Clock::now() - start).count(), console.booted_line());
    }
    if (done == qemu.pid) {
      b.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
      break;
    }
    if (g_stop || os::Clock::now() > deadline) {
      (g_stop ? b.stopped : b.timed_out) = true;
      runner::kill_group(qemu.pid);
      while (::waitpid(qemu.pid, &ws, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  console.poll(std::cout);
  b.booted = console.booted();
  return b;
}

std::string console_tail(const std::string& work) {
  std::string tail = runner::tail_of_file(work + "/console.log", 3000);
  std::string qemu = runner::tail_of_file(work + "/qemu.log", 1500);
  std::string out = "--- guest console (last lines) ---\n" + (tail.empty() ? std::string("(empty)") : tail);
  if (!qemu.empty()) out += "\n--- qemu ---\n" + qemu;
  return out;
}

json lab_meta(const LabRequest& request, const std::map<std::string, std::string>& facts, const LabOutcome& outcome,
              const std::string& kernel_image) {
  topology::Topology booted = request.topology;
  for (auto& n : booted.nodes) n.memory_bytes = node_memory(n, request.vm);
  json guest = json::object();
  json nodes = json::object();
  for (const auto& [key, value] : facts) {
    // node3_memtotal_kib, node3_cpus: one object per node; the rest as they are.
    if (key.rfind("node", 0) == 0 && key.find('_') != std::string::npos && key != fact::kNodesOnline) {
      const std::string node = key.substr(0, key.find('_')), field = key.substr(key.find('_') + 1);
      if (field == fact::kNodeMemTotalKiB) nodes[node][field] = std::strtoull(value.c_str(), nullptr, 10);
      else nodes[node][field] = value;
    } else if (key != fact::kExit && key != fact::kStoppedByTimeout) {
      guest[key] = value;
    }
  }
  guest[results::meta::lab_entry::kGuestNodes] = nodes;
  std::string guest_command;
  for (const auto& w : request.guest_prefix) guest_command += w + " ";
  guest_command += request.allocmark_run ? "allocmark" : request.program;
  for (const auto& a : request.guest_args) guest_command += " " + a;
  namespace k = results::meta::lab_entry;
  return json{{k::kTopology, topology::to_json(booted)},
              {k::kTopologyFile, request.topology_file},
              {k::kAccel, outcome.accel},
              {k::kQemu, request.vm.qemu},
              {k::kKernelImage, kernel_image},
              {k::kGuest, guest},
              {k::kCommand, request.host_command},
              {k::kGuestCommand, guest_command},
              {k::kCarried, request.carry_extra},
              {k::kTimeoutS, request.timeout_s},
              {k::kGuestDeadlineS, request.timeout_s - guest_margin_s(request.timeout_s)},
              {k::kStoppedByTimeout, outcome.stopped_by_timeout},
              {k::kNote, kLabNote}};
}

}  // namespace

Prerequisites find_prerequisites(const std::string& kernel) {
  Prerequisites p;
  auto qemu = runner::find_on_path("qemu-system-x86_64");
  if (!qemu) throw LabError(missing("qemu-system-x86_64 is not on PATH", "qemu-system-x86"));
  p.qemu = *qemu;
  p.kernel = kernel.empty() ? newest_kernel() : kernel;
  if (p.kernel.empty()) throw LabError(missing("no kernel image /boot/vmlinuz-*", "linux-image-amd64"));
  // A fifo would block qemu for ever: the one check of a user's input file.
  if (std::string problem = units::input_file_problem(p.kernel); !problem.empty())
    throw LabError(fmt::format("--kernel: {}{}", problem, problem.rfind("cannot read", 0) == 0 ? " (Debian's images are readable by "
                               "root only: run as root, or give --kernel a readable copy)" : ""));
  auto busybox = runner::find_on_path("busybox");
  for (const char* fallback : {"/usr/bin/busybox", "/bin/busybox"})
    if (!busybox && ::access(fallback, X_OK) == 0) busybox = fallback;
  if (!busybox) throw LabError(missing("busybox is not on PATH (the guest's shell and tools)", "busybox-static"));
  p.busybox = *busybox;
  if (!runner::find_on_path("cpio")) throw LabError(missing("cpio is not on PATH (packs the guest's initramfs)", "cpio"));
  if (!runner::find_on_path("ldd")) throw LabError(missing("ldd is not on PATH (finds the shared libraries to carry)", "libc-bin"));
  return p;
}

namespace {

// The guest's "/": busybox, the program and everything the request carries.
void fill_root(RootTree& root, const LabRequest& request, const Prerequisites& pre) {
  root.install(pre.busybox, kGuestBusybox);
  root.carry_libraries_of(pre.busybox);
  root.carry_with_libraries(request.program);
  for (const auto& elf : request.carry_elves) root.carry_with_libraries(elf);
  for (const auto& f : request.carry_files) root.carry(f);
  for (const auto& d : request.carry_folders) root.carry_folder(d);
  for (const auto& d : request.make_folders) root.make_folder(d);
}

// The initramfs is unpacked into the guest's memory, on its first node: a tree that would take
// most of it leaves the command nothing (and a program's cwd folder is carried whole).
void check_root_fits(const RootTree& root, const LabRequest& request) {
  const std::uint64_t first_node = node_memory(request.topology.nodes.front(), request.vm);
  if (root.bytes() > first_node / 2)
    throw LabError(fmt::format("the guest's files come to {} MiB, more than half of node {}'s {} MiB where the initramfs "
                               "lives; carry less (a program's cwd folder is carried whole) or give the nodes more memory",
                               root.bytes() >> 20, request.topology.nodes.front().id, first_node >> 20));
}

GuestCommand guest_command(const LabRequest& request, const std::string& cwd) {
  GuestCommand command;
  command.argv = request.guest_prefix;
  command.argv.push_back(request.program);
  command.argv.insert(command.argv.end(), request.guest_args.begin(), request.guest_args.end());
  command.cwd = cwd;
  command.env = request.guest_env;
  // The guest's console is a terminal, so a run there would redraw its progress line; what the
  // lab forwards of it is only one where the lab's own output is (runner::progress_redraws).
  const char* progress = std::getenv("ALLOCMARK_PROGRESS");
  command.env.emplace_back("ALLOCMARK_PROGRESS", progress && *progress ? progress : ::isatty(1) ? "redraw" : "lines");
  if (const char* path = std::getenv("PATH")) command.path = path;
  if (request.allocmark_run) {
    command.argv.push_back("--out");
    command.argv.push_back(kGuestResults);
  } else {
    command.env.emplace_back("ALLOCMARK_LAB_OUT", kGuestResults);
  }
  command.hostname = "lab-" + request.topology.name;
  return command;
}

VmOptions vm_options(const LabRequest& request, const Prerequisites& pre, const std::string& work, const std::string& initrd) {
  VmOptions vm = request.vm;
  vm.qemu = pre.qemu;
  vm.kernel = pre.kernel;
  vm.initrd = initrd;
  vm.console_log = work + "/console.log";
  vm.data_log = work + "/data.txt";
  if (request.accel_auto) vm.accel = Accel::kKvm;
  return vm;
}

// Boots until the guest's command ends; `vm.accel` becomes the accel that ran.
Boot boot_guest(const LabRequest& request, VmOptions& vm, const std::string& work, std::uint64_t root_bytes) {
  std::uint64_t memory = 0;
  int cpus = request.topology.cpu_count();
  for (const auto& n : request.topology.nodes) memory += node_memory(n, vm);
  for (;;) {
    std::cerr << fmt::format("allocmark lab: booting {} ({} nodes, {} CPUs, {} MiB, {}; initramfs {:.0f} MiB) with {}\n",
                             request.topology.name, request.topology.nodes.size(), cpus, memory >> 20, accel_name(vm.accel),
                             static_cast<double>(root_bytes) / (1 << 20), vm.kernel);
    ConsoleFollower console(vm.console_log);
    vm.guest_arguments = lab_deadline_arguments(static_cast<long long>(::time(nullptr)), request.timeout_s);
    Boot b = boot(qemu_command(request.topology, vm), work, request.timeout_s, console);
    // KVM under nested virtualisation often fails as qemu starts (an MSR it cannot set): then
    // software emulation, said on the terminal and recorded as the accel that ran.
    if (request.accel_auto && vm.accel == Accel::kKvm && !b.booted && !b.stopped) {
      std::cerr << "allocmark lab: KVM did not boot the guest (qemu exit " << b.status << "); falling back to tcg\n";
      vm.accel = Accel::kTcg;
      continue;
    }
    return b;
  }
}

// The guest's base64 results, or LabFailed saying why none came back. Not for a stopped boot.
std::string results_payload(const Boot& b, const LabRequest& request, const VmOptions& vm, const std::string& work) {
  if (b.timed_out)
    throw LabFailed(fmt::format("the guest {} within --timeout {} s; nothing was brought back\n{}",
                                b.booted ? fmt::format("did not send back its results (its own deadline at {:.0f} s did not stop "
                                                       "the command in time, or the transfer was too slow)",
                                                       request.timeout_s - guest_margin_s(request.timeout_s))
                                         : std::string("did not boot"),
                                request.timeout_s, console_tail(work)));
  std::optional<std::string> payload = data_payload(read_all(vm.data_log));
  if (!payload)
    throw LabFailed(fmt::format("the guest {} (qemu exit {}); nothing came back\n{}",
                                b.booted ? "stopped before sending its results" : "did not boot", b.status, console_tail(work)));
  return *payload;
}

void unpack_payload(const std::string& payload, const std::string& work, const std::string& staging) {
  fs::create_directories(staging);
  {
    std::ofstream b64(work + "/results.b64", std::ios::binary);
    b64 << payload;
  }
  runner::ToolResult unpack = runner::run_tool(
      {"sh", "-c", "base64 -d < " + runner::shell_quoted(work + "/results.b64") + " | tar -xzf - -C " + runner::shell_quoted(staging)});
  if (unpack.status != 0)
    throw LabFailed("the guest's results did not come back intact (base64 | tar: " + unpack.output + ")\n" + console_tail(work));
}

// The lab's record beside the results: in meta.json for an allocmark run, else lab.json.
void write_lab_record(const LabRequest& request, const std::map<std::string, std::string>& facts, const LabOutcome& outcome,
                      const std::string& kernel, const std::string& results, const std::string& work) {
  if (request.allocmark_run) {
    const std::string meta_path = results::layout::path_in(results, results::layout::kMeta);
    std::optional<json> meta = results::meta::decode(read_all(meta_path));
    if (!meta)
      throw LabFailed(fmt::format("the guest's results folder came back without a readable {}\n", results::layout::kMeta) +
                      console_tail(work));
    (*meta)[results::meta::kLab] = lab_meta(request, facts, outcome, kernel);
    results::write_file_atomically(meta_path, meta->dump(2) + "\n");
  } else {
    json lab = lab_meta(request, facts, outcome, kernel);
    if (auto it = facts.find("exit"); it != facts.end()) lab["exit"] = outcome.guest_exit;
    results::write_file_atomically(results + "/lab.json", lab.dump(2) + "\n");
  }
}

// Unpacked beside the destination, so the results folder appears there whole by one rename.
void bring_back(const std::string& payload, const LabRequest& request, const std::string& kernel, const VmOptions& vm,
                const std::string& work, LabOutcome& outcome) {
  const fs::path out = fs::absolute(request.out_dir).lexically_normal();
  fs::create_directories(out.parent_path());
  const std::string staging = out.string() + ".lab-incoming-" + std::to_string(::getpid());
  struct RemoveStaging {
    std::string path;
    ~RemoveStaging() {
      std::error_code e;
      fs::remove_all(path, e);
    }
  } remove_staging{staging};
  unpack_payload(payload, work, staging);
  const auto facts = parse_facts(read_all(staging + "/" + kGuestFacts));
  if (auto it = facts.find(fact::kExit); it != facts.end()) outcome.guest_exit = std::atoi(it->second.c_str());
  outcome.stopped_by_timeout = facts.count(fact::kStoppedByTimeout) > 0;
  const std::string results = staging + "/results";
  if (!fs::is_directory(results)) return;
  write_lab_record(request, facts, outcome, kernel, results, work);
  fs::copy_file(vm.console_log, results + "/lab-console.log");
  if (fs::exists(staging + "/dmesg.txt")) fs::copy_file(staging + "/dmesg.txt", results + "/lab-dmesg.log");
  fs::rename(results, out);
  outcome.results = true;
}

}  // namespace

LabOutcome run_lab(const LabRequest& request) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(request.out_dir, ec)))
    throw LabError(request.out_dir + " already exists: the lab brings its results back into a new folder (--out)");
  const Prerequisites pre = find_prerequisites(request.vm.kernel);

  WorkFolder work;
  work.keep = request.keep_work;
  RootTree root(work.path + "/root");
  fill_root(root, request, pre);
  const std::string cwd = fs::current_path().string();
  root.make_folder(cwd);
  check_root_fits(root, request);
  root.write("/init", init_script(guest_command(request, cwd)), 0755);
  const std::string initrd = work.path + "/initramfs.cpio";
  pack_cpio(root.dir(), initrd);

  VmOptions vm = vm_options(request, pre, work.path, initrd);
  StopSignals signals;
  const Boot b = boot_guest(request, vm, work.path, root.bytes());
  LabOutcome outcome;
  outcome.accel = accel_name(vm.accel);
  if (b.stopped) {
    std::cerr << "allocmark lab: interrupted; the guest was stopped and nothing was brought back\n";
    outcome.guest_exit = 130;
    return outcome;
  }
  bring_back(results_payload(b, request, vm, work.path), request, pre.kernel, vm, work.path, outcome);
  return outcome;
}

}  // namespace allocmark::lab
