#include "harness/cli/common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <iostream>

#include "harness/os/files.h"
#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/model.h"
#include "harness/results/safe_text.h"

namespace allocmark::cli {

namespace fs = std::filesystem;

namespace {
std::string self_dir() {
  const std::string path = os::self_exe_path();
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
  std::string out = os::read_text("/proc/self/cmdline");
  std::replace(out.begin(), out.end(), '\0', ' ');
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}


matrix::MatrixFile load_variants() {
  return matrix::load_matrix_file(matrix::config_dir() + "/variants.toml", /*variants_only=*/true, "the variants file");
}

namespace {

std::string system_reason() { return std::strerror(errno); }

// Whether `dir` is a results folder: it holds results.jsonl or meta.json (links not followed).
bool is_results_folder(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {results::layout::kResults, results::layout::kMeta})
    if (fs::is_regular_file(fs::symlink_status(dir / name, ec))) return true;
  return false;
}

// `path` absolute without . and .., and the same with every link followed.
std::vector<fs::path> both_spellings(const fs::path& path) {
  std::error_code ec;
  std::vector<fs::path> out{fs::absolute(path, ec).lexically_normal()};
  fs::path resolved = fs::weakly_canonical(path, ec);
  if (!ec && resolved != out[0]) out.push_back(resolved);
  return out;
}

// Refuses a `target` that is, or lies inside, one of a run's own entries of a folder in `reading`
// or of any results folder above it.
void refuse_run_files(const std::string& out, const std::string& flag, const std::vector<std::string>& reading) {
  std::vector<fs::path> read_folders;
  for (const auto& dir : reading)
    for (const auto& spelling : both_spellings(dir)) read_folders.push_back(spelling);
  for (const fs::path& target : both_spellings(out)) {
    for (fs::path folder = target.parent_path(), below = target;; below = folder, folder = folder.parent_path()) {
      const bool read = std::find(read_folders.begin(), read_folders.end(), folder) != read_folders.end();
      const std::string entry = below.filename().string();
      if ((read || is_results_folder(folder)) && results::layout::is_own_entry(entry)) {
        if (read)
          throw std::invalid_argument(fmt::format("{} {}: would overwrite {}'s {}, which this command reads; write it elsewhere",
                                                  flag, out, folder.string(), entry));
        throw std::invalid_argument(fmt::format("{} {}: is the {} of the results folder {}; write it elsewhere", flag, out,
                                                entry, folder.string()));
      }
      if (folder == folder.root_path() || folder.empty()) break;
    }
  }
}

}  // namespace

void check_writable_file(const std::string& out, const std::string& flag) {
  fs::path path(out);
  std::error_code ec;
  if (out.empty()) throw std::invalid_argument(fmt::format("{}: the file name is empty", flag));
  if (fs::is_directory(path, ec)) throw std::invalid_argument(fmt::format("{} {}: is a folder, not a file", flag, out));
  // Written by renaming a new file over it: a device there (-o /dev/null) would be replaced.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    throw std::invalid_argument(fmt::format("{} {}: is a device, fifo or socket, not a file", flag, out));
  fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::is_directory(parent, ec))
    throw std::invalid_argument(fmt::format("{} {}: folder {} does not exist", flag, out, parent.string()));
  if (::access(parent.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: folder {} is not writable ({})", flag, out, parent.string(), system_reason()));
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: not writable ({})", flag, out, system_reason()));
}

// Everything that would make the write fail or destroy results, checked before any work is done.
void check_output_file(const std::string& out, const std::string& flag, const std::vector<std::string>& reading) {
  if (out.empty()) throw std::invalid_argument(fmt::format("{}: the file name is empty", flag));
  refuse_run_files(out, flag, reading);
  check_writable_file(out, flag);
}

void check_output_folder(const std::string& out, const std::string& flag, const std::vector<std::string>& reading) {
  if (out.empty()) throw std::invalid_argument(fmt::format("{}: the folder name is empty", flag));
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw std::invalid_argument(fmt::format("{} {}: is a file, not a folder (the charts are written into a folder)", flag, out));
  refuse_run_files(out, flag, reading);
  // The folder, or the nearest folder above it that exists (the rest is created), must be writable.
  fs::path existing = fs::absolute(out, ec);
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    throw std::invalid_argument(fmt::format("{} {}: {} is not a folder", flag, out, existing.string()));
  if (::access(existing.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: folder {} is not writable ({})", flag, out, existing.string(), system_reason()));
}

void print_reading_notes(const results::Model& model) {
  for (const auto& n : model.writer_notices()) std::cerr << "allocmark: " << results::terminal_line(n) << "\n";
  for (const auto& w : model.warnings()) std::cerr << "allocmark: warning: " << results::terminal_line(w) << "\n";
}

void print_time_notes(const std::vector<std::string>& dirs) {
  std::vector<std::string> noted;
  std::string notice;
  for (const auto& dir : dirs)
    if (std::string n = results::page_reporting_notice(results::meta::read(dir).value);
        !n.empty() && std::find(noted.begin(), noted.end(), dir) == noted.end()) {
      noted.push_back(dir);
      notice = n;
    }
  if (!noted.empty())
    std::cerr << "allocmark: note on time (" << results::terminal_line(fmt::format("{}", fmt::join(noted, ", "))) << "): " << notice
              << "\n";
}

void print_writer_notice(const std::string& dir) {
  if (std::string notice = results::writer_notice(dir); !notice.empty())
    std::cerr << "allocmark: " << results::terminal_line(notice) << "\n";
}

}  // namespace allocmark::cli
