// Figures the worker reads and the results model keeps under the same names, each list written
// once: the readers (metrics/proc.h) and the record's field table (record/fields.h, hence a phase
// record's keys and the model's fields) expand these, and the model's metrics
// (harness/results/metric_table.h). Macros only, so the model's header takes no /proc reader with it.
#pragma once

// Each list has two forms: NAME(X) calls X(name) per row; NAME_EACH(Y, X) calls Y(X, name, ...) with
// the row's other columns (the record's field table, harness/record/fields.h, passes X through).
// A row's last column, in parentheses, is how its metric is shown (the `presentation` column of
// ALLOCMARK_PHASE_FIELDS: its description, direction, display, heading, ...).
#define ALLOCMARK_NAME_ONLY(X, name, ...) X(name)

// The process's counters (TaskCounters' members) and their units: a phase's minor_faults .. sys_s,
// and the field and metric of the same name.
#define ALLOCMARK_PROCESS_COUNTERS_EACH(Y, X)                                                                         \
  Y(X, minor_faults, "count", ("", "minor page faults", lower, si, "minor faults", 20, "", false, 0, false))          \
  Y(X, major_faults, "count", ("", "major page faults", lower, si, "major faults", 20, "", false, 0, false))          \
  Y(X, voluntary_ctx_switches, "count",                                                                               \
    ("", "voluntary context switches", lower, si, "vol ctx switches", 20, "", false, 0, false))                       \
  Y(X, involuntary_ctx_switches, "count",                                                                             \
    ("", "involuntary context switches", lower, si, "invol ctx switches", 20, "", false, 0, false))                   \
  Y(X, user_s, "s", ("", "user CPU time", lower, seconds, "user s", 24, "", false, 0, false))                         \
  Y(X, sys_s, "s", ("", "system CPU time", lower, seconds, "sys s", 24, "", false, 0, false))
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
#define ALLOCMARK_THP_EVENTS_EACH(Y, X)                                                                               \
  Y(X, fault_alloc, ("",                                                                                              \
      "page faults served by a huge page during the phase, system-wide (/proc/vmstat thp_fault_alloc)",               \
      lower, si, "THP faults", 20, "THP faults, fallbacks, collapses, splits: system-wide", false, 0, false))         \
  Y(X, fault_fallback, ("",                                                                                           \
      "faults that wanted a huge page and got small pages, system-wide (/proc/vmstat thp_fault_fallback)",            \
      lower, si, "THP fallbacks", 20, "", false, 0, false))                                                           \
  Y(X, collapse_alloc, ("",                                                                                           \
      "small pages khugepaged collapsed into a huge page, system-wide (/proc/vmstat thp_collapse_alloc)",             \
      lower, si, "THP collapses", 20, "", false, 0, false))                                                           \
  Y(X, split_page, ("",                                                                                               \
      "huge pages split back into small pages, system-wide (/proc/vmstat thp_split_page)",                            \
      lower, si, "THP splits", 20, "", false, 0, false))                                                              \
  Y(X, split_pmd, ("",                                                                                                \
      "huge-page mappings split into small-page mappings (advice or an unmap on part of one), system-wide "           \
      "(/proc/vmstat thp_split_pmd)",                                                                                 \
      lower, si, "THP map splits", 20, "", false, 0, false))                                                          \
  Y(X, deferred_split_page, ("",                                                                                      \
      "partly unmapped huge pages queued to be split later, each still holding its 2 MiB until memory "               \
      "pressure, system-wide (/proc/vmstat thp_deferred_split_page)",                                                 \
      lower, si, "THP deferred", 20, "", false, 0, false))
#define ALLOCMARK_THP_EVENTS(X) ALLOCMARK_THP_EVENTS_EACH(ALLOCMARK_NAME_ONLY, X)
