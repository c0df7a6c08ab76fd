// The report stream's table (event_keys.h) against the code that writes and reads the stream: every
// row is named through the table somewhere in harness/ (a row no one uses is a protocol no one
// speaks), and no source spells an event's "event" key by hand, which every hand-made event and
// every hand-made reading of one would have to.
#include "harness/record/event_keys.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace allocmark::record {
namespace {

namespace fs = std::filesystem;

// harness/'s sources but the tests, the table itself and the fake worker (test support: it writes
// the stream as raw bytes, cut lines included, to test the driver's reading of it).
std::map<std::string, std::string> harness_sources() {
  const char* root = std::getenv("ALLOCMARK_SOURCE_DIR");
  const fs::path harness = fs::path(root ? root : ".") / "harness";
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(harness)) {
    const fs::path& p = entry.path();
    const std::string name = p.filename().string();
    if (!entry.is_regular_file() || (p.extension() != ".cpp" && p.extension() != ".h")) continue;
    if (name.ends_with("_test.cpp") || name == "event_keys.h" || name == "fake_worker.cpp") continue;
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    out[fs::relative(p, harness).string()] = text.str();
  }
  return out;
}

TEST(EventKeys, EveryRowIsUsedAndNoEventIsSpelledByHand) {
  const std::map<std::string, std::string> sources = harness_sources();
  ASSERT_GT(sources.size(), 50u) << "harness/ not found (ALLOCMARK_SOURCE_DIR)";
  auto used = [&](const std::string& name) {
    for (const auto& [path, text] : sources)
      if (text.find(name) != std::string::npos) return true;
    return false;
  };
#define ALLOCMARK_EVENT_USED(name, description) \
  EXPECT_TRUE(used("event::" #name)) << "no source names the event " #name " through event_keys.h";
  ALLOCMARK_EVENTS(ALLOCMARK_EVENT_USED)
#undef ALLOCMARK_EVENT_USED
#define ALLOCMARK_EVENT_KEY_USED(name, description) \
  EXPECT_TRUE(used("event_key::" #name)) << "no source names the event key " #name " through event_keys.h";
  ALLOCMARK_EVENT_KEYS(ALLOCMARK_EVENT_KEY_USED)
#undef ALLOCMARK_EVENT_KEY_USED
  for (const auto& [path, text] : sources) {
    EXPECT_EQ(text.find("\"event\""), std::string::npos) << "harness/" << path << " spells the \"event\" key by hand";
    EXPECT_EQ(text.find("\\\"event\\\""), std::string::npos) << "harness/" << path << " writes the \"event\" key by hand";
  }
}

}  // namespace
}  // namespace allocmark::record
