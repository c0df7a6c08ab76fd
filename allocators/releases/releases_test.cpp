// Release names, the recipes in this tree, the cache key and a hand-made cache entry, and the bad
// sources a build refuses before running anything. Real builds: tests/build_test.py.
#include "allocators/releases/releases.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "allocators/backends.h"
#include "units/config_error.h"
#include "units/input_file.h"

namespace {

namespace fs = std::filesystem;
using namespace allocmark::allocators::releases;

// A fresh cache and sources folder per test, and the tree's recipes.
class Releases : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("releases_test-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "sources");
    ::setenv("ALLOCMARK_CACHE", (root_ / "cache").c_str(), 1);
    ::setenv("ALLOCMARK_SOURCES", (root_ / "sources").c_str(), 1);
    ::setenv("ALLOCMARK_RECIPE_DIR", ALLOCMARK_RECIPES, 1);
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  // A registered entry as build.cpp writes it, with a stand-in library file.
  fs::path hand_made_entry(const Release& r, const std::string& compiler, const std::string& source_sha) {
    const Recipe recipe = load_recipe(r.family);
    const fs::path dir = root_ / "cache/builds" / (r.family + "-" + r.version + "-" + cache_key(source_sha, recipe.sha256, compiler));
    write(dir / "libjemalloc.so.2", "stand-in");
    nlohmann_like_json(dir, r, compiler, source_sha, recipe.sha256);
    return dir;
  }

  void nlohmann_like_json(const fs::path& dir, const Release& r, const std::string& compiler, const std::string& source_sha,
                          const std::string& recipe_sha) {
    std::ostringstream j;
    j << R"({"release": {"family": ")" << r.family << R"(", "version": ")" << r.version << R"("}, "backend": "jemalloc",)"
      << R"("library": ")" << (dir / "libjemalloc.so.2").string() << R"(", "source_sha256": ")" << source_sha
      << R"(", "recipe_sha256": ")" << recipe_sha << R"(", "compiler": ")" << compiler << R"(", "log": ")"
      << (dir / "build.log").string() << R"("})";
    write(dir / "build.json", j.str());
  }

  fs::path root_;
};

TEST_F(Releases, ParsesFamilyAtVersion) {
  EXPECT_EQ(parse_release("jemalloc@5.2.1"), (Release{"jemalloc", "5.2.1"}));
  EXPECT_EQ(parse_release("tcmalloc@2.18.1"), (Release{"tcmalloc", "2.18.1"}));
  EXPECT_EQ(parse_release("jemalloc@5.3.0-rc1"), (Release{"jemalloc", "5.3.0-rc1"}));
  EXPECT_EQ(parse_release("mimalloc@3.4.3").name(), "mimalloc@3.4.3");
}

