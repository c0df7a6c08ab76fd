#include "units/units.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace allocmark::units {

uint64_t parse_bytes(std::string_view text) {
  std::string s(text);
  if (s.empty()) throw std::invalid_argument("empty size");
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || value < 0 || !std::isfinite(value))
    throw std::invalid_argument("not a size: '" + s + "'");
  std::string suffix(end);
  double scale = 1;
  if (suffix == "" || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k") scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") scale = 1024.0 * 1024 * 1024;
  else throw std::invalid_argument("unknown size suffix '" + suffix + "' in '" + s + "' (use K, M or G)");
  return static_cast<uint64_t>(value * scale);
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kSuffixes[] = {"", "K", "M", "G"};
  int step = 0;
  while (step < 3 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++step;
  }
  return std::to_string(bytes) + kSuffixes[step];
}

std::string format_number(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, end);
}

}  // namespace allocmark::units
