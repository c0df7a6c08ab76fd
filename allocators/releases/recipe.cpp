// Release names and recipes (allocators/<family>/recipe.toml), read with toml++.
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "allocators/releases/releases.h"
#include "harness/toml/unknown_keys.h"
#include "units/config_error.h"
#include "units/input_file.h"

namespace allocmark::allocators::releases {
namespace fs = std::filesystem;

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::string recipe_path(const std::string& family) { return recipe_dir() + "/" + family + "/recipe.toml"; }

std::string text_of(const toml::table& t, const std::string& key, const std::string& where) {
  auto v = t[key].value<std::string>();
  if (!v || v->empty()) throw ConfigError(where + ": '" + key + "' must be a non-empty string");
  return *v;
}

std::vector<std::string> list_of(const toml::table& t, const std::string& key, const std::string& where) {
  const toml::array* a = t[key].as_array();
  if (a == nullptr || a->empty()) throw ConfigError(where + ": '" + key + "' must be a non-empty list of strings");
  std::vector<std::string> out;
  for (const auto& item : *a) {
    auto s = item.value<std::string>();
    if (!s || s->empty()) throw ConfigError(where + ": '" + key + "' must be a non-empty list of strings");
    out.push_back(*s);
  }
  return out;
}

toml::table parse_file(const std::string& path) {
  units::check_input_file(path, "recipe");
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(path + ": " + std::string(e.description()));
  }
}

}  // namespace

std::string recipe_dir() {
  if (const char* dir = std::getenv("ALLOCMARK_RECIPE_DIR"); dir && *dir) return dir;
  return ALLOCMARK_DEFAULT_RECIPE_DIR;
}

std::vector<std::string> recipe_families() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(recipe_dir(), ec))
    if (fs::is_regular_file(entry.path() / "recipe.toml")) out.push_back(entry.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

Recipe load_recipe(const std::string& family) {
  Recipe r;
  r.family = family;
  r.path = recipe_path(family);
  toml::table t = parse_file(r.path);
  std::string bad = toml_files::unknown_key(r.path, t, "a recipe",
      {"backend", "source", "upstream", "tag", "required_files", "steps", "packages", "library", "signature"});
  if (!bad.empty()) throw ConfigError(bad);
  r.backend = text_of(t, "backend", r.path);
  r.source = text_of(t, "source", r.path);
  r.upstream = text_of(t, "upstream", r.path);
  r.tag = text_of(t, "tag", r.path);
  r.required_files = list_of(t, "required_files", r.path);
  r.steps = list_of(t, "steps", r.path);
  r.packages = list_of(t, "packages", r.path);
  r.library = text_of(t, "library", r.path);
  r.signature = text_of(t, "signature", r.path);
  r.sha256 = units::file_sha256(r.path, "recipe");
  return r;
}

Release parse_release(std::string_view text) {
  const std::string s(text);
  const auto at = s.find('@');
  if (at == std::string::npos || at == 0)
    throw ConfigError("'" + s + "' is not a release: write FAMILY@VERSION, for example jemalloc@5.3.0");
  Release r{s.substr(0, at), s.substr(at + 1)};
  const auto families = recipe_families();
  if (std::find(families.begin(), families.end(), r.family) == families.end())
    throw ConfigError("'" + s + "': no recipe for '" + r.family + "' (families: " + joined(families) + ")");
  // Digits and dots, then at most one suffix such as -rc1: the version is part of file names.
  static const std::regex version(R"([0-9]+(\.[0-9]+)*(-[A-Za-z0-9.]+)?)");
  if (!std::regex_match(r.version, version))
    throw ConfigError("'" + s + "': '" + r.version +
                      "' is not a version (digits and dots, maybe a suffix such as 5.3.0-rc1)");
  return r;
}

}  // namespace allocmark::allocators::releases