TEST_F(Releases, RefusesBadNamesNamingThem) {
  for (const char* bad : {"jemalloc", "@5.2.1", "jemalloc@", "jemalloc@latest", "jemalloc@5..1", "jemalloc@5.2.1/../x",
                          "jemalloc@5.2.1 ", "jemalloc@v5.2.1"}) {
    try {
      parse_release(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const allocmark::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  try {
    parse_release("hoard@3.13");
    ADD_FAILURE() << "hoard was accepted";
  } catch (const allocmark::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("families: jemalloc, mimalloc, rpmalloc, snmalloc, tcmalloc"), std::string::npos) << e.what();
  }
}

// snmalloc and rpmalloc are built here before the catalogue has their tables (issue 43, "New peers").
TEST_F(Releases, EveryRecipeParsesAndNamesABackend) {
  const std::set<std::string> not_yet_in_catalogue{"snmalloc", "rpmalloc"};
  EXPECT_EQ(recipe_families(), (std::vector<std::string>{"jemalloc", "mimalloc", "rpmalloc", "snmalloc", "tcmalloc"}));
  for (const auto& family : recipe_families()) {
    const Recipe r = load_recipe(family);
    EXPECT_TRUE(allocmark::allocators::find_backend(r.backend) != nullptr || not_yet_in_catalogue.count(r.backend)) << family;
    EXPECT_FALSE(r.steps.empty()) << family;
    EXPECT_TRUE(r.library.rfind("{src}/", 0) == 0 || r.library.rfind("{build}/", 0) == 0) << family << ": " << r.library;
    EXPECT_NE(r.tag.find("{version}"), std::string::npos) << family;
    EXPECT_EQ(r.sha256, allocmark::units::file_sha256(r.path, "recipe")) << family;
  }
  EXPECT_EQ(load_recipe("tcmalloc").source, "gperftools");
  EXPECT_EQ(load_recipe("jemalloc").signature, "mallctl");
}

TEST_F(Releases, MalformedRecipeNamesFileAndKey) {
  ::setenv("ALLOCMARK_RECIPE_DIR", root_.c_str(), 1);
  write(root_ / "jemalloc/recipe.toml", "backend = \"jemalloc\"\nflavour = 1\n");
  try {
    load_recipe("jemalloc");
    ADD_FAILURE() << "accepted";
  } catch (const allocmark::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("recipe.toml:2:1: unknown key 'flavour'"), std::string::npos) << e.what();
  }
  write(root_ / "jemalloc/recipe.toml", "backend = \"jemalloc\"\n");
  try {
    load_recipe("jemalloc");
    ADD_FAILURE() << "accepted";
  } catch (const allocmark::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'source' must be a non-empty string"), std::string::npos) << e.what();
  }
}

TEST_F(Releases, CacheKeyDependsOnEachPart) {
  const std::string k = cache_key("aa", "bb", "gcc 12");
  EXPECT_EQ(k.size(), 16u);
  EXPECT_EQ(k.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(k, cache_key("aa", "bb", "gcc 12"));
  EXPECT_NE(k, cache_key("ab", "bb", "gcc 12"));
  EXPECT_NE(k, cache_key("aa", "bc", "gcc 12"));
  EXPECT_NE(k, cache_key("aa", "bb", "gcc 13"));
  EXPECT_NE(cache_key("a", "ab", "c"), cache_key("aa", "b", "c"));  // parts are separated
}

TEST_F(Releases, FindsAHandMadeEntryForTheCurrentRecipeAndCompiler) {
  const Release r{"jemalloc", "5.2.1"};
  EXPECT_FALSE(find_built(r));
  const fs::path dir = hand_made_entry(r, compiler_identity(), std::string(64, 'a'));
  write(root_ / "cache/builds/.tmp-jemalloc-5.2.1-1/libjemalloc.so.2", "half a build");
  auto b = find_built(r);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dir, dir.string());
  EXPECT_EQ(b->library, (dir / "libjemalloc.so.2").string());
  EXPECT_EQ(b->backend, "jemalloc");
  EXPECT_FALSE(b->built_now);
  EXPECT_FALSE(find_built({"jemalloc", "5.2.0"}));
  ASSERT_EQ(built_releases().size(), 1u);
  fs::remove(dir / "libjemalloc.so.2");
  EXPECT_FALSE(find_built(r)) << "an entry without its library is not built";
}

TEST_F(Releases, IgnoresEntriesOfAnotherCompiler) {
  hand_made_entry({"jemalloc", "5.2.1"}, "gcc (Imaginary) 99.0", std::string(64, 'a'));
  EXPECT_FALSE(find_built({"jemalloc", "5.2.1"}));
}

TEST_F(Releases, FindsSourcesByRecipeName) {
  write(root_ / "sources/gperftools-2.10.tar.gz", "x");
  write(root_ / "sources/jemalloc-5.2.1.tar.gz", "y");
  write(root_ / "sources/hoard-3.13.tar.gz", "z");
  write(root_ / "sources/README.md", "r");
  write(root_ / "sources/jemalloc-5.10.0.tar.gz", "w");
  write(root_ / "sources/jemalloc-5.2.1-rc1.tar.gz", "v");
  EXPECT_EQ(buildable_releases(), (std::vector<Release>{{"jemalloc", "5.2.1-rc1"}, {"jemalloc", "5.2.1"}, {"jemalloc", "5.10.0"},
                                                        {"tcmalloc", "2.10"}}));
  auto s = find_source({"tcmalloc", "2.10"});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->path, (root_ / "sources/gperftools-2.10.tar.gz").string());
  EXPECT_EQ(s->sha256, allocmark::units::sha256_hex("x"));
  EXPECT_FALSE(find_source({"tcmalloc", "2.11"}));
  EXPECT_FALSE(find_source({"tcmalloc", "2.10"}, (root_ / "nowhere.tar.gz").string()));
}

