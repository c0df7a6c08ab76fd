// `allocmark show DIR`: the results folder as a readable table, one row per workload x threads x
// allocator x phase, medians over repetitions with the min-max spread.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/results/model.h"  // median

namespace allocmark::results {

std::string render_table(const std::vector<nlohmann::json>& records);

}  // namespace allocmark::results
