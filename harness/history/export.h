// The whole of a history as one JSON document (`allocmark history export DB --format json`;
// docs/history.md "history export"): every run with its labels, machine and the values of each of
// its cells, every cell's identity. Lossless (what the file holds, nothing computed) and stable: an
// ordering that does not depend on insertion order where the content is the same, fields only ever
// added, so another tool can read it or keep it under version control.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/history/store.h"

namespace allocmark::history {

inline constexpr int kExportFormat = 1;

nlohmann::ordered_json export_json(const HistoryDb& db);

}  // namespace allocmark::history
