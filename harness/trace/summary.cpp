#include "harness/trace/summary.h"

#include "harness/trace/header_keys.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <queue>

#include "harness/trace/phase_marks.h"


namespace allocmark::trace {
namespace {

using nlohmann::json;

// Request sizes in power-of-two classes: [0, 16], (16, 32], ... (2^k, 2^(k+1)].
int size_class(uint64_t size) {
  int k = 4;
  while (k < 40 && (uint64_t{1} << k) < size) ++k;
  return k;
}

// Lifetimes by decade of microseconds.
constexpr std::array<const char*, 8> kLifetimeLabels{"< 10 us", "< 100 us", "< 1 ms", "< 10 ms", "< 100 ms", "< 1 s", "< 10 s", ">= 10 s"};
int lifetime_class(uint64_t us) {
  int k = 0;
  for (uint64_t limit = 10; k < 7 && us >= limit; limit *= 10) ++k;
  return k;
}

}  // namespace

namespace {

// What summarize() adds up over the threads' events, merged by time.
class TraceTally {
 public:
  explicit TraceTally(const Trace& t)
      : born_(t.max_id + 1), phases_(t.phase_names.size() + 1), peak_(phases_, 0), phase_events_(phases_, 0),
        per_thread_(t.threads.size(), {0, 0, 0}) {}

  // The threads' events merged by time: a cursor per thread, the next event of each in a heap.
  void walk(const Trace& t) {
    struct Head {
      uint64_t time_us;
      std::size_t thread;
      bool operator>(const Head& o) const { return time_us != o.time_us ? time_us > o.time_us : thread > o.thread; }
    };
    std::vector<EventCursor> cursors;
    std::vector<Event> next(t.threads.size());
    std::vector<uint64_t> epoch(t.threads.size(), 0);
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
    for (std::size_t i = 0; i < t.threads.size(); ++i) {
      cursors.push_back(t.threads[i].cursor());
      if (cursors[i].next(next[i])) heap.push({next[i].time_us, i});
    }
    while (!heap.empty()) {
      std::size_t i = heap.top().thread;
      heap.pop();
      const Event& e = next[i];
      end_us_ = std::max(end_us_, e.time_us);
      ++per_thread_[i][0];
      std::size_t phase = std::min<std::size_t>(epoch[i], phases_ - 1);
      if (e.op == Op::Phase) {
        epoch[i] = e.epoch;
        phase = std::min<std::size_t>(e.epoch, phases_ - 1);
        // A phase's peak starts at what was live when it began.
        peak_[phase] = std::max(peak_[phase], live_);
      } else {
        count(e, i, phase);
      }
      if (cursors[i].next(next[i])) heap.push({next[i].time_us, i});
    }
  }

  json to_json(const Trace& t) const {
    json j;
    j["program"] = t.header.value(header_key::program, json());
    j["events"] = t.events;
    j["duration_s"] = static_cast<double>(end_us_) / 1e6;
    j["threads"] = t.threads.size();
    uint64_t objects = 0;
    for (const auto& mine : per_thread_) objects += mine[1];
    j["objects"] = objects;  // blocks allocated (ids are given out in blocks per thread, so not max_id)
    j["failed_allocations"] = failed_;
    j["frees"] = frees_;
    j["cross_thread_frees"] = cross_thread_;
    j["unknown_frees"] = t.unknown_frees;
    j["lost_events"] = t.lost_events;
    j["ended"] = t.ended;
    j["live_at_end_bytes"] = live_;
    add_tables(j, t);
    return j;
  }

 private:
  void count(const Event& e, std::size_t thread, std::size_t phase) {
    ++phase_events_[phase];
    auto& c = calls_[std::string(op_name(e.op))];
    ++c.first;
    c.second += e.size;  // requested, or freed: a free records its block's size
    if (is_alloc(e.op) || e.op == Op::Realloc) {
      sizes_[size_class(e.size)] += 1;
      if (e.id) {
        born_[e.id] = {e.time_us, static_cast<uint32_t>(thread)};
        auto& mine = per_thread_[thread];
        ++mine[1];
        mine[2] += e.size;
        live_ += static_cast<int64_t>(e.size);
      } else if (e.size) {
        ++failed_;  // realloc(p, 0) returning NULL freed p; it did not fail
      }
    }
    if (is_free(e.op)) died(e, thread, e.id, e.size);
    if (realloc_frees_old(e)) died(e, thread, e.old_id, e.old_size);
    peak_[phase] = std::max(peak_[phase], live_);
  }

  void died(const Event& e, std::size_t thread, uint64_t id, uint64_t size) {
    if (!id) return;
    ++frees_;
    live_ -= static_cast<int64_t>(size);
    if (born_[id].thread != thread) ++cross_thread_;
    lifetimes_[lifetime_class(e.time_us - std::min(e.time_us, born_[id].time_us))] += 1;
  }

