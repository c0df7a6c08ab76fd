// The parent-sampled RSS timeline of one cell: at most `cap` points, halving its resolution
// whenever the cap is reached so a long cell's timeline stays evenly spaced.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace allocmark::runner {

class Timeline {
 public:
  explicit Timeline(int cap) : cap_(std::max(cap, 2)) {}
  void add(double t_ms, uint64_t rss) {
    if (++seen_ % stride_ != 0) return;
    points_.push_back({t_ms, static_cast<double>(rss)});
    if (static_cast<int>(points_.size()) >= cap_) {
      std::vector<std::array<double, 2>> kept;
      for (std::size_t i = 0; i < points_.size(); i += 2) kept.push_back(points_[i]);
      points_.swap(kept);
      stride_ *= 2;
    }
  }
  nlohmann::json to_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : points_) out.push_back({std::round(p[0] * 10) / 10, static_cast<uint64_t>(p[1])});
    return out;
  }
  uint64_t max_rss() const {
    double m = 0;
    for (const auto& p : points_) m = std::max(m, p[1]);
    return static_cast<uint64_t>(m);
  }
  // The largest sample taken in [from_ms, to_ms]; 0 when none was.
  uint64_t max_rss_between(double from_ms, double to_ms) const {
    double m = 0;
    for (const auto& p : points_)
      if (p[0] >= from_ms && p[0] <= to_ms) m = std::max(m, p[1]);
    return static_cast<uint64_t>(m);
  }
  std::size_t size() const { return points_.size(); }

 private:
  int cap_;
  uint64_t stride_ = 1, seen_ = 0;
  std::vector<std::array<double, 2>> points_;
};

}  // namespace allocmark::runner
