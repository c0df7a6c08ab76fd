#include "harness/gate/mann_whitney.h"

#include <cmath>
#include <cstdint>
#include <functional>

namespace allocmark::gate {

namespace {

double u_statistic(const std::vector<double>& before, const std::vector<double>& after) {
  double u = 0;
  for (double a : after)
    for (double b : before) u += a > b ? 1.0 : a == b ? 0.5 : 0.0;
  return u;
}

double binomial(std::size_t n, std::size_t k) {
  double r = 1;
  for (std::size_t i = 1; i <= k; ++i) r = r * static_cast<double>(n - k + i) / static_cast<double>(i);
  return r;
}

}  // namespace

double smallest_reachable_p(std::size_t n_before, std::size_t n_after) {
  if (n_before == 0 || n_after == 0) return 1.0;
  return 1.0 / binomial(n_before + n_after, n_before);
}

double mann_whitney_greater_p(const std::vector<double>& before, const std::vector<double>& after) {
  const std::size_t n = before.size(), m = after.size();
  if (n == 0 || m == 0) return 1.0;
  const double observed = u_statistic(before, after);
  if (binomial(n + m, m) <= 1e6) {
    std::vector<double> pooled(before);
    pooled.insert(pooled.end(), after.begin(), after.end());
    std::uint64_t at_least = 0, total = 0;
    std::vector<double> chosen, rest;
    // Every choice of which m pooled values are "after".
    std::function<void(std::size_t, std::size_t)> choose = [&](std::size_t index, std::size_t left) {
      if (left == 0 || pooled.size() - index == left) {
        std::vector<double> a(chosen), b(rest);
        for (std::size_t i = index; i < pooled.size(); ++i) (left ? a : b).push_back(pooled[i]);
        ++total;
        if (u_statistic(b, a) >= observed - 1e-9) ++at_least;
        return;
      }
      chosen.push_back(pooled[index]);
      choose(index + 1, left - 1);
      chosen.pop_back();
      rest.push_back(pooled[index]);
      choose(index + 1, left);
      rest.pop_back();
    };
    choose(0, m);
    return static_cast<double>(at_least) / static_cast<double>(total);
  }
  const double mean = n * m / 2.0, sd = std::sqrt(n * m * (n + m + 1) / 12.0);
  const double z = (observed - 0.5 - mean) / sd;
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

}  // namespace allocmark::gate
