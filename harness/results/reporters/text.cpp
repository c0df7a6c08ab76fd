#include "harness/results/reporters/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

namespace allocmark::results::text {
namespace {

using Format = std::function<std::string(double)>;

std::string mib(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024.0)); }
std::string ratio(double v) { return fmt::format("{:.2f}", v); }

// Counts and rates with an SI suffix: 912.9k, 5.24M.
std::string si(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// Rates that are often below one (events per million operations): three significant digits.
std::string rate(double v) { return v < 1000 ? fmt::format("{:.3g}", v) : si(v); }

// Shares from a few per million to all: "100%", "74%", "3.4%", "0.003%".
std::string share(double v) {
  const double pct = 100 * v;
  if (pct == 0) return "0%";
  return pct >= 10 ? fmt::format("{:.0f}%", pct) : pct >= 1 ? fmt::format("{:.1f}%", pct) : fmt::format("{:.2g}%", pct);
}

// Call latencies from nanoseconds to seconds.
std::string nanoseconds(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}s", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}ms", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}us", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// Phases last from microseconds to minutes: three significant digits below a second.
std::string seconds(double v) {
  if (v == 0) return "0";
  if (v < 1) return fmt::format("{:.3g}", v);
  if (v < 100) return fmt::format("{:.2f}", v);
  return fmt::format("{:.0f}", v);
}

// A workload's own figures, whatever their scale: four significant digits.
std::string general(double v) { return fmt::format("{:.4g}", v); }

Format display_format(Display d) {
  switch (d) {
    case Display::mib: return mib;
    case Display::ratio: return ratio;
    case Display::si: return si;
    case Display::rate: return rate;
    case Display::percent: return share;
    case Display::nanoseconds: return nanoseconds;
    case Display::seconds: return seconds;
  }
  return general;
}

Format metric_format(Metric m) { return display_format(metric_row(m).display); }
Column metric_column(Metric m) { return {std::string(metric_row(m).header), metric_row(m).width, true}; }

Column dimension_column(Dimension d) {
  switch (d) {
    case Dimension::workload: return {"workload", 14, false};
    case Dimension::threads: return {"thr", 3, true};
    case Dimension::allocator: return {"allocator", 18, false};
    case Dimension::phase: return {"phase", 10, false};
    case Dimension::backend: return {"backend", 10, false};
    case Dimension::host: return {"host", 16, false};
    case Dimension::node: return {"node", 4, true};
  }
  return {std::string(dimension_name(d)), 10, false};
}

// "median [min-max]", or only the median where the repetitions agree or there is one.
std::string spread_text(const Spread& s, const Format& format) {
  if (s.n == 0) return "-";
  std::string m = format(s.median);
  return s.n == 1 || s.min == s.max ? m : fmt::format("{} [{}-{}]", m, format(s.min), format(s.max));
}

std::string status_text(const Group& g) {
  std::string out;
  for (const auto& [status, n] : g.statuses) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, status);
  return out;
}

}  // namespace

std::string value_text(Metric m, double value) { return metric_format(m)(value); }
std::string spread_text(Metric m, const Spread& s) { return spread_text(s, metric_format(m)); }
std::string metric_header(Metric m) { return metric_column(m).header; }
std::string metric_note(Metric m) { return std::string(metric_row(m).note); }

std::vector<Metric> default_human_metrics() {
  return {Metric::peak_rss_bytes, Metric::rss_above_idle_over_live, Metric::ops_per_s};
}

TextReport text_report(const Grouping& grouping, const std::vector<Metric>& metrics) {
  TextReport report;
  for (Dimension d : grouping.dimensions) report.columns.push_back(dimension_column(d));
  for (Metric m : metrics) report.columns.push_back(metric_column(m));
  for (const auto& name : grouping.workload_metrics) report.columns.push_back({name, 12, true});
  for (const Group& g : grouping.groups) {
    Row row;
    for (const auto& v : g.values) row.cells.push_back(value_label(v));
    for (Metric m : metrics) row.cells.push_back(spread_text(g.metric(m), metric_format(m)));
    for (const auto& name : grouping.workload_metrics) {
      auto it = g.workload_metrics.find(name);
      row.cells.push_back(spread_text(it == g.workload_metrics.end() ? Spread{} : it->second, general));
    }
    row.status = status_text(g);
    row.errors = g.errors;
    if (g.errors_not_listed) row.errors.push_back(fmt::format("... and {} more", g.errors_not_listed));
    report.rows.push_back(std::move(row));
  }
  for (Metric m : metrics)
    if (!metric_row(m).note.empty()) report.footnote += std::string(metric_row(m).note) + "; ";
  if (!grouping.workload_metrics.empty())
    report.footnote += "workload metrics as each workload defines them (docs/workloads.md); ";
  report.footnote += "median [min-max] over repetitions.";
  return report;
}

