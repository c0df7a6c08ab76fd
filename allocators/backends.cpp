#include "allocators/backends.h"

#include <unistd.h>

#include <regex>
#include <sstream>

#include "allocators/native_backends.h"

namespace allocmark::allocators {

namespace {
const Backend kGenericBackend{"generic", "any other malloc replacement named by library path; no native statistics",
                              {}, "", "", {}, {}, nullptr};
}  // namespace

const std::vector<const Backend*>& backends() {
  static const std::vector<const Backend*> catalogue{&kGlibcBackend,    &kJemallocBackend, &kTcmallocBackend,
                                                     &kMimallocBackend, &kNumapBackend,    &kSnmallocBackend,
                                                     &kRpmallocBackend, &kGenericBackend};
  return catalogue;
}

const Backend* find_backend(std::string_view name) {
  for (const Backend* b : backends())
    if (b->name == name) return b;
  return nullptr;
}

const NativeApi& native_api(std::string_view backend) {
  const Backend* b = find_backend(backend);
  if (!b || !b->native) throw std::out_of_range("no native API for allocator backend '" + std::string(backend) + "'");
  return *b->native;
}

std::string backend_names() {
  std::string out;
  for (const Backend* b : backends()) out += (out.empty() ? "" : ", ") + b->name;
  return out;
}

std::vector<std::string> library_dirs() {
#if defined(__x86_64__)
  const char* multiarch = "/usr/lib/x86_64-linux-gnu";
#elif defined(__aarch64__)
  const char* multiarch = "/usr/lib/aarch64-linux-gnu";
#else
  const char* multiarch = "/usr/lib";
#endif
  return {multiarch, "/usr/local/lib", "/usr/lib64", "/usr/lib", "/lib"};
}

std::optional<std::string> locate_library(const std::string& soname) {
  if (!soname.empty() && soname[0] == '/') {  // an absolute path (the in-tree numap build)
    if (::access(soname.c_str(), R_OK) == 0) return soname;
    return std::nullopt;
  }
  for (const auto& dir : library_dirs()) {
    std::string path = dir + "/" + soname;
    if (::access(path.c_str(), R_OK) == 0) return path;
  }
  return std::nullopt;
}

bool is_allocator_env(std::string_view name) {
  if (name == "LD_PRELOAD") return true;
  for (const Backend* b : backends()) {
    for (const auto& exact : b->env_names)
      if (name == exact) return true;
    for (const auto& prefix : b->env_prefixes)
      if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

std::string allocator_env_summary() {
  std::string out;
  for (const Backend* b : backends()) {
    for (const auto& p : b->env_prefixes) out += (out.empty() ? "" : ", ") + p + "*";
    for (const auto& n : b->env_names) out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}

std::string env_value_problem(const std::string& name, const std::string& value) {
  for (const Backend* b : backends())
    for (const auto& form : b->env_value_forms)
      if (form.name == name && !std::regex_match(value, std::regex(form.pattern)))
        return name + "=" + value + ": " + b->name + " expects " + form.expected + " and " +
               (form.otherwise.empty() ? "would ignore this value without a word" : form.otherwise);
  return "";
}

std::string invalid_config_line(const Backend& backend, const std::string& output) {
  if (backend.invalid_config_line.empty()) return "";
  const std::regex said(backend.invalid_config_line);
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, said)) return line;
  return "";
}

}  // namespace allocmark::allocators
