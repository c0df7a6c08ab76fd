#include "harness/history/changes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace allocmark::history {

namespace {

using Axes = std::map<std::pair<std::string, std::string>, std::vector<CommitInfo>>;

// REV as the history holds it (a unique prefix of a commit it has): its time, for commits of
// branches and testbeds that do not have it.
std::string since_time(const HistoryDb& db, const std::string& rev, const Axes& axes) {
  std::map<std::string, std::string> matches;  // commit -> its earliest time
  for (const auto& [where, commits] : axes)
    for (const auto& c : commits)
      if (c.commit.starts_with(rev) && (!matches.contains(c.commit) || c.time < matches[c.commit]))
        matches[c.commit] = c.time;
  if (matches.empty())
    throw std::invalid_argument(fmt::format("--since: no commit of {} (on the series chosen) starts with '{}'", db.path(), rev));
  if (matches.size() > 1) {
    std::set<std::string> names;
    for (const auto& m : matches) names.insert(m.first);
    throw std::invalid_argument(fmt::format("--since: '{}' names {} commits of {} ({}); give more of it", rev,
                                            matches.size(), db.path(), fmt::format("{}", fmt::join(names, ", "))));
  }
  return matches.begin()->second;
}

// The first index of `commits` that --since keeps: REV's own when the axis has it, else the first
// commit made at or after REV's time.
std::size_t since_index(const std::vector<CommitInfo>& commits, const std::string& rev, const std::string& time) {
  for (const auto& c : commits)
    if (c.commit.starts_with(rev)) return c.index;
  for (const auto& c : commits)
    if (c.time >= time) return c.index;
  return commits.size();
}

// Newest first: by the time of the commit stepped at, then by its place on its axis.
void order_changes(std::vector<ChangeGroup>& groups) {
  std::stable_sort(groups.begin(), groups.end(), [](const ChangeGroup& a, const ChangeGroup& b) {
    return a.at.time != b.at.time ? a.at.time > b.at.time : a.at.index > b.at.index;
  });
  for (auto& g : groups)
    std::stable_sort(g.changes.begin(), g.changes.end(), [](const FoundChange& a, const FoundChange& b) {
      return std::fabs(a.point.relative_step) > std::fabs(b.point.relative_step);
    });
}

}  // namespace

ChangesFound find_changes(const HistoryDb& db, const std::vector<SeriesKey>& keys, const std::string& since) {
  const ChangePointOptions options;
  ChangesFound found;
  found.min_commits = min_commits(options);
  Axes axes;
  for (const auto& k : keys)
    if (!axes.contains({k.branch, k.testbed})) axes[{k.branch, k.testbed}] = db.commits(k.branch, k.testbed);
  const std::string rev_time = since.empty() ? "" : since_time(db, since, axes);
  std::map<std::tuple<std::string, std::string, std::size_t>, ChangeGroup> groups;
  for (const auto& k : keys) {
    const auto points = db.series(k.cell.cell_id, k.phase, k.metric, k.branch, k.testbed);
    if (points.size() < found.min_commits) {
      ++found.too_short;
      continue;
    }
    ++found.judged;
    const auto& axis = axes.at({k.branch, k.testbed});
    const std::size_t from = since.empty() ? 0 : since_index(axis, since, rev_time);
    for (auto& cp : find_change_points(points, options)) {
      const auto at = std::find_if(axis.begin(), axis.end(), [&](const auto& c) { return c.commit == cp.to_commit; });
      if (at == axis.end() || at->index < from) continue;
      ChangeGroup& g = groups[{k.branch, k.testbed, at->index}];
      if (g.changes.empty()) g = {k.branch, k.testbed, *at, {}};
      g.changes.push_back({&k, std::move(cp)});
    }
  }
  for (auto& [where, g] : groups) found.groups.push_back(std::move(g));
  order_changes(found.groups);
  return found;
}

}  // namespace allocmark::history
