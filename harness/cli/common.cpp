#include "harness/cli/common.h"

#include <fmt/format.h>

#include <unistd.h>

#include <climits>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace allocmark::cli {

namespace fs = std::filesystem;

namespace {
std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}
}  // namespace

std::vector<std::string> split_commas(const std::vector<std::string>& items, const std::string& flag) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::size_t start = 0;
    for (;;) {
      std::size_t comma = item.find(',', start);
      std::string part = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (part.empty())
        throw matrix::ConfigError(flag + ": empty item in '" + item + "' (expected a comma-separated list)");
      out.push_back(part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

std::string worker_path() {
  if (const char* w = std::getenv("ALLOCMARK_WORKER"); w && *w) return w;
  return self_dir() + "/allocmark-worker";
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

matrix::MatrixFile load_variants() {
  return matrix::load_matrix_file(matrix::config_dir() + "/variants.toml", /*variants_only=*/true);
}

// Everything that would make the write fail, checked before the charts are drawn.
void check_output_file(const std::string& out, const std::string& flag) {
  fs::path path(out);
  if (fs::is_directory(path)) throw std::invalid_argument(fmt::format("{} {}: is a folder, not a file", flag, out));
  fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::is_directory(parent))
    throw std::invalid_argument(fmt::format("{} {}: folder {} does not exist", flag, out, parent.string()));
  if (::access(parent.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: folder {} is not writable", flag, out, parent.string()));
  if (fs::exists(path) && ::access(path.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: not writable", flag, out));
}


}  // namespace allocmark::cli
