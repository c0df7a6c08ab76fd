#include "harness/results/show.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace allocmark::results {
using nlohmann::json;

namespace {

std::string mib(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024.0)); }

std::string si(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// "median [min-max]" or just the median for a single value.
template <class F>
std::string spread(const std::vector<double>& v, F format) {
  if (v.empty()) return "-";
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  std::string m = format(median(v));
  return v.size() == 1 || lo == hi ? m : fmt::format("{} [{}-{}]", m, format(lo), format(hi));
}

struct Row {
  std::vector<double> peak_rss, ratio, ops_per_s;
  std::map<std::string, int> statuses;
  std::vector<std::string> errors;
};

}  // namespace

std::string render_table(const std::vector<json>& records) {
  // Insertion order of groups follows the records, so the table reads like the matrix.
  using Key = std::tuple<std::string, int, std::string, std::string>;  // workload, threads, allocator, phase
  std::vector<Key> order;
  std::map<Key, Row> rows;
  auto row_for = [&](const Key& k) -> Row& {
    if (!rows.count(k)) order.push_back(k);
    return rows[k];
  };
  for (const auto& r : records) {
    std::string status = r.value("status", "?");
    std::string workload = r.value("workload", "?"), allocator = r.value("allocator", "?");
    int threads = r.value("threads", 0);
    const json phases = r.value("phases", json::array());
    if (status != "ok" || phases.empty()) {
      Row& row = row_for({workload, threads, allocator, "(cell)"});
      row.statuses[status]++;
      if (r.contains("error") && r["error"].is_string()) row.errors.push_back(r["error"]);
      if (status != "ok") continue;
    }
    double idle = r.value("idle_rss_bytes", 0.0);
    for (const auto& p : phases) {
      Row& row = row_for({workload, threads, allocator, p.value("name", "?")});
      row.statuses[status]++;
      if (p["peak_rss_bytes"].is_number()) row.peak_rss.push_back(p["peak_rss_bytes"]);
      double live = p.value("peak_live_bytes", 0.0);
      if (live > 0 && p["peak_rss_bytes"].is_number())
        row.ratio.push_back((p["peak_rss_bytes"].get<double>() - idle) / live);
      row.ops_per_s.push_back(p.value("ops_per_s", 0.0));
    }
  }
  std::string out = fmt::format("{:<14} {:>3} {:<18} {:<10} {:>24} {:>20} {:>24}  {}\n", "workload", "thr", "allocator",
                                "phase", "peak RSS MiB", "RSS-idle/live", "ops/s", "status");
  std::string last_group;
  for (const auto& k : order) {
    const Row& row = rows[k];
    std::string status;
    for (const auto& [s, n] : row.statuses) status += fmt::format("{}{} {}", status.empty() ? "" : ", ", n, s);
    out += fmt::format("{:<14} {:>3} {:<18} {:<10} {:>24} {:>20} {:>24}  {}\n", std::get<0>(k), std::get<1>(k),
                       std::get<2>(k), std::get<3>(k), spread(row.peak_rss, mib),
                       spread(row.ratio, [](double v) { return fmt::format("{:.2f}", v); }), spread(row.ops_per_s, si),
                       status);
    for (const auto& e : row.errors) out += fmt::format("{:>50}  ! {}\n", "", e.substr(0, 200));
  }
  out += "\npeak RSS: exact per phase (VmHWM after a clear_refs reset); RSS-idle/live: (peak RSS - idle baseline) / "
         "peak live requested bytes; median [min-max] over repetitions.\n";
  return out;
}

}  // namespace allocmark::results
