#include "harness/cli/common.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

#include "harness/results/model.h"
#include "harness/results/safe_text.h"

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

// Everything that would make the write fail or destroy results, checked before any work is done.
void check_output_file(const std::string& out, const std::string& flag, const std::vector<std::string>& reading) {
  fs::path path(out);
  if (out.empty()) throw std::invalid_argument(fmt::format("{}: the file name is empty", flag));
  if (fs::is_directory(path)) throw std::invalid_argument(fmt::format("{} {}: is a folder, not a file", flag, out));
  fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::is_directory(parent))
    throw std::invalid_argument(fmt::format("{} {}: folder {} does not exist", flag, out, parent.string()));
  // Where the write would land once every symlink is followed: a link named -o still destroys its target.
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(path, ec);
  const fs::path target_dir = ec ? fs::absolute(parent) : target.parent_path();
  for (const auto& dir : reading) {
    const fs::path folder = fs::weakly_canonical(dir, ec);
    if (ec) continue;
    auto [f, t] = std::mismatch(folder.begin(), folder.end(), target.begin(), target.end());
    if (f != folder.end() || t == target.end()) continue;
    // Pages and baselines may be written into the folder (report.html is its default); what a run
    // wrote there may not be overwritten.
    static const std::vector<std::string> kRunsOwn{"results.jsonl", "results.corrupt.jsonl", "meta.json", "summary.csv",
                                                   "summary.json", "cells.json", ".allocmark.lock", "logs", "parts",
                                                   "slurm", "data"};
    if (std::find(kRunsOwn.begin(), kRunsOwn.end(), t->string()) != kRunsOwn.end())
      throw std::invalid_argument(fmt::format("{} {}: would overwrite {}'s {}, which this command reads; write it elsewhere",
                                              flag, out, dir, t->string()));
  }
  const std::string name = target.filename().string();
  if ((name == "results.jsonl" || name == "meta.json") &&
      (fs::exists(target_dir / "results.jsonl", ec) || fs::exists(target_dir / "meta.json", ec)))
    throw std::invalid_argument(fmt::format("{} {}: is the {} of the results folder {}; write it elsewhere", flag, out, name,
                                            target_dir.string()));
  if (::access(parent.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: folder {} is not writable", flag, out, parent.string()));
  if (fs::exists(path) && ::access(path.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: not writable", flag, out));
}

void check_output_folder(const std::string& out, const std::string& flag) {
  if (out.empty()) throw std::invalid_argument(fmt::format("{}: the folder name is empty", flag));
  std::error_code ec;
  // The folder, or the nearest of its parents that exists: what the write would create it in.
  fs::path existing = fs::absolute(out, ec).lexically_normal();
  while (!fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    throw std::invalid_argument(existing == fs::absolute(out, ec).lexically_normal()
                                    ? fmt::format("{} {}: is a file, not a folder (the files go into a folder)", flag, out)
                                    : fmt::format("{} {}: {} is a file, not a folder", flag, out, existing.string()));
  if (::access(existing.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("{} {}: folder {} is not writable", flag, out, existing.string()));
}

void print_reading_notes(const results::Model& model) {
  for (const auto& n : model.writer_notices()) std::cerr << "allocmark: " << results::terminal_line(n) << "\n";
  for (const auto& w : model.warnings()) std::cerr << "allocmark: warning: " << results::terminal_line(w) << "\n";
}

void print_writer_notice(const std::string& dir) {
  if (std::string notice = results::writer_notice(dir); !notice.empty())
    std::cerr << "allocmark: " << results::terminal_line(notice) << "\n";
}

}  // namespace allocmark::cli
