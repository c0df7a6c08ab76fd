// `allocmark merge DIR... -o OUT`: several results folders (runs on other hosts or clusters) become
// one folder that every reader takes as it takes a single run. Each record keeps its host (from the
// record, else its folder's meta.json) and gains `origin`, the folder it came from, so attempts
// supersede each other only within their own run and the same cell run twice stays two cells. The
// model's identity includes the host, so cells of different machines are never pooled; meta.json
// keeps every host's machine description (`machines`) and each source's description (`merged_from`).
// A record that two sources both hold (a copied folder, a merged folder and one of its sources:
// the same record_id, key and attempt, or the same content for records from before ids) is kept
// once and said, so merging a folder with itself never makes repetitions out of nothing; two
// records of other cells that share an id are both kept, and said.
//
// Refused (exit 2, nothing written): an existing non-empty OUT, a folder given twice or holding a
// run in progress, invalid lines, and one host described differently by two folders (its cells
// would pool across machines that differ).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace allocmark::runner {

struct MergeOutcome {
  std::size_t cells = 0, folders = 0, hosts = 0;
  std::size_t repeated = 0;  // records two sources both held, kept once
  // "" or what RecordIdCollisions says: records of other cells or attempts sharing a record_id,
  // each kept (a record's identity is its id with its key and attempt, record_copy_identity).
  std::string id_collisions;
};

// Merges `dirs` into the new folder `out` (built beside it and renamed into place); `command` is
// recorded in its meta.json runs. Refusals are matrix::ConfigError (exit 2), nothing written.
MergeOutcome merge_folders(const std::vector<std::string>& dirs, const std::string& out, const std::string& command);

}  // namespace allocmark::runner
