// Figures the worker reads and the results model keeps under the same names, each list written
// once: the readers (proc.h), a phase record's keys (phase_record.h) and the model's fields and
// metrics (harness/results/metric_table.h) all expand these. Macros only, so the model's header
// takes no /proc reader with it.
#pragma once

// The process's counters (TaskCounters' members): a phase's minor_faults .. sys_s, and the field
// and metric of the same name.
#define ALLOCMARK_PROCESS_COUNTERS(X) \
  X(minor_faults) X(major_faults) X(voluntary_ctx_switches) X(involuntary_ctx_switches) X(user_s) X(sys_s)

// The system's transparent-huge-page events: each row is the /proc/vmstat counter thp_NAME, the
// ThpEvents member NAME, a phase record's thp_events.NAME and the model's field and metric thp_NAME.
//   fault_alloc          a fault served by a huge page
//   fault_fallback       a fault that wanted a huge page and got 4 KiB pages
//   collapse_alloc       khugepaged made 512 pages one
//   split_page           a huge page split back (a partial unmap or advice)
//   split_pmd            a huge mapping made small-page mappings (advice on part of it)
//   deferred_split_page  a partly unmapped huge page queued to be split later: its whole 2 MiB stay
//                        allocated until memory pressure
#define ALLOCMARK_THP_EVENTS(X) \
  X(fault_alloc) X(fault_fallback) X(collapse_alloc) X(split_page) X(split_pmd) X(deferred_split_page)
