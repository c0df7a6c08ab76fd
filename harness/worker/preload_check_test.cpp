#include "harness/worker/preload_check.h"

#include <gtest/gtest.h>

using allocmark::worker::check_served_by;
using allocmark::worker::library_serving;

TEST(PreloadCheck, UnpreloadedProcessIsServedByTheCLibrary) {
  std::string served = library_serving("malloc");
  ASSERT_FALSE(served.empty());
  EXPECT_EQ(check_served_by(served, ""), "");
}

TEST(PreloadCheck, NamesTheLibraryThatReallyServesMalloc) {
  std::string problem = check_served_by("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  EXPECT_NE(problem.find("preload did not take"), std::string::npos) << problem;
  EXPECT_NE(problem.find("libc.so.6"), std::string::npos) << problem;
  EXPECT_NE(check_served_by("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", ""), "");
  EXPECT_NE(check_served_by("", ""), "");
}

TEST(PreloadCheck, MissingSymbolIsEmpty) { EXPECT_EQ(library_serving("allocmark_no_such_symbol_x"), ""); }
