#include "harness/results/recommendation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace allocmark::results {

namespace {

constexpr std::string_view kNsPerOpPrefix = "ns_per_op.";

bool better(double a, double b, bool lower_is_better) { return lower_is_better ? a < b : a > b; }

// One figure's values per allocator, in the scope's allocator order.
struct Values {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> of;
  void add(const std::string& allocator, double v) {
    if (!of.count(allocator)) order.push_back(allocator);
    of[allocator].push_back(v);
  }
};

Ranking rank(Figure figure, std::string what, std::optional<Metric> metric, bool lower_is_better, const Values& values) {
  Ranking r{figure, std::move(what), metric, lower_is_better, {}, Certainty::alone, ""};
  for (const auto& allocator : values.order) r.standings.push_back({allocator, spread_of(values.of.at(allocator)), 1});
  std::stable_sort(r.standings.begin(), r.standings.end(), [&](const Standing& a, const Standing& b) {
    return better(a.spread.median, b.spread.median, lower_is_better);
  });
  if (r.standings.empty()) return r;
  const double best = r.standings[0].spread.median;
  for (auto& s : r.standings) {
    double num = lower_is_better ? s.spread.median : best, den = lower_is_better ? best : s.spread.median;
    s.relative = num > 0 && den > 0 ? num / den : 1;
  }
  if (r.standings.size() > 1) r.certainty = separation(r.standings[0].spread, r.standings[1].spread, lower_is_better);
  return r;
}

// Which allocators hold more RSS than the leader mostly in huge pages: above the leader by more
// than one huge page, at least half of it the difference of their huge-page bytes (medians).
void note_huge_pages(Ranking& r, const Values& huge) {
  constexpr double kHugePage = 2.0 * 1024 * 1024;
  if (r.standings.size() < 2 || !huge.of.count(r.standings[0].allocator)) return;
  const double leader_huge = spread_of(huge.of.at(r.standings[0].allocator)).median;
  for (std::size_t i = 1; i < r.standings.size(); ++i) {
    const Standing& s = r.standings[i];
    if (!huge.of.count(s.allocator)) continue;
    const double rss_above = s.spread.median - r.standings[0].spread.median;
    const double huge_above = spread_of(huge.of.at(s.allocator)).median - leader_huge;
    if (rss_above > kHugePage && huge_above >= 0.5 * rss_above) r.mostly_huge_pages.push_back({s.allocator, rss_above, huge_above});
  }
}

double geomean(const std::vector<double>& v) {
  double log_sum = 0;
  for (double x : v) log_sum += std::log(x);
  return std::exp(log_sum / static_cast<double>(v.size()));
}

// The time headline from per-item figures (phases' ops/s or benchmarks' ns/op): per cell, the
// geometric mean over the items it has of its time relative to the item's best median.
Ranking time_score(const std::vector<Ranking>& items, const std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>>& cells,
                   std::string what) {
  std::map<std::string, const Ranking*> by_item;
  for (const auto& r : items) by_item[r.what] = &r;
  Values scores;
  for (const auto& [allocator, figures] : cells) {
    std::vector<double> relative;
    for (const auto& [item, value] : figures) {
      auto it = by_item.find(item);
      if (it == by_item.end() || value <= 0) continue;
      const Ranking& r = *it->second;
      const double best = r.standings[0].spread.median;
      relative.push_back(r.lower_is_better ? value / best : best / value);
    }
    if (!relative.empty()) scores.add(allocator, geomean(relative));
  }
  return rank(Figure::time, std::move(what), std::nullopt, true, scores);
}

struct ScopeCells {
  ScopeRecommendation scope;
  std::vector<std::pair<std::string, const CellResult*>> cells;  // (allocator label, ok cell)
};

bool has_benchmarks(const ScopeCells& sc, const Model& model) {
  for (const auto& [allocator, cell] : sc.cells)
    for (const auto& p : cell->phases)
      for (const auto& [index, v] : p.workload)
        if (model.workload_metric_name(index).starts_with(kNsPerOpPrefix)) return true;
  return false;
}

// A scope's ok cells gathered per figure and allocator, then ranked (rank_scope).
class ScopeTally {
 public:
  ScopeTally(const Model& model, bool benchmarks) : model_(model), benchmarks_(benchmarks) {}

