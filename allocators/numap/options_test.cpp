#include "allocators/numap/options.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

namespace numap {
namespace {

TEST(NumapOptions, ParsesSizesWithSuffixes) {
  std::uint64_t v = 0;
  EXPECT_TRUE(parse_size("0", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(parse_size("4096", &v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(parse_size("64K", &v));
  EXPECT_EQ(v, 64u << 10);
  EXPECT_TRUE(parse_size("512m", &v));
  EXPECT_EQ(v, 512ull << 20);
  EXPECT_TRUE(parse_size("16G", &v));
  EXPECT_EQ(v, 16ull << 30);
  EXPECT_TRUE(parse_size("2GiB", &v));
  EXPECT_EQ(v, 2ull << 30);
  EXPECT_TRUE(parse_size("1T", &v));
  EXPECT_EQ(v, 1ull << 40);
  for (const char* bad : {"", "K", "12X", "-1", "1.5G", "12 M", "99999999999999999999"}) EXPECT_FALSE(parse_size(bad, &v)) << bad;
}

TEST(NumapOptions, DefaultsWithoutEnvironment) {
  Options o = options_from_env();
  EXPECT_EQ(o.capacity, 0u);
  EXPECT_EQ(o.class_span, 16ull << 30);
  EXPECT_EQ(o.numa, -1);
  EXPECT_TRUE(o.tcache);
  EXPECT_FALSE(o.strict);
  EXPECT_EQ(o.populate, Populate::kAuto);
  EXPECT_EQ(o.warnings, 0u);
}

TEST(NumapOptions, ReadsEveryKindFromEnvironment) {
  setenv("NUMAP_CAPACITY", "512M", 1);
  setenv("NUMAP_DISTANCE_LIMIT", "16", 1);
  setenv("NUMAP_BEYOND_LIMIT", "fail", 1);
  setenv("NUMAP_THP", "true", 1);
  setenv("NUMAP_FREE_REFRESH_MS", "250", 1);
  setenv("NUMAP_POPULATE", "all", 1);
  Options o = options_from_env();
  unsetenv("NUMAP_POPULATE");
  unsetenv("NUMAP_FREE_REFRESH_MS");
  unsetenv("NUMAP_CAPACITY");
  unsetenv("NUMAP_DISTANCE_LIMIT");
  unsetenv("NUMAP_BEYOND_LIMIT");
  unsetenv("NUMAP_THP");
  EXPECT_EQ(o.capacity, 512ull << 20);
  EXPECT_EQ(o.distance_limit, 16);
  EXPECT_EQ(o.beyond_limit, BeyondLimit::kFail);
  EXPECT_TRUE(o.thp);
  EXPECT_EQ(o.free_refresh_ms, 250);
  EXPECT_EQ(o.populate, Populate::kAll);
  EXPECT_EQ(o.warnings, 0u);
  const char* text = nullptr;
  EXPECT_EQ(option_value(o, 0, &text), 512ll << 20);
  option_value(o, 7, &text);
  EXPECT_STREQ(text, "fail");
}

// The README's options table is what users read, the X-macro table what numap reads: every
// option in both, none in one only, and each README default (its first word, as a user would type
// it) read through options_from_env gives numap's own default with no warning.
TEST(NumapOptions, TheReadmeListsEveryOptionWithItsDefault) {
  std::ifstream readme(NUMAP_TEST_DATA "/../../README.md");
  ASSERT_TRUE(readme) << NUMAP_TEST_DATA "/../../README.md";
  std::map<std::string, std::string> documented;  // name without NUMAP_ -> default's first word
  bool in_options = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("## ", 0) == 0) in_options = line == "## Options";
    const std::string row = "| `NUMAP_";
    if (!in_options || line.rfind(row, 0) != 0) continue;
    const std::size_t name_end = line.find('`', row.size());
    const std::size_t cell = line.find("| ", name_end);
    ASSERT_NE(cell, std::string::npos) << line;
    const std::string name = line.substr(row.size(), name_end - row.size());
    const std::string def = line.substr(cell + 2, line.find_first_of(" |", cell + 2) - cell - 2);
    EXPECT_TRUE(documented.emplace(name, def).second) << "NUMAP_" << name << " listed twice";
  }
  std::size_t count = 0;
  const OptionInfo* table = option_table(&count);
  std::set<std::string> known;
  for (std::size_t i = 0; i < count; ++i) {
    known.insert(table[i].name);
    EXPECT_TRUE(documented.count(table[i].name)) << "NUMAP_" << table[i].name << " missing from README.md's Options";
  }
  for (const auto& [name, def] : documented) {
    EXPECT_TRUE(known.count(name)) << "README.md lists NUMAP_" << name << ", which is no option";
    if (known.count(name)) setenv(("NUMAP_" + name).c_str(), def.c_str(), 1);
  }
  testing::internal::CaptureStderr();
  const Options read = options_from_env();
  const std::string err = testing::internal::GetCapturedStderr();
  for (const auto& [name, def] : documented) unsetenv(("NUMAP_" + name).c_str());
  EXPECT_EQ(err, "");
  EXPECT_EQ(read.warnings, 0u);
  const Options defaults;
  for (std::size_t i = 0; i < count; ++i) {
    const char* got = nullptr;
    const char* want = nullptr;
    const long long got_value = option_value(read, i, &got);
    EXPECT_EQ(got_value, option_value(defaults, i, &want)) << "NUMAP_" << table[i].name << "'s README default";
    EXPECT_STREQ(got == nullptr ? "" : got, want == nullptr ? "" : want) << "NUMAP_" << table[i].name;
  }
}

// A harmless variable in a shell must not kill every program started from it: an unknown name or a
// bad value is one line (name, value, what is expected, what is used instead), the default stays,
// and the count reaches numap_stats. Never a silent default.
TEST(NumapOptions, UnknownNamesAndBadValuesWarnOnceAndKeepTheDefault) {
  const char* bad[][2] = {{"NUMAP_STRICT", "yes"},          {"NUMAP_CAPACITY", "12X"},   {"NUMAP_CLASS_SPAN", "3G"},
                          {"NUMAP_DECAY_MS", "banana"},     {"NUMAP_NUMA", "7"},         {"NUMAP_BEYOND_LIMIT", "maybe"},
                          {"NUMAP_THP", "yes"},             {"NUMAP_SYSFS_ROOT", "sys"}, {"NUMAP_FREE_REFRESH_MS", "-5"},
                          {"NUMAP_LIB", "x"}};
  for (auto& kv : bad) setenv(kv[0], kv[1], 1);
  setenv("NUMAP_DISTANCE_LIMIT", "16", 1);  // a good value beside them is still read
  testing::internal::CaptureStderr();
  const Options o = options_from_env();
  const std::string err = testing::internal::GetCapturedStderr();
  for (auto& kv : bad) unsetenv(kv[0]);
  unsetenv("NUMAP_DISTANCE_LIMIT");

  const Options d;
  EXPECT_FALSE(o.strict);
  EXPECT_EQ(o.capacity, d.capacity);
  EXPECT_EQ(o.class_span, d.class_span);
  EXPECT_EQ(o.decay_ms, d.decay_ms);
  EXPECT_EQ(o.numa, d.numa);
  EXPECT_EQ(o.beyond_limit, d.beyond_limit);
  EXPECT_EQ(o.thp, d.thp);
  EXPECT_STREQ(o.sysfs_root, d.sysfs_root);
  EXPECT_EQ(o.free_refresh_ms, d.free_refresh_ms);
  EXPECT_EQ(o.distance_limit, 16);
  EXPECT_EQ(o.warnings, 10u);
  // NUMAP_STRICT is read first, then the table's order, then the unknown names.
  EXPECT_EQ(err,
            "numap: NUMAP_STRICT='yes': expected 0, 1, true or false; using the default 0\n"
            "numap: NUMAP_CAPACITY='12X': expected a size from 0 to 1125899906842624 bytes (digits, optional K, M, "
            "G or T suffix); using the default 0\n"
            "numap: NUMAP_CLASS_SPAN='3G': expected a power of two from 268435456 to 1099511627776 bytes (digits, "
            "optional K, M, G or T suffix); using the default 17179869184\n"
            "numap: NUMAP_DECAY_MS='banana': expected an integer from 0 to 3600000; using the default 1000\n"
            "numap: NUMAP_NUMA='7': expected an integer from -1 to 1; using the default -1\n"
            "numap: NUMAP_BEYOND_LIMIT='maybe': expected one of purge|fail; using the default purge\n"
            "numap: NUMAP_THP='yes': expected 0, 1, true or false; using the default 0\n"
            "numap: NUMAP_SYSFS_ROOT='sys': expected an absolute path; using the default /sys\n"
            "numap: NUMAP_FREE_REFRESH_MS='-5': expected an integer from 0 to 60000; using the default 100\n"
            "numap: NUMAP_LIB='x': not a numap option (NUMAP_PRINT_OPTIONS=1 lists them); ignored\n");
}

// A setting found unusable after the environment was read (the arena's reservation refused at
// this span): the same one line and count, with the value tried and the value used instead.
TEST(NumapOptions, FallbackIsOneWarningWithTheValueUsed) {
  const Options asked;
  Options o;
  o.class_span = 1ull << 30;
  testing::internal::CaptureStderr();
  option_fallback(&o, OptionIndex::CLASS_SPAN, asked, "cannot reserve the arena");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "numap: NUMAP_CLASS_SPAN=17179869184: cannot reserve the arena; using 1073741824\n");
  EXPECT_EQ(o.warnings, 1u);
}

// NUMAP_STRICT=1 (tests, CI): the same line says so, and the process aborts.
TEST(NumapOptionsDeathTest, StrictAbortsNamingTheVariable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(({ setenv("NUMAP_STRICT", "1", 1); setenv("NUMAP_LIB", "x", 1); options_from_env(); }),
              testing::KilledBySignal(SIGABRT), "numap: NUMAP_LIB='x': not a numap option .*; NUMAP_STRICT=1: aborting");
  EXPECT_EXIT(({ setenv("NUMAP_STRICT", "true", 1); setenv("NUMAP_DECAY_MS", "banana", 1); options_from_env(); }),
              testing::KilledBySignal(SIGABRT),
              "numap: NUMAP_DECAY_MS='banana': expected an integer from 0 to 3600000; NUMAP_STRICT=1: aborting");
  EXPECT_EXIT(({ setenv("NUMAP_STRICT", "1", 1); setenv("NUMAP_CLASS_SPAN", "3G", 1); options_from_env(); }),
              testing::KilledBySignal(SIGABRT), "NUMAP_CLASS_SPAN='3G': expected a power of two");
  Options o;
  o.strict = true;
  EXPECT_EXIT(option_fallback(&o, OptionIndex::CLASS_SPAN, Options{}, "cannot reserve the arena"),
              testing::KilledBySignal(SIGABRT),
              "numap: NUMAP_CLASS_SPAN=17179869184: cannot reserve the arena; NUMAP_STRICT=1: aborting");
}

TEST(NumapOptionsDeathTest, PrintOptionsListsEveryOption) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Options o;
  o.capacity = 1 << 20;
  EXPECT_EXIT(({ print_options(o); exit(0); }), ::testing::ExitedWithCode(0),
              "NUMAP_CAPACITY=1048576(.|\n)*NUMAP_BEYOND_LIMIT=purge(.|\n)*NUMAP_PRINT_OPTIONS=0(.|\n)*NUMAP_STRICT=0");
}

}  // namespace
}  // namespace numap
