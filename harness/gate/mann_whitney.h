// The one-sided exact Mann-Whitney U test the gate uses to decide whether a move is real.
#pragma once

#include <vector>

namespace allocmark::gate {

// P(U >= observed) under "both samples come from one distribution", for the alternative "after
// tends to be larger than before". Exact: every split of the pooled values into groups of the two
// sizes is enumerated (ties count half), up to a million splits; larger samples use the normal
// approximation with a continuity correction.
double mann_whitney_greater_p(const std::vector<double>& before, const std::vector<double>& after);

// The smallest p-value the exact test can give for these sizes: 1 / C(n+m, n). With 3 and 3 it
// is 0.05, reached only when every after value exceeds every before value.
double smallest_reachable_p(std::size_t n_before, std::size_t n_after);

}  // namespace allocmark::gate
