// `allocmark show`'s table from records already in memory: the results model and the table
// reporter (reporters/reporter.h) over them. Readers of a results folder use Model::load and
// render_report directly; this stays for callers holding records (the driver's end-of-run table).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::results {

std::string render_table(const std::vector<nlohmann::json>& records);

}  // namespace allocmark::results
