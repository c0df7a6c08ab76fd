#include "harness/runner/program_phases.h"

#include <algorithm>
#include <optional>

#include "harness/metrics/phase_record.h"
#include "harness/record/event_keys.h"
#include "harness/record/phase_keys.h"
#include "harness/results/safe_text.h"

namespace allocmark::runner {

using nlohmann::json;
namespace event = record::event;
namespace event_key = record::event_key;

namespace {
constexpr std::size_t kMaxLine = 256;

// A phase name goes into records, tables and chart labels: up to 64 bytes of valid UTF-8 without
// spaces, quotes, backslashes or control characters.
bool valid_phase_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || results::valid_utf8(name) != name) return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= ' ' || u == 0x7F || c == '"' || c == '\\';
  });
}
}  // namespace

ProgramPhases::ProgramPhases(pid_t pid, int64_t start_ns, std::vector<int> node_ids)
    : pid_(pid), node_ids_(std::move(node_ids)), begin_ns_(start_ns) {
  if (metrics::ThpEvents t; metrics::read_thp_events(t)) thp_at_begin_ = t;
}

namespace {
std::optional<metrics::ThpEvents> thp_events_now() {
  metrics::ThpEvents t;
  return metrics::read_thp_events(t) ? std::optional(t) : std::nullopt;
}
}  // namespace

// `resident_by_node`: bytes by node number (a list), or null when numa_maps could not be read;
// `system_huge_by_node` the system's AnonHugePages by node number (null entries: not read).
json ProgramPhases::phase_event(int64_t end_ns, const json& peak, const json& end_rss, bool exact,
                                std::optional<uint64_t> anon_huge, const std::optional<metrics::ThpEvents>& thp_now,
                                const metrics::TaskCounters& now, const metrics::SchedSnapshot* sched_now,
                                const json& resident_by_node, const json& system_huge_by_node) const {
  auto bytes = [](const json& v) { return v.is_number() ? std::optional<uint64_t>(v.get<uint64_t>()) : std::nullopt; };
  metrics::PhaseFigures f;
  f.name = current_;
  f.begin_ns = begin_ns_;
  f.end_ns = end_ns;
  f.peak_rss_bytes = bytes(peak);
  f.end_rss_bytes = bytes(end_rss);
  f.peak_rss_reset = exact;
  f.counters = metrics::counters_since(now, at_begin_);  // a program counts no operations or live bytes
  f.anon_huge_bytes = anon_huge;
  if (thp_now && thp_at_begin_) f.thp_events = metrics::thp_events_since(*thp_now, *thp_at_begin_);
  metrics::PhaseContention c;
  c.latency_absent = "program cell: its allocation calls happen inside the program, which allocmark does not instrument";
  if (sched_now) c.sched = sched_now->since(sched_at_begin_);
  json phase = metrics::phase_record(f);
  phase["contention"] = metrics::contention_record(c);
  json nodes = json::array();
  // Lists by node number; null: not read.
  auto by_node = [](const json& list, int id) -> std::optional<uint64_t> {
    if (!list.is_array()) return std::nullopt;
    if (id >= static_cast<int>(list.size())) return 0;
    const json& v = list[static_cast<std::size_t>(id)];
    return v.is_number() ? std::optional<uint64_t>(v.get<uint64_t>()) : std::nullopt;
  };
  for (int id : node_ids_) {
    metrics::PhaseNodeFigures n;
    n.node = id;
    n.resident_bytes = by_node(resident_by_node, id);
    // A node past the list's end was not read (not: had none), unlike numa_maps' counts.
    if (system_huge_by_node.is_array() && id < static_cast<int>(system_huge_by_node.size()))
      n.system_anon_huge_bytes = by_node(system_huge_by_node, id);
    nodes.push_back(metrics::node_record(n));
  }
  phase["nodes"] = nodes;
  return {{event_key::event, event::phase_end}, {event_key::phase, phase}};
}

