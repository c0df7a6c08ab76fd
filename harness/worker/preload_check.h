// Proof of which library serves malloc in this process. Silent preload failures (a typo in a
// path, a library that does not interpose malloc) are a known defect of existing suites; the
// worker fails the cell instead of measuring the wrong allocator.
#pragma once

#include <string>

namespace allocmark::worker {

// Canonical path of the object that defines `symbol` as the process resolves it, "" if none.
std::string library_serving(const char* symbol);

// "" when `served_by` is the library the cell asked for; otherwise the reason it is not.
// `expected` is the preloaded path, or "" when the C library itself should serve malloc.
std::string check_served_by(const std::string& served_by, const std::string& expected);

}  // namespace allocmark::worker
