#include "harness/runner/events.h"

namespace allocmark::runner {

std::vector<nlohmann::json> EventStream::feed(const char* data, std::size_t size) {
  std::vector<nlohmann::json> out;
  pending_.append(data, size);
  std::size_t start = 0, nl;
  while ((nl = pending_.find('\n', start)) != std::string::npos) {
    auto ev = nlohmann::json::parse(pending_.begin() + static_cast<std::ptrdiff_t>(start),
                                    pending_.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
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
