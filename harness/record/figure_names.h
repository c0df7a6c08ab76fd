// Figures the worker reads and the results model keeps under the same names, each list written
// once: the readers (metrics/proc.h) and the record's field table (record/fields.h, hence a phase
// record's keys and the model's fields) expand these, and the model's metrics
// (harness/results/metric_table.h). Macros only, so the model's header takes no /proc reader with it.
#pragma once

// Each list has two forms: NAME(X) calls X(name) per row; NAME_EACH(Y, X) calls Y(X, name, ...) with
// the row's other columns (the record's field table, harness/record/fields.h, passes X through).
#define ALLOCMARK_NAME_ONLY(X, name, ...) X(name)

// The process's counters (TaskCounters' members) and their units: a phase's minor_faults .. sys_s,
// and the field and metric of the same name.
#define ALLOCMARK_PROCESS_COUNTERS_EACH(Y, X)                                                                 \
  Y(X, minor_faults, "count") Y(X, major_faults, "count") Y(X, voluntary_ctx_switches, "count")              \
  Y(X, involuntary_ctx_switches, "count") Y(X, user_s, "s") Y(X, sys_s, "s")
#define ALLOCMARK_PROCESS_COUNTERS(X) ALLOCMARK_PROCESS_COUNTERS_EACH(ALLOCMARK_NAME_ONLY, X)

// The system's transparent-huge-page events: each row is the /proc/vmstat counter thp_NAME, the
// ThpEvents member NAME, a phase record's thp_events.NAME and the model's field and metric thp_NAME.
//   fault_alloc          a fault served by a huge page
//   fault_fallback       a fault that wanted a huge page and got 4 KiB pages
//   collapse_alloc       khugepaged made 512 pages one
//   split_page           a huge page split back (a partial unmap or advice)
//   split_pmd            a huge mapping made small-page mappings (advice on part of it)
//   deferred_split_page  a partly unmapped huge page queued to be split later: its whole 2 MiB stay
//                        allocated until memory pressure
#define ALLOCMARK_THP_EVENTS_EACH(Y, X) \
  Y(X, fault_alloc) Y(X, fault_fallback) Y(X, collapse_alloc) Y(X, split_page) Y(X, split_pmd) Y(X, deferred_split_page)
#define ALLOCMARK_THP_EVENTS(X) ALLOCMARK_THP_EVENTS_EACH(ALLOCMARK_NAME_ONLY, X)
