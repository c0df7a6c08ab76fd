// What runs inside the lab's guest and how its results come back. The guest's /init (a busybox
// shell script) mounts the kernel's file systems, switches NUMA balancing off, records what the
// guest kernel sees, runs the allocmark command, then sends the results folder back over the
// second serial port (ttyS1) as a gzip'd tar in base64 between two marker lines.
//
// Why a serial port: the 8250 UART is built into Debian's kernel, so nothing has to be loaded in
// the guest (virtio, 9p and block devices are all modules, which would tie the lab to a module
// tree matching the kernel image); the port is the guest's alone (the kernel's console is ttyS0),
// the file on the host is complete once qemu exits, and gzip's CRC and length check the transfer.
// It is slow (tens of KiB/s under emulation) but results folders of lab-sized matrices are small.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace allocmark::lab {

// Console lines the host reads (ttyS0).
inline constexpr const char* kBootedMarker = "allocmark-lab: booted";
inline constexpr const char* kCommandBegins = "allocmark-lab: command begins";
inline constexpr const char* kCommandEnded = "allocmark-lab: command ended";
inline constexpr const char* kDeadlineMarker = "allocmark-lab: deadline";
// Framing of the data channel (ttyS1).
inline constexpr const char* kDataBegin = "ALLOCMARK-LAB-DATA-BEGIN";
inline constexpr const char* kDataEnd = "ALLOCMARK-LAB-DATA-END";

// Where the guest keeps its busybox, the command's results folder and its own facts.
inline constexpr const char* kGuestBusybox = "/lab/busybox";
inline constexpr const char* kGuestOut = "/lab/out";
inline constexpr const char* kGuestResults = "/lab/out/results";
inline constexpr const char* kGuestFacts = "guest.env";  // in kGuestOut: key=value lines
inline constexpr const char* kGuestStoppedFlag = "stopped-by-timeout";  // in kGuestOut: the deadline stopped the command

// The keys of guest.env that the host reads by name; /init writes them and lab_meta keeps the
// rest as they are in meta.json's lab.guest. A node's facts are NODE_KEY (node3_memtotal_kib),
// NODE being the kernel's own name for it under /sys/devices/system/node.
namespace fact {
inline constexpr const char* kExit = "exit";                            // the command's exit status
inline constexpr const char* kStoppedByTimeout = "stopped_by_timeout";  // present when the deadline stopped it
inline constexpr const char* kNodesOnline = "nodes_online";             // kept as it is, not a node's fact
inline constexpr const char* kNodeMemTotalKiB = "memtotal_kib";         // read as a number
}  // namespace fact

// Seconds between the guest deadline's SIGTERM and its SIGKILL of a command that ignored it.
inline constexpr int kGuestStopGrace_s = 5;

struct GuestCommand {
  std::vector<std::string> argv;  // argv[0] is the absolute path of allocmark in the guest
  std::string cwd;                // the host's working folder, recreated in the guest
  std::string hostname;           // the records' host
  std::vector<std::pair<std::string, std::string>> env;  // exported before the command (ALLOCMARK_CONFIG_DIR)
  std::string path;  // the host's PATH: the command finds carried programs where the host does, busybox's after them
};

// The guest's /init. It reads its deadline from the kernel command line (lab_deadline_arguments).
std::string init_script(const GuestCommand& command);

// The margin the guest keeps before the host's --timeout to stop its command and send back what
// it finished: a tenth of the timeout, at least 10 s (SIGTERM, the grace, dmesg and a small
// results folder over the serial port) and at most 120 s.
double guest_margin_s(double timeout_s);
// The kernel command line's words that tell /init its deadline: the host's clock at qemu's start
// and the seconds from there (timeout less the margin).
std::string lab_deadline_arguments(long long launched_epoch_s, double timeout_s);

// The base64 text between the data markers of ttyS1's capture (carriage returns dropped), or
// nullopt when the begin or end marker is missing (the guest never got that far).
std::optional<std::string> data_payload(const std::string& channel);

// guest.env's key=value lines.
std::map<std::string, std::string> parse_facts(const std::string& text);

}  // namespace allocmark::lab
