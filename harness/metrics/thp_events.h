// The system's transparent-huge-page events allocmark reads, named once: each row is the
// /proc/vmstat counter thp_NAME, the ThpEvents member NAME, a phase record's thp_events.NAME and the
// results model's field and metric thp_NAME. Everything that lists them expands this table.
//   fault_alloc          a fault served by a huge page
//   fault_fallback       a fault that wanted a huge page and got 4 KiB pages
//   collapse_alloc       khugepaged made 512 pages one
//   split_page           a huge page split back (a partial unmap or advice)
//   split_pmd            a huge mapping made small-page mappings (advice on part of it)
//   deferred_split_page  a partly unmapped huge page queued to be split later: its whole 2 MiB stay
//                        allocated until memory pressure
#pragma once

#include <cstdint>

#define ALLOCMARK_THP_EVENTS(X) \
  X(fault_alloc) X(fault_fallback) X(collapse_alloc) X(split_page) X(split_pmd) X(deferred_split_page)

namespace allocmark::metrics {

// Counted since boot for every process: a phase's figure is the difference of two readings,
// system-wide (thp_events_since).
struct ThpEvents {
#define ALLOCMARK_THP_MEMBER(name) uint64_t name = 0;
  ALLOCMARK_THP_EVENTS(ALLOCMARK_THP_MEMBER)
#undef ALLOCMARK_THP_MEMBER
};

}  // namespace allocmark::metrics
