// What `gate --confirm` reruns, and where each part of it comes from (docs/gate.md, "What --confirm
// runs"). Everything a rerun executes or loads (the allocator's library and environment, the
// workload and its parameters, a program's command, folder, input and environment) comes from the
// baseline, which the team committed, checked against the matrix file the user names
// (--confirm-matrix) when there is one; never from the results folder being judged, which may be an
// artifact of anyone's pull request. A flagged cell whose results ran something other than what the
// baseline names is not rerun: running what the results name would run code from the folder, and
// running what the baseline names would not confirm what the results measured.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/gate/baseline.h"
#include "harness/gate/verdict.h"
#include "harness/matrix/config.h"
#include "harness/matrix/plan.h"

namespace allocmark::gate {

struct ConfirmSources {
  const RunSummary& baseline;
  std::string baseline_path;
  const RunSummary& results;  // only compared with what the baseline names, never run
  std::string results_path;
  // The built-in variants (configs/variants.toml): the allocators of a baseline written before
  // baselines kept each cell's backend and library are resolved by name against them.
  const matrix::MatrixFile& variants;
  const std::optional<matrix::MatrixFile>& matrix;  // --confirm-matrix
};

struct ConfirmationPlan {
  // The flagged cells that can be rerun, each with as many repetitions as the baseline holds,
  // interleaved (every cell's first repetition, then every second one, ...) so that a drift of the
  // machine during the rerun touches every cell alike.
  matrix::Plan plan;
  std::map<std::string, std::string> not_rerun;  // cell name ("jemalloc size_mix t2") -> why
  std::vector<std::string> notes;                // for the user: where the settings came from
};

ConfirmationPlan plan_confirmation(const std::vector<Verdict>& flagged, const ConfirmSources& sources);

}  // namespace allocmark::gate
