#include "harness/lab/guest.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "harness/runner/process.h"

namespace allocmark::lab {

namespace {

// Mounts, the NUMA balancing check and the facts file, then the markers the host waits for.
std::string init_boot_part(const GuestCommand& command) {
  return fmt::format(R"INIT(#!{busybox} sh
# The lab guest's init, written by `allocmark lab` (harness/lab/guest.cpp): run one allocmark
# command on this kernel's NUMA topology and send its results folder back over ttyS1.
{busybox} mkdir -p /lab/bin /proc /sys /dev /tmp /root {results}
{busybox} --install -s /lab/bin
export PATH=/lab/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root TMPDIR=/tmp LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
hostname {hostname}
# Balancing migrates pages behind the allocator's back; move_pages would then report glibc's small
# blocks as absent. The kernel command line already says numa_balancing=disable; this is the check.
echo 0 > /proc/sys/kernel/numa_balancing
facts={out}/{facts}
{{
  echo "kernel=$(uname -r)"
  echo "{nodes_online}=$(cat /sys/devices/system/node/online)"
  echo "cpus_online=$(cat /sys/devices/system/cpu/online)"
  echo "numa_balancing=$(cat /proc/sys/kernel/numa_balancing)"
  echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
  for n in /sys/devices/system/node/node[0-9]*; do
    echo "$(basename $n)_{memtotal_kib}=$(awk '/MemTotal/ {{print $4}}' $n/meminfo)"
    echo "$(basename $n)_cpus=$(cat $n/cpulist)"
  done
}} > $facts
echo "{booted}: nodes $(cat /sys/devices/system/node/online), CPUs $(cat /sys/devices/system/cpu/online), NUMA balancing $(cat /proc/sys/kernel/numa_balancing), kernel $(uname -r)"
echo "{begins}"
)INIT",
                     fmt::arg("busybox", kGuestBusybox), fmt::arg("out", kGuestOut), fmt::arg("results", kGuestResults),
                     fmt::arg("facts", kGuestFacts), fmt::arg("hostname", runner::shell_quoted(command.hostname)),
                     fmt::arg("booted", kBootedMarker), fmt::arg("begins", kCommandBegins),
                     fmt::arg("nodes_online", fact::kNodesOnline), fmt::arg("memtotal_kib", fact::kNodeMemTotalKiB));
}

std::string init_watchdog_part() {
  return fmt::format(R"INIT(# The lab's deadline, a margin before the host's --timeout, so that what the command finished
# still comes back: at it the command gets SIGTERM (allocmark run records its finished cells and
# exits 130), then SIGKILL after a grace. allocmark_launched is the host's clock as qemu started
# and allocmark_budget the seconds from there; a guest clock that disagrees falls back to uptime.
launched=$(sed -n 's/.*allocmark_launched=\([0-9]*\).*/\1/p' /proc/cmdline)
budget=$(sed -n 's/.*allocmark_budget=\([0-9]*\).*/\1/p' /proc/cmdline)
left=
if [ -n "$launched" ] && [ -n "$budget" ]; then
  now=$(date +%s)
  if [ "$now" -ge "$launched" ] && [ "$now" -le $((launched + budget)) ]; then left=$((launched + budget - now))
  else left=$((budget - $(cut -d. -f1 /proc/uptime))); fi
fi
# The watchdog learns the command's process from a file: the command itself runs in the
# foreground, since a background job of a shell without job control would start (and pass on to
# every worker and program it runs) with SIGINT and SIGQUIT ignored.
pidfile={out}/command.pid
watchdog=
if [ -n "$left" ]; then
  (
    [ "$left" -gt 0 ] && sleep "$left"
    touch {out}/{stopped}
    echo "{deadline}: the lab's timeout is near; stopping the command to send back what it finished"
    while [ ! -s $pidfile ]; do sleep 1; done
    kill -TERM $(cat $pidfile) 2>/dev/null
    sleep {grace}
    kill -KILL $(cat $pidfile) 2>/dev/null
  ) &
  watchdog=$!
fi
)INIT",
                     fmt::arg("out", kGuestOut), fmt::arg("stopped", kGuestStoppedFlag), fmt::arg("deadline", kDeadlineMarker),
                     fmt::arg("grace", kGuestStopGrace_s));
}

// The command, its facts, and the results folder sent back over ttyS1 before the guest powers off.
std::string init_command_part(const GuestCommand& command) {
  std::string argv;
  for (const auto& a : command.argv) argv += (argv.empty() ? "" : " ") + runner::shell_quoted(a);
  std::string exports;
  for (const auto& [name, value] : command.env) exports += "export " + name + "=" + runner::shell_quoted(value) + "\n";
  return fmt::format(R"INIT(# The command sees the host's PATH (programs are carried to where the host finds them), then busybox.
( export PATH={path}
{exports}cd {cwd} && exec {busybox} sh -c 'echo $$ > "$0"; exec "$@"' $pidfile {argv} )
rc=$?
[ -n "$watchdog" ] && kill $watchdog 2>/dev/null
[ -e {out}/{stopped} ] && echo "{stopped_fact}=1" >> $facts
echo "{exit_fact}=$rc" >> $facts
echo "{ended} (exit $rc)"
# The whole kernel log (OOM kills, allocation failures, migrations), not only what the console showed.
dmesg > {out}/dmesg.txt
stty -F /dev/ttyS1 raw -echo
{{
  echo {data_begin}
  tar -C {out} -czf - . | base64
  echo {data_end}
}} > /dev/ttyS1
echo "allocmark-lab: results sent"
sync
poweroff -f
)INIT",
                     fmt::arg("busybox", kGuestBusybox), fmt::arg("out", kGuestOut), fmt::arg("facts", kGuestFacts),
                     fmt::arg("ended", kCommandEnded), fmt::arg("cwd", runner::shell_quoted(command.cwd)), fmt::arg("argv", argv),
                     fmt::arg("exports", exports), fmt::arg("data_begin", kDataBegin), fmt::arg("data_end", kDataEnd),
                     fmt::arg("path", runner::shell_quoted(command.path.empty() ? "/lab/bin" : command.path + ":/lab/bin")),
                     fmt::arg("stopped", kGuestStoppedFlag), fmt::arg("stopped_fact", fact::kStoppedByTimeout),
                     fmt::arg("exit_fact", fact::kExit));
}

}  // namespace

std::string init_script(const GuestCommand& command) {
  return init_boot_part(command) + init_watchdog_part() + init_command_part(command);
}

double guest_margin_s(double timeout_s) { return std::clamp(timeout_s / 10, 10.0, 120.0); }

std::string lab_deadline_arguments(long long launched_epoch_s, double timeout_s) {
  const long long budget = std::max(0LL, static_cast<long long>(timeout_s - guest_margin_s(timeout_s)));
  return fmt::format("allocmark_launched={} allocmark_budget={}", launched_epoch_s, budget);
}

std::optional<std::string> data_payload(const std::string& channel) {
  const std::string begin = std::string(kDataBegin), end = std::string(kDataEnd);
  std::size_t b = channel.find(begin);
  if (b == std::string::npos) return std::nullopt;
  b += begin.size();
  std::size_t e = channel.find(end, b);
  if (e == std::string::npos) return std::nullopt;
  std::string out;
  for (std::size_t i = b; i < e; ++i)
    if (channel[i] != '\r') out += channel[i];
  return out;
}

std::map<std::string, std::string> parse_facts(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace allocmark::lab