std::string figure_value(const Ranking& r, double value) {
  if (!r.metric) return r.figure == Figure::time ? fmt::format("x{:.2f}", value) : fmt::format("{:.1f} ns", value);
  const std::string v = value_text(*r.metric, value);
  switch (metric_row(*r.metric).display) {
    case Display::mib: return v + " MiB";
    case Display::si: return v + (*r.metric == Metric::ops_per_s ? " ops/s" : "");
    case Display::seconds: return v + " s";
    case Display::nanoseconds: return v + " ns";
    case Display::ratio:
    case Display::rate:
    case Display::percent: return v;
  }
  return v;
}

namespace {
// A fraction as a percentage people read at a glance: "22%", "3.4%", "<0.1%".
std::string percent(double fraction) {
  const double pct = 100 * fraction;
  if (pct < 0.05) return "<0.1%";
  return pct < 10 ? fmt::format("{:.1f}%", pct) : fmt::format("{:.0f}%", pct);
}
}  // namespace

// Only the leader is "best": another with the same median is "tied", one a hair behind "+<0.1%".
std::string relative_text(double relative) { return relative <= 1 ? "tied" : "+" + percent(relative - 1); }

std::string lead_text(Certainty c, double margin) {
  switch (c) {
    case Certainty::clear: return "clear, by " + percent(margin);
    case Certainty::within_noise: return "within noise (" + percent(margin) + ")";
    case Certainty::one_repetition: return "one repetition (" + percent(margin) + ")";
    case Certainty::alone: return "alone";
    case Certainty::mixed: return "mixed: each clearly ahead somewhere (" + percent(margin) + " overall)";
  }
  return "";
}

std::string huge_pages_text(const Ranking& r) {
  std::string out;
  for (const auto& h : r.mostly_huge_pages)
    out += fmt::format("{}{} is +{:.1f} MiB and holds {:.1f} MiB more in huge pages", out.empty() ? "" : "; ", h.allocator,
                       h.rss_above / (1024.0 * 1024.0), h.huge_above / (1024.0 * 1024.0));
  return "mostly huge pages: " + out;
}

std::string recommendation_text(const Recommendation& rec, const std::string& dir) {
  std::string out = "Recommendation: medians over ok repetitions; +N%: that much worse than the leader\n";
  std::size_t width = 0;
  for (const auto& s : rec.scopes)
    for (const auto& r : s.headline) width = std::max(width, r.what.size());
  for (const auto& a : rec.across) width = std::max(width, a.what.size());
  for (const auto& s : rec.scopes) {
    out += fmt::format("\n{}, {} thread{}{}, {} repetition{}\n", s.workload, s.threads, s.threads == 1 ? "" : "s",
                       s.host.empty() ? "" : " on " + s.host, s.repetitions, s.repetitions == 1 ? "" : "s");
    if (s.headline.empty()) out += "  no ok cell: nothing to rank\n";
    for (const auto& r : s.headline) {
      if (!r.not_ranked.empty()) {
        out += fmt::format("  {:<{}}  {}\n", r.what, width, r.not_ranked);
        continue;
      }
      const Standing& lead = r.standings[0];
      std::string others;
      for (std::size_t i = 1; i < r.standings.size(); ++i)
        others += fmt::format("{}{} {}", i > 1 ? ", " : "", r.standings[i].allocator, relative_text(r.standings[i].relative));
      out += fmt::format("  {:<{}}  {} {}  {}{}\n", r.what, width, lead.allocator, figure_value(r, lead.spread.median),
                         lead_text(r.certainty, r.margin()), others.empty() ? "" : "  | " + others);
      if (!r.mostly_huge_pages.empty()) out += fmt::format("  {:<{}}  {}\n", "", width, huge_pages_text(r));
    }
  }
  if (!rec.across.empty()) {
    out += fmt::format("\nAcross the run (geomean over workloads and thread counts of each allocator's standing; x1.00: best everywhere)\n");
    for (const auto& a : rec.across) {
      const AcrossStanding& lead = a.standings[0];
      std::string others;
      for (std::size_t i = 1; i < a.standings.size(); ++i)
        others += fmt::format("{}{} x{:.2f}", i > 1 ? ", " : "", a.standings[i].allocator, a.standings[i].relative);
      out += fmt::format("  {:<{}}  {} x{:.2f}, best in {} of {} ({} clearly)  {}  | {}\n", a.what, width, lead.allocator,
                         lead.relative, lead.best, a.scopes, lead.clearly_best, lead_text(a.certainty, a.margin()), others);
    }
  }
  out += fmt::format("\nEvery phase and figure: allocmark show {}\n", dir);
  return out;
}

}  // namespace allocmark::results::text
