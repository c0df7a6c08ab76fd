// Allocator releases built from their pinned sources (`allocmark build jemalloc@5.2.1`; issue 43,
// docs/versions.md). A recipe per family is data (allocators/<family>/recipe.toml): which tarball,
// the files a valid source has, the build steps, the preload library and the symbol that proves it
// is that allocator. Builds land in a cache keyed by the source's, the recipe's and the compiler's
// identity, registered by one rename() so that a failed or killed build leaves nothing behind.
// Floor 2 (with the catalogue): it reads files, runs the build's commands and nothing above.
#pragma once

#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace allocmark::allocators::releases {

struct Release {
  std::string family, version;  // "jemalloc", "5.2.1"
  std::string name() const { return family + "@" + version; }
  bool operator==(const Release&) const = default;
};

// Parses "jemalloc@5.2.1" (a family with a recipe; a version of digits and dots, maybe with a
// suffix such as "5.3.0-rc1"); throws ConfigError naming the text and, for an unknown family, the
// families there are.
Release parse_release(std::string_view text);
// Family, then version by its numbers (5.10.0 after 5.9.0; 5.3.0-rc1 before 5.3.0): the order in
// which `list` and a matrix's allocator axis put releases, never the alphabet's.
bool release_less(const Release& a, const Release& b);
// The families with a recipe (allocators/*/recipe.toml), sorted: jemalloc, mimalloc, ...
std::vector<std::string> recipe_families();

// One family's recipe as it applies to one version.
struct Recipe {
  std::string family, backend;   // "tcmalloc": the catalogue's backend it is a release of
  std::string source;            // tarball name: SOURCE-VERSION.tar.gz ("gperftools")
  std::string upstream, tag;     // where releases come from, for messages ("{version}" placeholder)
  std::vector<std::string> required_files, steps, packages;
  std::string library;           // the preload library in the build tree ({src}/{build} placeholders)
  std::string signature;         // a dynamic symbol only this allocator exports
  std::string path, sha256;      // the recipe file and its contents' digest (part of the cache key)
};
// The recipe of `family` (throws ConfigError for a missing or malformed file, naming it and the key).
Recipe load_recipe(const std::string& family);
// The folder holding <family>/recipe.toml: $ALLOCMARK_RECIPE_DIR, else the source tree's allocators/.
std::string recipe_dir();

struct Built {  // what build.json says
  Release release;
  std::string library;  // absolute path of the preloadable .so
  std::string source_sha256, recipe_sha256, compiler, dir, log;  // dir: the cache entry
  std::string backend;  // the catalogue backend it belongs to ("jemalloc", "tcmalloc", ...)
  bool built_now = false;  // build_release built it in this call (not in build.json)
};

// ${ALLOCMARK_CACHE:-$HOME/.cache/allocmark}
std::string cache_root();
// $ALLOCMARK_SOURCES, else cache_root()/sources.
std::string sources_dir();
// The first line of `$CC --version` (cc when CC is unset): part of the cache key.
std::string compiler_identity();
// First 16 hex digits of sha256(source digest, recipe digest, compiler identity).
std::string cache_key(const std::string& source_sha256, const std::string& recipe_sha256,
                      const std::string& compiler);
// The entry's build.json read back; nullopt when it is missing, unreadable or its library is gone.
std::optional<Built> read_entry(const std::string& dir);

// A registered build of `r` for the current recipe and compiler; nothing is written or removed.
// Where several sources were built, the one matching the source find_source names wins.
std::optional<Built> find_built(const Release& r);

struct Source {
  std::string path, sha256;
  bool folder = false;  // an unpacked source (--source DIR): sha256 is folder_sha256's
};
// The digest of a source folder's contents: SHA-256 over every file's path (relative, sorted) and
// SHA-256 (a symbolic link's target instead), .git left out; two copies of one tree agree, any
// edited, added or removed file changes it.
std::string folder_sha256(const std::string& dir);
// explicit_path (--source, a tarball or an unpacked source folder) when given, else
// sources_dir()/SOURCE-VERSION.tar.gz; nullopt when that does not exist.
std::optional<Source> find_source(const Release& r, const std::string& explicit_path = "");

// Bad source, failing build, library that is not the allocator: exit 2 (a std::runtime_error the
// CLI answers with its message).
class BuildError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Builds `r` (or returns the registered build at once), one line per step on `progress`, the
// commands' output only in build.log. Throws BuildError with the log's last lines and its path;
// registers nothing on failure. Two builds of one release at once: the second waits, then finds it.
Built build_release(const Release& r, const std::string& explicit_source, std::ostream& progress);

// Every SOURCE-VERSION.tar.gz in sources_dir() that a recipe knows, by family then version (5.9
// before 5.10).
std::vector<Release> buildable_releases();
// Every registered build in the cache for the current recipes and compiler, in the same order.
std::vector<Built> built_releases();

}  // namespace allocmark::allocators::releases
