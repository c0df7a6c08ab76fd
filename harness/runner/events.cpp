#include "harness/runner/events.h"

#include "harness/results/safe_text.h"

namespace allocmark::runner {

std::vector<nlohmann::json> EventStream::feed(const char* data, std::size_t size) {
  std::vector<nlohmann::json> out;
  pending_.append(data, size);
  std::size_t start = 0, nl;
  while ((nl = pending_.find('\n', start)) != std::string::npos) {
    // The worker's and the companion's texts (paths, a library's messages) need not be UTF-8:
    // such bytes become U+FFFD rather than costing the whole event.
    auto ev = nlohmann::json::parse(results::valid_utf8(std::string_view(pending_).substr(start, nl - start)), nullptr, false);
    if (ev.is_discarded() || !ev.is_object())
      ++malformed_;
    else
      out.push_back(std::move(ev));
    start = nl + 1;
  }
  pending_.erase(0, start);
  return out;
}

}  // namespace allocmark::runner
