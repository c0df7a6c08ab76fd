// The phases a program's marks give (`phase NAME` on ALLOCMARK_PHASE_FD), one rule for a program
// cell (harness/runner/program_phases.h, marks read live) and for a replayed trace (the marks it
// recorded): no mark, one phase "run"; else "startup" before the first mark, then one phase per
// mark. Names within a cell are unique, since readers pool phases of one name as repetitions: a
// mark named like an earlier phase of the cell (a second `load`, or `startup`, the harness's own)
// opens NAME#2 (NAME#3, ...: the first such name not taken). docs/programs.md says it for users.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace allocmark::trace {

inline constexpr const char* kUnmarkedPhase = "run";       // a cell whose program marked nothing
inline constexpr const char* kBeforeFirstMark = "startup";  // the phase before the first mark

// Names the phases of one cell as its marks come: open(mark) is the name of the phase the mark
// opens. Each name and each repeat costs a hash lookup, so a trace of many marks stays cheap.
class PhaseNames {
 public:
  PhaseNames() { taken_.insert(kBeforeFirstMark); }
  std::string open(const std::string& mark) {
    if (taken_.insert(mark).second) return mark;
    std::size_t& k = next_[mark];
    if (k < 2) k = 2;
    while (true)
      if (std::string name = mark + "#" + std::to_string(k++); taken_.insert(name).second) return name;
  }

 private:
  std::unordered_set<std::string> taken_;
  std::unordered_map<std::string, std::size_t> next_;  // the next suffix to try for a repeated mark
};

// Every phase of a cell whose program marked `marks`, in order.
inline std::vector<std::string> phase_names_for_marks(const std::vector<std::string>& marks) {
  if (marks.empty()) return {kUnmarkedPhase};
  std::vector<std::string> names{kBeforeFirstMark};
  PhaseNames namer;
  for (const auto& mark : marks) names.push_back(namer.open(mark));
  return names;
}

}  // namespace allocmark::trace