// Each refusal before any step runs, with its message, and nothing registered.
TEST_F(Releases, RefusesBadSourcesRegisteringNothing) {
  std::ostringstream progress;
  auto message = [&](const Release& r, const std::string& source) {
    try {
      build_release(r, source, progress);
    } catch (const BuildError& e) {
      return std::string(e.what());
    }
    return std::string("built");
  };
  EXPECT_NE(message({"jemalloc", "9.9.9"}, "").find("no source for jemalloc@9.9.9: looked for " +
                                                     (root_ / "sources/jemalloc-9.9.9.tar.gz").string()),
            std::string::npos);
  EXPECT_NE(message({"jemalloc", "9.9.9"}, "").find("tag 9.9.9"), std::string::npos);
  EXPECT_NE(message({"jemalloc", "9.9.9"}, (root_ / "none.tar.gz").string()).find("--source"), std::string::npos);
  write(root_ / "sources/jemalloc-9.9.9.tar.gz", "not a tarball\n");
  EXPECT_NE(message({"jemalloc", "9.9.9"}, "").find("not a gzip-compressed tar archive"), std::string::npos);
  write(root_ / "src/mimalloc-9.9.9/README.md", "hello\n");
  ASSERT_EQ(std::system(("tar -czf " + (root_ / "sources/mimalloc-9.9.9.tar.gz").string() + " -C " + (root_ / "src").string() +
                         " mimalloc-9.9.9").c_str()), 0);
  EXPECT_NE(message({"mimalloc", "9.9.9"}, "").find("is not a mimalloc source: it lacks CMakeLists.txt, src/alloc.c, include/mimalloc.h"),
            std::string::npos);
  EXPECT_EQ(progress.str(), "");
  EXPECT_TRUE(built_releases().empty());
}

// --source DIR: an unpacked release. Digested by content (not by path or by .git), and refused,
// naming what it lacks, before any step runs.
TEST_F(Releases, SourceFoldersAreDigestedByContentAndCheckedForTheRecipesFiles) {
  write(root_ / "a/src/alloc.c", "x");
  write(root_ / "a/README.md", "r");
  write(root_ / "b/src/alloc.c", "x");
  write(root_ / "b/README.md", "r");
  write(root_ / "b/.git/HEAD", "ref: refs/heads/main");
  const std::string a = folder_sha256((root_ / "a").string());
  EXPECT_EQ(a, folder_sha256((root_ / "b").string()));
  write(root_ / "b/src/alloc.c", "y");
  EXPECT_NE(a, folder_sha256((root_ / "b").string()));
  auto s = find_source({"mimalloc", "9.9.9"}, (root_ / "a").string());
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->folder);
  EXPECT_EQ(s->sha256, a);

  std::ostringstream progress;
  try {
    build_release({"mimalloc", "9.9.9"}, (root_ / "a").string(), progress);
    ADD_FAILURE() << "built";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find((root_ / "a").string() + " is not a mimalloc source: it lacks CMakeLists.txt, "
                                         "include/mimalloc.h"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(progress.str(), "");
  EXPECT_TRUE(built_releases().empty());
}

}  // namespace