  void add_tables(json& j, const Trace& t) const {
    j["calls"] = json::array();
    for (const auto& [op, c] : calls_) j["calls"].push_back({{"function", op}, {"calls", c.first}, {"bytes", c.second}});
    j["sizes"] = json::array();
    for (const auto& [k, n] : sizes_)
      j["sizes"].push_back({{"up_to_bytes", k >= 40 ? json() : json(uint64_t{1} << k)}, {"allocations", n}});
    j["lifetimes"] = json::array();
    for (std::size_t k = 0; k < lifetimes_.size(); ++k) j["lifetimes"].push_back({{"lifetime", kLifetimeLabels[k]}, {"frees", lifetimes_[k]}});
    j["phases"] = json::array();
    const std::vector<std::string> names = phase_names_for_marks(t.phase_names);  // as a replay of it names them
    for (std::size_t p = 0; p < phases_; ++p) {
      j["phases"].push_back({{"name", names[p]}, {"events", phase_events_[p]}, {"peak_live_bytes", peak_[p]}});
    }
    json threads = json::array();
    for (std::size_t i = 0; i < t.threads.size(); ++i)
      threads.push_back({{"thread", i}, {"events", per_thread_[i][0]}, {"allocations", per_thread_[i][1]}, {"requested_bytes", per_thread_[i][2]}});
    j["per_thread"] = threads;
  }

  struct Born {
    uint64_t time_us = 0;
    uint32_t thread = 0;
  };
  std::vector<Born> born_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> calls_;  // op -> count, requested bytes
  std::map<int, uint64_t> sizes_;
  std::array<uint64_t, kLifetimeLabels.size()> lifetimes_{};
  uint64_t cross_thread_ = 0, failed_ = 0, frees_ = 0, end_us_ = 0;
  int64_t live_ = 0;
  std::size_t phases_;
  std::vector<int64_t> peak_;
  std::vector<uint64_t> phase_events_;
  std::vector<std::array<uint64_t, 3>> per_thread_;  // events, allocations, bytes
};

}  // namespace

json summarize(const Trace& t) {
  TraceTally tally(t);
  tally.walk(t);
  return tally.to_json(t);
}

std::string summary_text(const json& s) {
  std::string out;
  char line[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  auto bytes = [](int64_t b) {
    double v = static_cast<double>(std::max<int64_t>(b, 0));
    const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    for (; v >= 1024 && u < 4; ++u) v /= 1024;
    char text[32];
    std::snprintf(text, sizeof text, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return std::string(text);
  };
  std::string program = s["program"].is_string() ? s["program"].get<std::string>() : "?";
  add("program: %s\n", program.c_str());
  add("events: %llu over %.3f s, %zu thread(s), %llu objects\n", (unsigned long long)s["events"].get<uint64_t>(),
      s["duration_s"].get<double>(), s["threads"].get<std::size_t>(), (unsigned long long)s["objects"].get<uint64_t>());
  add("frees: %llu, of them across threads: %llu; frees of blocks from before the recording: %llu\n",
      (unsigned long long)s["frees"].get<uint64_t>(), (unsigned long long)s["cross_thread_frees"].get<uint64_t>(),
      (unsigned long long)s["unknown_frees"].get<uint64_t>());
  if (!s["ended"].get<bool>()) out += "the trace is cut off: the program did not end by exit or _exit (killed?)\n";
  if (s["lost_events"].get<uint64_t>()) add("lost events: %llu\n", (unsigned long long)s["lost_events"].get<uint64_t>());
  if (s["failed_allocations"].get<uint64_t>()) add("failed allocations: %llu\n", (unsigned long long)s["failed_allocations"].get<uint64_t>());
  out += "\ncalls (bytes requested; for frees, freed):\n";
  for (const auto& c : s["calls"])
    add("  %-26s %12llu calls  %12s\n", c["function"].get<std::string>().c_str(), (unsigned long long)c["calls"].get<uint64_t>(),
        bytes(c["bytes"].get<int64_t>()).c_str());
  out += "\nrequest sizes (allocations):\n";
  uint64_t total = 0;
  for (const auto& b : s["sizes"]) total += b["allocations"].get<uint64_t>();
  for (const auto& b : s["sizes"]) {
    uint64_t n = b["allocations"].get<uint64_t>();
    std::string label = b["up_to_bytes"].is_null() ? "larger" : "<= " + bytes(b["up_to_bytes"].get<int64_t>());
    add("  %-12s %12llu  %5.1f%%\n", label.c_str(), (unsigned long long)n, total ? 100.0 * n / total : 0.0);
  }
  out += "\nlifetimes (frees):\n";
  for (const auto& b : s["lifetimes"])
    add("  %-10s %12llu\n", b["lifetime"].get<std::string>().c_str(), (unsigned long long)b["frees"].get<uint64_t>());
  add("  never freed: %s live at the end\n", bytes(s["live_at_end_bytes"].get<int64_t>()).c_str());
  out += "\nphases (peak live requested bytes):\n";
  for (const auto& p : s["phases"])
    add("  %-20s %12llu events  %12s\n", p["name"].get<std::string>().c_str(), (unsigned long long)p["events"].get<uint64_t>(),
        bytes(p["peak_live_bytes"].get<int64_t>()).c_str());
  if (s["threads"].get<std::size_t>() > 1) {
    out += "\nthreads:\n";
    for (const auto& t : s["per_thread"])
      add("  %-4zu %12llu events  %12llu allocations  %12s\n", t["thread"].get<std::size_t>(),
          (unsigned long long)t["events"].get<uint64_t>(), (unsigned long long)t["allocations"].get<uint64_t>(),
          bytes(t["requested_bytes"].get<int64_t>()).c_str());
  }
  return out;
}

}  // namespace allocmark::trace
