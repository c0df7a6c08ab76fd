// A request the workload cannot go on without, refused by the allocator (malloc returned null):
// the cell fails saying so, with the allocator's own reason where it gives one (numap names
// NUMAP_CAPACITY), instead of an abort with an empty log (issue 41).
#pragma once

#include <cstddef>

namespace allocmark::workloads {

// Called with the refused request's size (0: not known, e.g. operator new's bad_alloc); must not
// return, and must not allocate (the allocator just refused).
using RefusalHandler = void (*)(std::size_t bytes);

// The worker installs its handler before the workload starts.
void on_allocation_refused(RefusalHandler handler);

// Where a workload's malloc returned null: the installed handler, else a line on stderr and abort().
[[noreturn]] void allocation_refused(std::size_t bytes);

}  // namespace allocmark::workloads