  void add(const std::string& allocator, const CellResult& cell) {
    ++reps_[allocator];
    const PhaseValues whole = whole_cell(cell);
    if (auto v = metric_value(Metric::peak_rss_bytes, cell, whole)) peak_.add(allocator, *v);
    if (auto v = metric_value(Metric::end_rss_bytes, cell, whole)) held_end_.add(allocator, *v);
    if (auto v = metric_value(Metric::rss_after_100ms_bytes, cell, whole)) held_settled_.add(allocator, *v);
    add_huge_pages(allocator, cell);
    if (auto v = metric_value(Metric::rss_above_idle_over_live, cell, whole)) over_live_.add(allocator, *v);
    if (auto v = metric_value(Metric::wall_s, cell, whole)) wall_.add(allocator, *v);
    std::vector<std::pair<std::string, double>> figures;
    for (const auto& p : cell.phases) {
      if (benchmarks_) add_benchmarks(allocator, p, figures);
      else add_rate(allocator, cell, p, figures);
    }
    per_cell_.emplace_back(allocator, std::move(figures));
  }

  void rank_into(ScopeRecommendation& s) {
    for (const auto& [a, n] : reps_) s.repetitions = std::max(s.repetitions, n);
    rank_memory(s);
    for (const auto& item : items_) {
      if (!item_worked_[item]) continue;  // idle phases: their rate is the workload's, not the allocator's
      if (benchmarks_)
        s.details.push_back(rank(Figure::benchmark_ns_per_op, item, std::nullopt, true, item_values_[item]));
      else
        s.details.push_back(rank(Figure::phase_ops_per_s, item, Metric::ops_per_s, false, item_values_[item]));
    }
    // Phases every allocator ran in under kShortestTimedPhaseS are shown but not in the time
    // headline: their rate is timer and scheduler noise (rss_budget's release, 0.2-0.6 ms, read
    // 57k to 185k ops/s across allocators and counted as much as a one-second build).
    std::vector<Ranking> timed;
    std::vector<std::string> too_short;
    for (const auto& r : s.details) {
      if (timed_phase(r.what)) timed.push_back(r);
      else too_short.push_back(r.what);
    }
    if (!timed.empty()) {
      const std::size_t n = timed.size();
      std::string what = benchmarks_ ? fmt::format("time (geomean of {} {} ns/op)", n, n == 1 ? "benchmark's" : "benchmarks'")
                                     : fmt::format("time (geomean of {} {} ops/s)", n, n == 1 ? "phase's" : "phases'");
      if (!too_short.empty())
        what.insert(what.size() - 1, fmt::format("; {} under {:g} ms left out", too_short.size(), kShortestTimedPhaseS * 1000));
      s.headline.push_back(time_score(timed, per_cell_, std::move(what)));
    } else if (!wall_.order.empty() && !rates_left_out_) {
      // A program: its phase does no counted operations, so its wall time is the figure.
      s.headline.push_back(rank(Figure::time, "wall time", Metric::wall_s, true, wall_));
    }
  }

 private:
  // The phase holding the cell's peak (its huge pages at that phase's end: the closest reading to
  // the peak there is) and the last phase, whose end is the held RSS.
  void add_huge_pages(const std::string& allocator, const CellResult& cell) {
    if (cell.phases.empty()) return;
    const PhaseValues* at_peak = &cell.phases.front();
    for (const auto& p : cell.phases)
      if (metric_value(Metric::peak_rss_bytes, cell, p).value_or(0) > metric_value(Metric::peak_rss_bytes, cell, *at_peak).value_or(0))
        at_peak = &p;
    if (auto v = metric_value(Metric::anon_huge_bytes, cell, *at_peak)) peak_huge_.add(allocator, *v);
    if (auto v = metric_value(Metric::anon_huge_bytes, cell, cell.phases.back())) held_huge_.add(allocator, *v);
  }

  void add_item(const std::string& allocator, const std::string& item, double v, bool worked,
                std::vector<std::pair<std::string, double>>& figures) {
    if (!item_values_.count(item)) items_.push_back(item);
    item_values_[item].add(allocator, v);
    if (worked) item_worked_[item] = true;
    figures.emplace_back(item, v);
  }

  void add_benchmarks(const std::string& allocator, const PhaseValues& p, std::vector<std::pair<std::string, double>>& figures) {
    for (const auto& [index, v] : p.workload) {
      const std::string& name = model_.workload_metric_name(index);
      if (!name.starts_with(kNsPerOpPrefix)) continue;
      add_item(allocator, name.substr(kNsPerOpPrefix.size()), v, true, figures);
    }
  }

  // Whether some allocator's median wall time in phase `item` reached kShortestTimedPhaseS (a
  // benchmark's ns/op is timed by its own repetitions: always).
  bool timed_phase(const std::string& item) const {
    auto it = item_wall_.find(item);
    if (benchmarks_ || it == item_wall_.end()) return true;
    for (const auto& [allocator, walls] : it->second.of)
      if (spread_of(walls).median >= kShortestTimedPhaseS) return true;
    return false;
  }

