// The one wording of "this key is not allowed here" for every TOML file the harness reads
// (matrices, variants, topologies), so each file kind only says which keys it accepts.
#pragma once

#include <set>
#include <sstream>
#include <string>

#include <toml++/toml.h>

namespace allocmark::toml_files {

// "" when every key of `table` is in `allowed`; else "path:line:col: unknown key 'k' in
// <section> (valid: a, b)" for the first one that is not. Callers throw their own error type.
inline std::string unknown_key(const std::string& path, const toml::table& table, const std::string& section,
                               const std::set<std::string>& allowed) {
  for (const auto& [key, value] : table) {
    if (allowed.count(std::string(key.str()))) continue;
    std::string choices;
    for (const auto& a : allowed) choices += (choices.empty() ? "" : ", ") + a;
    std::ostringstream at;
    at << path << ":" << key.source().begin.line << ":" << key.source().begin.column;
    return at.str() + ": unknown key '" + std::string(key.str()) + "' in " + section + " (valid: " + choices + ")";
  }
  return "";
}

}  // namespace allocmark::toml_files
