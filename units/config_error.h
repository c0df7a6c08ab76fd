// Bad input (a flag, a file's key, a cell description's field): the CLI turns it into exit code 2.
// On the lowest floor because every floor that reads input throws it, the record's cell codec
// (harness/record) as much as the settings table and the plan (matrix::ConfigError names it too).
#pragma once

#include <stdexcept>

namespace allocmark {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace allocmark
