// The report's "Versions" section (issue 43, docs/report.md): where a results folder holds several
// releases of one allocator (jemalloc@4.4.0 ... jemalloc@5.3.1), each figure per version in version
// order, with its change from the version before, so that "the spike goes away in 5.2" reads down
// one column.
#pragma once

#include <string>
#include <vector>

#include "harness/report/html.h"
#include "harness/results/model.h"

namespace allocmark::report {

// One line of releases: a backend's variant (jemalloc, jemalloc:bg) in two or more versions.
struct VersionSeries {
  std::string backend, variant;        // "jemalloc", "jemalloc:bg"
  std::vector<std::string> versions;   // ordered by releases::release_less (5.9 before 5.10)
  std::vector<std::string> allocators; // the recorded names, in the same order
};

// The series of `allocators` (recorded names and their backends, as the model's groups give them);
// an unversioned name or a variant with one release is in none.
std::vector<VersionSeries> version_series(const std::vector<std::pair<std::string, std::string>>& allocators);

// The series of the model's allocators.
std::vector<VersionSeries> version_series(const results::Model& model);

// Adds the section (heading id "versions") for `series` (nothing when it is empty).
void versions_section(html::Document& doc, const results::Model& model, const std::vector<VersionSeries>& series);

}  // namespace allocmark::report
