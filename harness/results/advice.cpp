#include "harness/results/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "harness/metrics/derived.h"

namespace allocmark::results {

namespace {

Pick pick(const std::vector<Candidate>& all, const std::function<double(const Candidate&)>& value,
          const std::function<const Spread*(const Candidate&)>& spread) {
  std::vector<const Candidate*> ranked;
  for (const auto& c : all)
    if (c.ok) ranked.push_back(&c);
  std::stable_sort(ranked.begin(), ranked.end(), [&](auto* a, auto* b) { return value(*a) < value(*b); });
  Pick p;
  if (ranked.empty()) return p;
  p.allocator = ranked[0]->allocator;
  p.value = value(*ranked[0]);
  auto range = [&](const Candidate& c) {
    const Spread* s = spread(c);
    return s ? relative_range(s->min, s->max, s->median) : 0.0;
  };
  p.spread = range(*ranked[0]);
  p.has_spread = spread(*ranked[0]) != nullptr;
  if (ranked.size() > 1) {
    p.runner_up = ranked[1]->allocator;
    p.runner_up_value = value(*ranked[1]);
    p.margin = relative_margin(p.value, p.runner_up_value);
    p.within_spread = p.margin < std::max(p.spread, range(*ranked[1]));
  }
  return p;
}

}  // namespace

Advice advise(const Model& model) {
  Advice out;
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::vector<double>> peaks, walls;
  std::map<std::string, std::string> why;
  for (const auto& cell : model.cells()) {
    const CellIdentity& id = model.identity(cell);
    out.workload = id.workload;
    auto [it, fresh] = index.try_emplace(id.allocator, out.candidates.size());
    if (fresh) out.candidates.push_back(Candidate{id.allocator});
    Candidate& c = out.candidates[it->second];
    ++c.cells;
    if (!cell.ok() || cell.phases.empty()) {
      if (!why.count(id.allocator)) why[id.allocator] = cell.status + (cell.error ? ": " + *cell.error : "");
      continue;
    }
    PhaseValues whole = whole_cell(cell);
    auto peak = metric_value(Metric::peak_rss_bytes, cell, whole), wall = metric_value(Metric::wall_s, cell, whole);
    if (!peak || !wall) continue;
    ++c.ok;
    peaks[id.allocator].push_back(*peak);
    walls[id.allocator].push_back(*wall);
  }
  double best_peak = 0, best_wall = 0;
  for (auto& c : out.candidates) {
    if (!c.ok) {
      out.failed.push_back(c.allocator + " (" + why[c.allocator] + ")");
      continue;
    }
    c.peak_rss_bytes = spread_of(peaks[c.allocator]);
    c.wall_s = spread_of(walls[c.allocator]);
    best_peak = out.any ? std::min(best_peak, c.peak_rss_bytes.median) : c.peak_rss_bytes.median;
    best_wall = out.any ? std::min(best_wall, c.wall_s.median) : c.wall_s.median;
    out.any = true;
  }
  for (auto& c : out.candidates)
    if (c.ok) c.tradeoff = tradeoff_score(c.peak_rss_bytes.median, best_peak, c.wall_s.median, best_wall);
  out.lowest_peak_rss = pick(out.candidates, [](const Candidate& c) { return c.peak_rss_bytes.median; },
                             [](const Candidate& c) { return &c.peak_rss_bytes; });
  out.fastest = pick(out.candidates, [](const Candidate& c) { return c.wall_s.median; },
                     [](const Candidate& c) { return &c.wall_s; });
  out.tradeoff = pick(out.candidates, [](const Candidate& c) { return c.tradeoff; },
                      [](const Candidate&) -> const Spread* { return nullptr; });
  return out;
}

std::string render_advice(const Advice& a) {
  constexpr double kMiB = 1024.0 * 1024.0;
  std::string out = fmt::format("{}: {} allocators, medians over ok repetitions [min-max]\n\n", a.workload, a.candidates.size());
  out += fmt::format("  {:<18} {:>6}  {:>26}  {:>24}  {:>9}\n", "allocator", "ok", "peak RSS MiB", "wall s", "trade-off");
  for (const auto& c : a.candidates) {
    if (!c.ok) {
      out += fmt::format("  {:<18} {:>6}  {:>26}  {:>24}  {:>9}\n", c.allocator, fmt::format("0/{}", c.cells), "-", "-", "-");
      continue;
    }
    out += fmt::format("  {:<18} {:>6}  {:>26}  {:>24}  {:>9.3f}\n", c.allocator, fmt::format("{}/{}", c.ok, c.cells),
                       fmt::format("{:.1f} [{:.1f}-{:.1f}]", c.peak_rss_bytes.median / kMiB, c.peak_rss_bytes.min / kMiB,
                                   c.peak_rss_bytes.max / kMiB),
                       fmt::format("{:.3f} [{:.3f}-{:.3f}]", c.wall_s.median, c.wall_s.min, c.wall_s.max), c.tradeoff);
  }
  if (!a.any) return out + "\nno allocator ran the program successfully: no recommendation\n";
  out += "\nrecommendation:\n";
  for (const auto& l : pick_lines(a)) out += fmt::format("  {:<16} {}\n", l.what, l.text);
  if (!a.failed.empty()) {
    out += "\nnot ok under:";
    for (const auto& f : a.failed) out += "\n  " + f;
    out += "\n";
  }
  return out;
}

std::vector<PickLine> pick_lines(const Advice& a) {
  constexpr double kMiB = 1024.0 * 1024.0;
  if (!a.any) return {};
  auto text = [](const Pick& p, const std::string& value) {
    std::string s = fmt::format("{}  ({}", p.allocator, value);
    if (p.runner_up.empty()) return s + "; the only allocator that ran)";
    s += fmt::format("; {:.1f} % better than {}", 100 * p.margin, p.runner_up);
    s += p.has_spread ? fmt::format(", its repetitions spread {:.1f} %)", 100 * p.spread) : std::string(")");
    if (p.within_spread) s += " - within the repetitions' spread: no clear winner";
    return s;
  };
  return {
      {"lowest peak RSS", &a.lowest_peak_rss, text(a.lowest_peak_rss, fmt::format("{:.1f} MiB", a.lowest_peak_rss.value / kMiB))},
      {"fastest", &a.fastest, text(a.fastest, fmt::format("{:.3f} s", a.fastest.value))},
      {"best trade-off", &a.tradeoff,
       text(a.tradeoff, fmt::format("score {:.3f}, peak RSS and wall time as ratios to the best, summed", a.tradeoff.value))},
  };
}

}  // namespace allocmark::results
