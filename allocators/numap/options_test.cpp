#include "allocators/numap/options.h"

#include <gtest/gtest.h>
#include <stdlib.h>

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
}

TEST(NumapOptions, ReadsEveryKindFromEnvironment) {
  setenv("NUMAP_CAPACITY", "512M", 1);
  setenv("NUMAP_DISTANCE_LIMIT", "16", 1);
  setenv("NUMAP_BEYOND_LIMIT", "fail", 1);
  setenv("NUMAP_THP", "true", 1);
  setenv("NUMAP_FREE_REFRESH_MS", "250", 1);
  Options o = options_from_env();
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
  const char* text = nullptr;
  EXPECT_EQ(option_value(o, 0, &text), 512ll << 20);
  option_value(o, 7, &text);
  EXPECT_STREQ(text, "fail");
}

// A bad value is a clear message and abort, never a silent default.
TEST(NumapOptionsDeathTest, BadValuesAbortWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(({ setenv("NUMAP_CAPACITY", "12X", 1); options_from_env(); }),
               "NUMAP_CAPACITY='12X': not a size");
  EXPECT_DEATH(({ setenv("NUMAP_NUMA", "7", 1); options_from_env(); }), "NUMAP_NUMA='7': out of range");
  EXPECT_DEATH(({ setenv("NUMAP_BEYOND_LIMIT", "maybe", 1); options_from_env(); }), "expected one of purge\\|fail");
  EXPECT_DEATH(({ setenv("NUMAP_CLASS_SPAN", "3G", 1); options_from_env(); }), "not a power of two");
  EXPECT_DEATH(({ setenv("NUMAP_FREE_REFRESH_MS", "-5", 1); options_from_env(); }),
               "NUMAP_FREE_REFRESH_MS='-5': out of range");
  EXPECT_DEATH(({ setenv("NUMAP_CAPACTIY", "1G", 1); options_from_env(); }), "unknown option NUMAP_CAPACTIY");
}

TEST(NumapOptionsDeathTest, PrintOptionsListsEveryOption) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Options o;
  o.capacity = 1 << 20;
  EXPECT_EXIT(({ print_options(o); exit(0); }), ::testing::ExitedWithCode(0),
              "NUMAP_CAPACITY=1048576(.|\n)*NUMAP_BEYOND_LIMIT=purge(.|\n)*NUMAP_PRINT_OPTIONS=0");
}

}  // namespace
}  // namespace numap
