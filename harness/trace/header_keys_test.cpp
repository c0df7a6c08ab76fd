// The trace header's key table against what documents it (docs/traces.md, "The trace file": the
// header's line lists its keys) and what writes it (a recorded trace's header, read back).
#include "harness/trace/header_keys.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace allocmark::trace {
namespace {

// The keys docs/traces.md lists on the header's lines: the names between commas, asides in
// parentheses left out.
std::set<std::string> documented_header_keys() {
  const char* root = std::getenv("ALLOCMARK_SOURCE_DIR");
  std::ifstream doc(std::string(root ? root : ".") + "/docs/traces.md");
  EXPECT_TRUE(doc) << "docs/traces.md not found (ALLOCMARK_SOURCE_DIR)";
  std::string text;
  bool inside = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("header    JSON:", 0) == 0) {
      inside = true;
      text += line.substr(std::string("header    JSON:").size());
    } else if (inside && line.rfind("          ", 0) == 0) {
      text += line;
    } else if (inside) {
      break;
    }
  }
  text = std::regex_replace(text, std::regex(R"(\([^)]*\))"), "");
  std::set<std::string> keys;
  const std::regex name(R"([a-z_]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) keys.insert(it->str());
  return keys;
}

TEST(TraceHeaderKeys, DocsListEveryKeyAndNoOther) {
  std::set<std::string> table;
#define ALLOCMARK_TRACE_HEADER_ROW(name, description) table.insert(header_key::name);
  ALLOCMARK_TRACE_HEADER_KEYS(ALLOCMARK_TRACE_HEADER_ROW)
#undef ALLOCMARK_TRACE_HEADER_ROW
  EXPECT_EQ(documented_header_keys(), table);
}

}  // namespace
}  // namespace allocmark::trace
