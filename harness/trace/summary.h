// What a trace says about its program's allocation pattern, before any allocator is compared
// (`allocmark trace show`): calls by function, request sizes and lifetimes as histograms, threads,
// cross-thread frees, and peak live requested bytes per phase.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/trace/format.h"

namespace allocmark::trace {

// The summary as JSON (the schema is in docs/traces.md); computed once, printed by the CLI as text
// or as this JSON.
//
// Peak live bytes: the threads' events merged by their recorded times (microseconds), so for a
// multi-threaded trace the order of events in the same microsecond on different threads is the
// thread number's; a single-threaded trace's figure is exact.
nlohmann::json summarize(const Trace& trace);

// The summary as text for a person.
std::string summary_text(const nlohmann::json& summary);

}  // namespace allocmark::trace
