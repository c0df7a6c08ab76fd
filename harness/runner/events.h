// The worker's report stream (fd 3): one JSON object per line. Bytes arrive in chunks of any size
// (a burst larger than the pipe buffer comes in several reads); only whole lines become events,
// their strings valid UTF-8.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace allocmark::runner {

class EventStream {
 public:
  // Adds bytes; returns the events completed by them, in order.
  std::vector<nlohmann::json> feed(const char* data, std::size_t size);
  // Bytes after the last newline: a line the worker did not finish (it died mid-write).
  std::size_t partial_bytes() const { return pending_.size(); }
  // Whole lines that were not a JSON object.
  std::size_t malformed_lines() const { return malformed_; }

 private:
  std::string pending_;
  std::size_t malformed_ = 0;
};

}  // namespace allocmark::runner
