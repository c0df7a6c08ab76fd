// `allocmark build RELEASE... [--source PATH] [--rebuild]`: builds allocator releases from their
// pinned sources into the cache (allocators/releases/, docs/versions.md) and prints each library.
#include <filesystem>
#include <iostream>

#include "allocators/releases/releases.h"
#include "harness/cli/common.h"

namespace allocmark::cli {
namespace {

namespace rel = allocmark::allocators::releases;

struct BuildArgs {
  std::vector<std::string> releases;
  std::string source;
  bool rebuild = false;
};

// Every name is checked before anything is built: a typo in the third name wastes no build.
std::vector<rel::Release> parse_all(const BuildArgs& a) {
  std::vector<rel::Release> out;
  for (const auto& text : split_commas(a.releases, "RELEASE")) out.push_back(rel::parse_release(text));
  if (!a.source.empty() && out.size() != 1)
    throw std::invalid_argument("--source names the source of one release; " + std::to_string(out.size()) + " were given");
  return out;
}

// --rebuild: the registered entry is removed first (under no lock: a rebuild is a user's explicit
// act, and a build running at the same time still registers by rename).
void forget(const rel::Release& r) {
  if (auto b = rel::find_built(r)) {
    std::filesystem::remove_all(b->dir);
    std::cerr << "allocmark: removed " << b->dir << "\n";
  }
}

int run_build(const BuildArgs& a) {
  for (const auto& r : parse_all(a)) {
    if (a.rebuild) forget(r);
    const rel::Built b = rel::build_release(r, a.source, std::cerr);
    std::cout << r.name() << ": " << b.library << (b.built_now ? " (built now)" : " (already built)") << "\n";
  }
  return kExitOk;
}

}  // namespace

Subcommand add_build_command(CLI::App& app) {
  auto args = std::make_shared<BuildArgs>();
  auto* cmd = app.add_subcommand("build", "build allocator releases (jemalloc@5.2.1, tcmalloc@2.18.1, ...) from their sources");
  cmd->add_option("RELEASE", args->releases, "FAMILY@VERSION, several or comma separated")->required();
  cmd->add_option("--source", args->source,
                  "the release tarball, or an unpacked source folder (default: $ALLOCMARK_SOURCES/NAME-VERSION.tar.gz; "
                  "docs/versions.md)");
  cmd->add_flag("--rebuild", args->rebuild, "build again even where the cache has the release");
  return {cmd, [args] { return run_build(*args); }};
}

}  // namespace allocmark::cli
