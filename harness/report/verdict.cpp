#include "harness/report/verdict.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace allocmark::report {

namespace {

using results::Dimension;

std::size_t position(const results::Grouping& grouping, Dimension d) {
  auto it = std::find(grouping.dimensions.begin(), grouping.dimensions.end(), d);
  if (it == grouping.dimensions.end())
    throw std::invalid_argument("verdicts need groups by workload, threads and allocator");
  return static_cast<std::size_t>(it - grouping.dimensions.begin());
}

bool better(double a, double b, bool lower_is_better) { return lower_is_better ? a < b : a > b; }

Noise noise_of(const Contender& leader, const Contender& runner_up, bool lower_is_better) {
  if (leader.spread.n < 2 || runner_up.spread.n < 2) return Noise::one_repetition;
  // The leader's worst repetition against the runner-up's best.
  double leader_worst = lower_is_better ? leader.spread.max : leader.spread.min;
  double runner_best = lower_is_better ? runner_up.spread.min : runner_up.spread.max;
  return better(leader_worst, runner_best, lower_is_better) ? Noise::separated : Noise::overlapping;
}

}  // namespace

const std::vector<results::Metric>& verdict_metrics() {
  static const std::vector<results::Metric> metrics{results::Metric::peak_rss_bytes, results::Metric::rss_above_idle_over_live,
                                                    results::Metric::ops_per_s};
  return metrics;
}

std::vector<Verdict> verdicts(const results::Grouping& grouping) {
  if (std::find(grouping.dimensions.begin(), grouping.dimensions.end(), Dimension::phase) != grouping.dimensions.end())
    throw std::invalid_argument("verdicts compare whole cells: group without the phase dimension");
  const std::size_t workload = position(grouping, Dimension::workload);
  const std::size_t threads = position(grouping, Dimension::threads);
  const std::size_t allocator = position(grouping, Dimension::allocator);
  auto host_it = std::find(grouping.dimensions.begin(), grouping.dimensions.end(), Dimension::host);
  const bool by_host = host_it != grouping.dimensions.end();

  // (workload, threads, host) in order of first appearance -> its groups.
  std::vector<std::tuple<std::string, int, std::string>> order;
  std::map<std::tuple<std::string, int, std::string>, std::vector<const results::Group*>> members;
  for (const auto& g : grouping.groups) {
    std::tuple<std::string, int, std::string> key{
        results::value_label(g.values[workload]), g.values[threads].get<int>(),
        by_host ? results::value_label(g.values[static_cast<std::size_t>(host_it - grouping.dimensions.begin())]) : ""};
    auto [it, inserted] = members.try_emplace(key);
    if (inserted) order.push_back(key);
    it->second.push_back(&g);
  }

  std::vector<Verdict> out;
  for (const auto& key : order) {
    for (const results::Metric metric : verdict_metrics()) {
      const bool lower_is_better = results::metric_row(metric).better == results::Better::lower;
      Verdict v{std::get<0>(key), std::get<1>(key), std::get<2>(key), metric, lower_is_better, {}, {}, 0, {},
                Noise::no_contest};
      std::vector<Contender> contenders;
      for (const auto* g : members[key])
        if (g->metric(metric).n > 0)
          contenders.push_back({results::value_label(g->values[allocator]), g->metric(metric)});
      // Stable: equal medians keep the matrix's order.
      std::stable_sort(contenders.begin(), contenders.end(), [&](const Contender& a, const Contender& b) {
        return better(a.spread.median, b.spread.median, lower_is_better);
      });
      v.contenders = contenders.size();
      if (!contenders.empty()) v.leader = contenders[0];
      if (contenders.size() >= 2) {
        v.runner_up = contenders[1];
        double lead_median = contenders[0].spread.median, runner_median = contenders[1].spread.median;
        double numerator = lower_is_better ? runner_median : lead_median;
        double denominator = lower_is_better ? lead_median : runner_median;
        if (numerator > 0 && denominator > 0) v.lead = numerator / denominator;
        v.noise = noise_of(contenders[0], contenders[1], lower_is_better);
      }
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::string_view noise_text(Noise noise) {
  switch (noise) {
    case Noise::separated: return "clear: every repetition of the leader is better than every one of the runner-up";
    case Noise::overlapping: return "within noise: the min-max ranges overlap";
    case Noise::one_repetition: return "one repetition: no spread to judge by";
    case Noise::no_contest: return "no contest: fewer than two allocators have this figure";
  }
  return "";
}

}  // namespace allocmark::report
