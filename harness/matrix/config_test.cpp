#include "harness/matrix/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

using namespace allocmark::matrix;

namespace {
std::string write_temp(const std::string& text) {
  // ctest runs each test in its own process, several at once: the pid keeps their files apart.
  static int n = 0;
  std::string path = ::testing::TempDir() + "/config_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".toml";
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& text, bool variants_only = false) {
  try {
    load_matrix_file(write_temp(text), variants_only);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, ParsesAxesParamsAndVariants) {
  auto f = load_matrix_file(write_temp(R"(
[matrix]
allocators = ["glibc", "je-old"]
workloads = ["size_mix"]
threads = [1, 4]
reps = 5
size = "full"
timeout_s = 12.5

[params.size_mix]
live_mib = 32
remote_free = 0.5

[allocators."je-old"]
kind = "jemalloc"
library = "/opt/x/libjemalloc.so.2"
env = { MALLOC_CONF = "narenas:2" }
)"));
  EXPECT_EQ(f.allocators, (std::vector<std::string>{"glibc", "je-old"}));
  EXPECT_EQ(f.threads, (std::vector<int>{1, 4}));
  EXPECT_EQ(f.reps, 5);
  EXPECT_EQ(f.size, "full");
  EXPECT_DOUBLE_EQ(*f.timeout_s, 12.5);
  EXPECT_EQ(f.params["size_mix"]["live_mib"].value, "32");
  EXPECT_EQ(f.params["size_mix"]["remote_free"].value, "0.5");
  EXPECT_NE(f.params["size_mix"]["live_mib"].origin.find(":11:"), std::string::npos);
  const auto& je = f.allocator_defs.at("je-old");
  EXPECT_EQ(je.backend, "jemalloc");
  EXPECT_EQ(je.library, "/opt/x/libjemalloc.so.2");
  EXPECT_EQ(je.env.at("MALLOC_CONF"), "narenas:2");
}

TEST(Config, SyntaxErrorNamesFileLineAndColumn) {
  std::string e = error_of("[matrix]\nreps = 3\nthreads = [1,\n");
  EXPECT_NE(e.find(".toml:"), std::string::npos) << e;
  EXPECT_NE(e.find(":3:"), std::string::npos) << e;
}

TEST(Config, UnknownKeyIsAnErrorWithChoicesAndPosition) {
  std::string e = error_of("[matrix]\nrepetitions = 3\n");
  EXPECT_NE(e.find(":2:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'repetitions'"), std::string::npos) << e;
  EXPECT_NE(e.find("reps"), std::string::npos) << e;
  EXPECT_NE(error_of("[matrx]\n").find("unknown key 'matrx'"), std::string::npos);
}

TEST(Config, WrongTypesAreErrors) {
  EXPECT_NE(error_of("[matrix]\nthreads = 2\n").find("list of integers"), std::string::npos);
  EXPECT_NE(error_of("[matrix]\nthreads = [0]\n").find("must be in 1..1024"), std::string::npos);
  EXPECT_NE(error_of("[matrix]\nsize = \"huge\"\n").find("quick"), std::string::npos);
  EXPECT_NE(error_of("[matrix]\nallocators = \"glibc\"\n").find("list of strings"), std::string::npos);
  EXPECT_NE(error_of("[allocators.x]\nenv = { A = \"1\" }\n").find("needs backend"), std::string::npos);
  EXPECT_NE(error_of("[allocators.x]\nbackend = \"glibc\"\nkind = \"glibc\"\n").find("both"), std::string::npos);
}

TEST(Config, AnEmptyAxisIsAnErrorNotTheDefaults) {
  for (const char* key : {"allocators", "workloads", "threads", "thp"}) {
    std::string e = error_of(std::string("[matrix]\nreps = 1\n") + key + " = []\n");
    EXPECT_NE(e.find(std::string("'") + key + "' is an empty list"), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find(":3:"), std::string::npos) << key << ": " << e;  // the file, line and column
  }
}

TEST(Config, AVariantNameWithTheThpAxisMarkIsRefused) {
  std::string e = error_of("[allocators.\"g@thp=always\"]\nbackend = \"glibc\"\n");
  EXPECT_NE(e.find(":1:1: allocator 'g@thp=always': '@' is not allowed"), std::string::npos) << e;
  EXPECT_NE(error_of("[allocators.\"a@b\"]\nbackend = \"glibc\"\n", true).find("'@' is not allowed"), std::string::npos);
}

TEST(Config, VariantsFileTakesOnlyAllocators) {
  EXPECT_NE(error_of("[matrix]\nreps = 1\n", true).find("unknown key 'matrix'"), std::string::npos);
  EXPECT_EQ(error_of("[allocators.\"glibc:x\"]\nbackend = \"glibc\"\n", true), "");
}

TEST(Config, ShippedConfigsParse) {
  std::string dir = std::string(std::getenv("ALLOCMARK_SOURCE_DIR")) + "/configs";
  auto v = load_matrix_file(dir + "/variants.toml", true);
  EXPECT_TRUE(v.allocator_defs.count("jemalloc:bg"));
  EXPECT_TRUE(v.allocator_defs.count("glibc:arena1"));
  for (const char* f : {"quick.toml", "variants-sweep.toml"}) EXPECT_NO_THROW(load_matrix_file(dir + "/" + f)) << f;
  // Every example the docs point users at, in every folder under examples/ (programs, traces).
  int examples = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir + "/examples"))
    if (entry.path().extension() == ".toml") {
      ++examples;
      EXPECT_NO_THROW(load_matrix_file(entry.path().string())) << entry.path();
    }
  EXPECT_GE(examples, 30);  // 31 today: a floor, so that a moved folder or a wrong path fails here
}