  void add_rate(const std::string& allocator, const CellResult& cell, const PhaseValues& p,
                std::vector<std::pair<std::string, double>>& figures) {
    auto rate = metric_value(Metric::ops_per_s, cell, p);
    auto ops = p.get(Field::ops);
    if (!rate) return;
    if (auto wall = metric_value(Metric::wall_s, cell, p)) item_wall_[p.name].add(allocator, *wall);
    const CellIdentity& id = model_.identity(cell);
    if (!ops_per_s_not_a_speed(id.workload, id.params, p.name).empty()) {
      rates_left_out_ = true;
      return;
    }
    add_item(allocator, p.name, *rate, ops && *ops > 0, figures);
  }

  void rank_memory(ScopeRecommendation& s) const {
    if (!peak_.order.empty()) {
      s.headline.push_back(rank(Figure::peak_rss, "peak RSS", Metric::peak_rss_bytes, true, peak_));
      note_huge_pages(s.headline.back(), peak_huge_);
    }
    // Held RSS at +100 ms of the return curve where every cell has one (docs/report.md says why that
    // point), else at the last phase's end for all: one point for every allocator of a scope.
    const bool settled = !held_settled_.order.empty() && held_settled_.order.size() == held_end_.order.size() &&
                         std::all_of(held_end_.order.begin(), held_end_.order.end(), [&](const std::string& a) {
                           return held_settled_.of.count(a) && held_settled_.of.at(a).size() == held_end_.of.at(a).size();
                         });
    if (settled) {
      s.headline.push_back(rank(Figure::held_rss, std::string(kHeldAt100ms), Metric::rss_after_100ms_bytes, true, held_settled_));
      note_huge_pages(s.headline.back(), held_huge_);
    } else if (!held_end_.order.empty()) {
      s.headline.push_back(rank(Figure::held_rss, std::string(kHeldAtEnd), Metric::end_rss_bytes, true, held_end_));
      note_huge_pages(s.headline.back(), held_huge_);
    }
    if (over_live_.order.empty()) return;
    Ranking r = rank(Figure::rss_over_live, "RSS-idle/live", Metric::rss_above_idle_over_live, true, over_live_);
    // Physical memory cannot hold less than the bytes that are live: a median under 1.0 means the
    // workload asked for memory it never touched, and the ratio then ranks nothing.
    for (const auto& st : r.standings)
      if (st.spread.median < 1.0) {
        r.not_ranked = fmt::format("{} at {:.2f}, under the floor of 1.0: allocations never touched, so not ranked",
                                   st.allocator, st.spread.median);
        break;
      }
    s.headline.push_back(std::move(r));
  }

  const Model& model_;
  const bool benchmarks_;
  Values peak_, held_end_, held_settled_, over_live_, wall_;
  Values peak_huge_, held_huge_;  // huge-page bytes at the end of the phase each RSS figure comes from
  std::map<std::string, std::size_t> reps_;
  // Per phase name (or benchmark) in first-seen order: values, and whether any cell did work in it.
  std::vector<std::string> items_;
  std::map<std::string, Values> item_values_;
  std::map<std::string, bool> item_worked_;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>> per_cell_;
  bool rates_left_out_ = false;  // some phase's ops/s is the workload's schedule, not a speed
  std::map<std::string, Values> item_wall_;  // each phase's wall times, per allocator (timed_phase)
};

void rank_scope(ScopeCells& sc, const Model& model) {
  ScopeTally tally(model, has_benchmarks(sc, model));
  for (const auto& [allocator, cell] : sc.cells) tally.add(allocator, *cell);
  tally.rank_into(sc.scope);
}

AcrossRanking across(Figure figure, const std::vector<ScopeRecommendation>& scopes) {
  AcrossRanking out{figure, "", {}, 0, Certainty::alone};
  std::vector<const Ranking*> rankings;
  for (const auto& s : scopes)
    if (const Ranking* r = s.find(figure); r && r->not_ranked.empty() && !r->standings.empty()) rankings.push_back(r);
  out.scopes = rankings.size();
  if (rankings.size() < 2) return out;
  out.what = figure == Figure::time ? "time" : rankings[0]->what;
  for (const Ranking* r : rankings)
    if (figure == Figure::held_rss && r->what != out.what)
      out.what = fmt::format("{} where cells have it, else {}", kHeldAt100ms, kHeldAtEnd);
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> relatives;
  std::map<std::string, AcrossStanding> standing;
  for (const Ranking* r : rankings)
    for (std::size_t i = 0; i < r->standings.size(); ++i) {
      const Standing& st = r->standings[i];
      auto [it, fresh] = standing.try_emplace(st.allocator, AcrossStanding{st.allocator});
      if (fresh) order.push_back(st.allocator);
      relatives[st.allocator].push_back(st.relative);
      ++it->second.scopes;
      if (i == 0) {
        ++it->second.best;
        if (r->certainty == Certainty::clear) ++it->second.clearly_best;
      }
    }
  for (const auto& a : order) {
    AcrossStanding st = standing[a];
    if (st.scopes != rankings.size()) continue;  // not comparable over the whole run
    st.relative = geomean(relatives[a]);
    out.standings.push_back(st);
  }
  std::stable_sort(out.standings.begin(), out.standings.end(),
                   [](const AcrossStanding& a, const AcrossStanding& b) { return a.relative < b.relative; });
  if (out.standings.size() < 2) return out;
  const std::string& lead = out.standings[0].allocator;
  const std::string& next = out.standings[1].allocator;
  std::size_t lead_wins = 0, next_wins = 0, single = 0;
  for (const Ranking* r : rankings) {
    const Standing *a = nullptr, *b = nullptr;
    for (const auto& st : r->standings) {
      if (st.allocator == lead) a = &st;
      if (st.allocator == next) b = &st;
    }
    Certainty ab = separation(a->spread, b->spread, r->lower_is_better);
    Certainty ba = separation(b->spread, a->spread, r->lower_is_better);
    if (ab == Certainty::one_repetition) ++single;
    else if (ab == Certainty::clear) ++lead_wins;
    else if (ba == Certainty::clear) ++next_wins;
  }
  out.certainty = single == rankings.size() ? Certainty::one_repetition
                  : lead_wins > 0 && next_wins == 0 ? Certainty::clear
                  : lead_wins > 0                   ? Certainty::mixed
                                                    : Certainty::within_noise;
  return out;
}

}  // namespace

