// The build cache (${ALLOCMARK_CACHE:-~/.cache/allocmark}/builds/FAMILY-VERSION-KEY/) and the
// sources folder: reading only; build.cpp writes.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "allocators/releases/command.h"
#include "allocators/releases/releases.h"
#include "units/input_file.h"

namespace allocmark::allocators::releases {
namespace fs = std::filesystem;

std::string cache_root() {
  if (const char* dir = std::getenv("ALLOCMARK_CACHE"); dir && *dir) return dir;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/allocmark";
}

std::string sources_dir() {
  if (const char* dir = std::getenv("ALLOCMARK_SOURCES"); dir && *dir) return dir;
  return cache_root() + "/sources";
}

std::string compiler_identity() {
  // Through the shell so that CC may carry arguments ("ccache gcc"), as make and cmake allow.
  CommandResult r = capture({"/bin/sh", "-c", "${CC:-cc} --version"});
  const std::string first = r.output.substr(0, r.output.find('\n'));
  if (r.status != 0 || first.empty()) throw BuildError("no C compiler: `${CC:-cc} --version` failed; install gcc (build-essential)");
  return first;
}

std::string cache_key(const std::string& source_sha256, const std::string& recipe_sha256, const std::string& compiler) {
  return units::sha256_hex(source_sha256 + "\n" + recipe_sha256 + "\n" + compiler + "\n").substr(0, 16);
}

std::optional<Built> read_entry(const std::string& dir) {
  std::ifstream in(dir + "/build.json");
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    Built b;
    b.release = {j.at("release").at("family").get<std::string>(), j.at("release").at("version").get<std::string>()};
    b.library = j.at("library").get<std::string>();
    b.source_sha256 = j.at("source_sha256").get<std::string>();
    b.recipe_sha256 = j.at("recipe_sha256").get<std::string>();
    b.compiler = j.at("compiler").get<std::string>();
    b.log = j.at("log").get<std::string>();
    b.backend = j.at("backend").get<std::string>();
    b.dir = dir;
    if (!fs::is_regular_file(b.library)) return std::nullopt;
    return b;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

bool release_less(const Release& a, const Release& b) {
  if (a.family != b.family) return a.family < b.family;
  auto numbers = [](const std::string& v) {
    std::vector<long> out;
    std::size_t at = 0;
    while (at < v.size() && std::isdigit(static_cast<unsigned char>(v[at]))) {
      std::size_t used = 0;
      out.push_back(std::stol(v.substr(at), &used));
      at += used;
      if (at < v.size() && v[at] == '.') ++at;
    }
    return std::make_pair(out, v.find('-') == std::string::npos);
  };
  return numbers(a.version) != numbers(b.version) ? numbers(a.version) < numbers(b.version) : a.version < b.version;
}

namespace {

// Registered entries of `r` (any key), in name order; temp folders start with '.', so never match.
std::vector<Built> entries_of(const Release& r) {
  std::vector<Built> out;
  const std::string prefix = r.family + "-" + r.version + "-";
  std::error_code ec;
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(cache_root() + "/builds", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() == prefix.size() + 16) dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs)
    if (auto b = read_entry(d); b && b->release == r) out.push_back(*b);
  return out;
}

}  // namespace

std::optional<Built> find_built(const Release& r) {
  const Recipe recipe = load_recipe(r.family);
  const std::string compiler = compiler_identity();
  std::vector<Built> current;
  for (auto& b : entries_of(r))
    if (b.recipe_sha256 == recipe.sha256 && b.compiler == compiler) current.push_back(b);
  if (current.empty()) return std::nullopt;
  if (current.size() > 1) {
    if (auto s = find_source(r))
      for (const auto& b : current)
        if (b.source_sha256 == s->sha256) return b;
  }
  return current.front();
}

std::string folder_sha256(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> items;  // relative path, its digest or link target
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = fs::relative(it->path(), dir).string();
    if (it->path().filename() == ".git") {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink())
      items.emplace_back(rel, "link " + fs::read_symlink(it->path()).string());
    else if (it->is_regular_file())
      items.emplace_back(rel, units::file_sha256(it->path().string(), "source file " + it->path().string()));
  }
  if (ec) throw BuildError("cannot read the source folder " + dir + ": " + ec.message());
  std::sort(items.begin(), items.end());
  std::string listing;
  for (const auto& [rel, digest] : items) listing += rel + '\0' + digest + '\n';
  return units::sha256_hex(listing);
}

std::optional<Source> find_source(const Release& r, const std::string& explicit_path) {
  std::string path = explicit_path;
  if (path.empty()) path = sources_dir() + "/" + load_recipe(r.family).source + "-" + r.version + ".tar.gz";
  if (!fs::exists(path)) return std::nullopt;
  const std::string absolute = fs::absolute(path).lexically_normal().string();
  if (fs::is_directory(path)) return Source{absolute, folder_sha256(path), true};
  return Source{absolute, units::file_sha256(path, "source " + path)};
}

std::vector<Release> buildable_releases() {
  std::vector<Release> out;
  static const std::regex name(R"((.+)-([0-9]+(\.[0-9]+)*(-[A-Za-z0-9.]+)?)\.tar\.gz)");
  std::error_code ec;
  for (const auto& family : recipe_families()) {
    const std::string source = load_recipe(family).source;
    for (const auto& e : fs::directory_iterator(sources_dir(), ec)) {
      std::smatch m;
      const std::string file = e.path().filename().string();
      if (std::regex_match(file, m, name) && m[1] == source) out.push_back({family, m[2]});
    }
  }
  std::sort(out.begin(), out.end(), release_less);
  return out;
}

std::vector<Built> built_releases() {
  std::vector<Built> out;
  std::error_code ec;
  std::vector<Release> seen;
  const auto families = recipe_families();
  for (const auto& e : fs::directory_iterator(cache_root() + "/builds", ec)) {
    auto b = read_entry(e.path().string());
    if (!b || std::find(seen.begin(), seen.end(), b->release) != seen.end()) continue;
    if (std::find(families.begin(), families.end(), b->release.family) == families.end()) continue;  // recipe gone
    seen.push_back(b->release);
    if (auto current = find_built(b->release)) out.push_back(*current);
  }
  std::sort(out.begin(), out.end(), [](const Built& a, const Built& b) { return release_less(a.release, b.release); });
  return out;
}

}  // namespace allocmark::allocators::releases
