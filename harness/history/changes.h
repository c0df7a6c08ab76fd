// The changes of a history (issue 44; docs/history.md "history changes"): find_change_points run
// over many series and grouped by the commit they stepped at, so the series that moved together
// are one change. `history changes` prints them; the trend page (report/trend_page.h) draws and lists them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/history/changepoints.h"
#include "harness/history/store.h"

namespace allocmark::history {

// One series' change; its point's to_commit is the first commit after on the series' axis.
struct FoundChange {
  const SeriesKey* key;  // into the keys given to find_changes
  ChangePoint point;
};

// The changes whose first commit after is one commit of one branch and testbed: the series that
// moved together, largest step first.
struct ChangeGroup {
  std::string branch, testbed;
  CommitInfo at;
  std::vector<FoundChange> changes;
};

struct ChangesFound {
  std::vector<ChangeGroup> groups;  // newest first
  std::size_t judged = 0, too_short = 0, min_commits = 0;
};

// Every change of `keys` (which must outlive the result). `since` keeps the changes whose first
// commit after is REV or later (a unique prefix of a commit the history holds; on an axis without
// it, the commits made at or after its time); HistoryError-free: an unknown or ambiguous REV is
// std::invalid_argument naming the history.
ChangesFound find_changes(const HistoryDb& db, const std::vector<SeriesKey>& keys, const std::string& since = "");

}  // namespace allocmark::history