std::string_view certainty_name(Certainty c) {
  switch (c) {
    case Certainty::clear: return "clear";
    case Certainty::within_noise: return "within noise";
    case Certainty::one_repetition: return "one repetition";
    case Certainty::alone: return "alone";
    case Certainty::mixed: return "mixed";
  }
  return "";
}

std::string_view certainty_text(Certainty c) {
  switch (c) {
    case Certainty::clear: return "clear: every repetition of the leader is better than every one of the runner-up";
    case Certainty::within_noise: return "within noise: the repetitions' min-max ranges overlap, so the order may be chance";
    case Certainty::one_repetition: return "one repetition: no spread to judge by";
    case Certainty::alone: return "alone: no other allocator has this figure";
    case Certainty::mixed: return "mixed: each beats the other beyond noise on some workload, so the choice depends on the workload";
  }
  return "";
}

Certainty separation(const Spread& a, const Spread& b, bool lower_is_better) {
  if (a.n < 2 || b.n < 2) return Certainty::one_repetition;
  // The better one's worst repetition against the other's best.
  const double a_worst = lower_is_better ? a.max : a.min;
  const double b_best = lower_is_better ? b.min : b.max;
  return better(a_worst, b_best, lower_is_better) ? Certainty::clear : Certainty::within_noise;
}

const Ranking* ScopeRecommendation::find(Figure f) const {
  for (const auto& r : headline)
    if (r.figure == f) return &r;
  return nullptr;
}

Recommendation recommend(const Model& model) {
  const Grouping grouping = model.group({Dimension::workload, Dimension::threads, Dimension::allocator});
  auto position = [&](Dimension d) -> std::optional<std::size_t> {
    auto it = std::find(grouping.dimensions.begin(), grouping.dimensions.end(), d);
    if (it == grouping.dimensions.end()) return std::nullopt;
    return static_cast<std::size_t>(it - grouping.dimensions.begin());
  };
  const std::size_t workload = *position(Dimension::workload), threads = *position(Dimension::threads),
                    allocator = *position(Dimension::allocator);
  const auto host = position(Dimension::host);

  std::vector<ScopeCells> scopes;
  std::map<std::tuple<std::string, int, std::string>, std::size_t> index;
  for (std::size_t i = 0; i < model.cells().size(); ++i) {
    const CellResult& cell = model.cells()[i];
    const Group& g = grouping.groups[grouping.cell_groups[i]];
    std::tuple<std::string, int, std::string> key{value_label(g.values[workload]), g.values[threads].get<int>(),
                                                  host ? value_label(g.values[*host]) : ""};
    auto [it, fresh] = index.try_emplace(key, scopes.size());
    if (fresh) {
      ScopeCells sc;
      std::tie(sc.scope.workload, sc.scope.threads, sc.scope.host) = key;
      scopes.push_back(std::move(sc));
    }
    if (cell.ok() && !cell.phases.empty()) scopes[it->second].cells.emplace_back(value_label(g.values[allocator]), &cell);
  }
  Recommendation out;
  for (auto& sc : scopes) {
    rank_scope(sc, model);
    out.scopes.push_back(std::move(sc.scope));
  }
  for (Figure f : {Figure::peak_rss, Figure::held_rss, Figure::time})
    if (AcrossRanking a = across(f, out.scopes); a.standings.size() > 1) out.across.push_back(std::move(a));
  return out;
}

}  // namespace allocmark::results