json ProgramPhases::close_phase(const std::string& next, int64_t now_ns) {
  metrics::MemAndNodes snapshot{};
  const metrics::MemStatus& mem = snapshot.mem;
  metrics::TaskCounters now{};
  bool read_ok = !ended_ && metrics::read_mem_and_nodes(pid_, snapshot) && metrics::read_task_counters(pid_, now);
  const bool sched_ok = !ended_ && sched_now_.read(pid_);
  const json by_node = !ended_ && snapshot.nodes_ok ? json(metrics::residency_list(snapshot.nodes)) : json(nullptr);
  uint64_t huge = 0;
  const std::optional<uint64_t> anon_huge =
      !ended_ && metrics::read_anon_huge_bytes(pid_, huge) ? std::optional<uint64_t>(huge) : std::nullopt;
  // Right after the program's own: the system's huge pages per node (every process's) hold the program's.
  // Not once the program has been reaped: its huge pages are gone (null, as its numa_maps).
  metrics::SystemNodeHuge system_huge;
  if (!ended_) metrics::read_system_node_huge(node_ids_.data(), node_ids_.size(), system_huge);
  const json huge_by_node = ended_ ? json(nullptr) : metrics::system_node_huge_list(system_huge);
  const std::optional<metrics::ThpEvents> thp_now = thp_events_now();
  json ev = read_ok ? phase_event(now_ns, mem.hwm_bytes, mem.rss_bytes, reset_ok_, anon_huge, thp_now, now,
                                  sched_ok ? &sched_now_ : nullptr, by_node, huge_by_node)
                    : phase_event(now_ns, nullptr, nullptr, false, anon_huge, thp_now, at_begin_, nullptr, by_node, huge_by_node);
  thp_at_begin_ = thp_now;
  reset_ok_ = read_ok && metrics::reset_peak_rss(pid_);
  if (read_ok) at_begin_ = now;
  if (sched_ok) std::swap(sched_at_begin_, sched_now_);
  current_ = next;
  begin_ns_ = now_ns;
  return ev;
}

std::vector<json> ProgramPhases::feed(const char* data, std::size_t size, int64_t now_ns) {
  std::vector<json> closed;
  partial_.append(data, size);
  std::size_t nl;
  while ((nl = partial_.find('\n')) != std::string::npos) {
    std::string line = partial_.substr(0, nl);
    partial_.erase(0, nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string prefix = "phase ";
    std::string name = line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : "";
    if (!valid_phase_name(name)) {
      if (bad_lines_.size() < 10) bad_lines_.push_back(results::valid_utf8(line.substr(0, kMaxLine)));
      answers_ += "error\n";
      continue;
    }
    if (!marked_) {
      marked_ = true;
      current_ = trace::kBeforeFirstMark;
    }
    closed.push_back(close_phase(names_.open(name), now_ns));
    answers_ += "ok\n";
  }
  if (partial_.size() > kMaxLine) {  // no newline in sight: not a phase line
    if (bad_lines_.size() < 10) bad_lines_.push_back(results::valid_utf8(partial_.substr(0, kMaxLine)));
    partial_.clear();
  }
  return closed;
}

json ProgramPhases::finish(const json& exit_event, const rusage& totals, int64_t end_ns, uint64_t sampled_peak) {
  metrics::TaskCounters total = metrics::counters_of(totals);
  // Counters can only grow; wait4 counts every thread while the phase edges saw the main thread's
  // context switches, so a difference below zero is clamped rather than reported negative.
  total.voluntary_ctx_switches = std::max(total.voluntary_ctx_switches, at_begin_.voluntary_ctx_switches);
  total.involuntary_ctx_switches = std::max(total.involuntary_ctx_switches, at_begin_.involuntary_ctx_switches);
  total.minor_faults = std::max(total.minor_faults, at_begin_.minor_faults);
  total.major_faults = std::max(total.major_faults, at_begin_.major_faults);
  total.user_s = std::max(total.user_s, at_begin_.user_s);
  total.sys_s = std::max(total.sys_s, at_begin_.sys_s);
  bool reported = exit_event.is_object();
  json peak = reported ? exit_event.value(record::phase_key::peak_rss_bytes, json()) : json();
  json end_rss = reported ? exit_event.value(record::phase_key::end_rss_bytes, json()) : json();
  // Never before the phase began: its mark may have been read only after the program exited.
  int64_t t_end = std::max(reported ? exit_event.value(event_key::t_ns, end_ns) : end_ns, begin_ns_);
  const bool exact = !peak.is_null();
  if (peak.is_null() && sampled_peak > 0) peak = sampled_peak;
  // The program has gone, and its threads' scheduler figures with it: the last phase has none.
  // The program has exited: its huge pages are gone with it (the last phase has none). The
  // system's per node was read by the companion as the program exited (its pages still mapped);
  // a reading here, after the exit, would no longer hold them, so without the report it is null.
  return phase_event(t_end, peak, end_rss, reset_ok_ && exact, std::nullopt, thp_events_now(), total, nullptr,
                     reported ? exit_event.value(event_key::numa_resident_bytes, json()) : json(),
                     reported ? exit_event.value(event_key::system_anon_huge_bytes, json()) : json());
}

}  // namespace allocmark::runner
