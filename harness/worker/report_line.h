// One JSON event as one line on the report pipe, written whole through short writes and signals:
// the worker's and the program companion's only way to talk to the driver (runner/events.cpp reads it).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <string>

namespace allocmark::worker {

inline void write_report_line(int fd, const nlohmann::json& event) {
  std::string line = event.dump() + "\n";
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the driver went away; nothing more to say
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace allocmark::worker
