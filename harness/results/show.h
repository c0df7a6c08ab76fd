// `allocmark show DIR`: the results folder as a readable table, one row per workload x threads x
// allocator x phase, medians over repetitions with the min-max spread.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace allocmark::results {

std::string render_table(const std::vector<nlohmann::json>& records);

// Median of a non-empty list (the mean of the middle two for an even count).
double median(std::vector<double> values);

}  // namespace allocmark::results
