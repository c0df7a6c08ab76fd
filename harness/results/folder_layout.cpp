#include "harness/results/folder_layout.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "harness/record/cell.h"

namespace allocmark::results::layout {

namespace {
// Well under NAME_MAX (255) with ".attemptN.stdout" added.
constexpr std::size_t kMaxStem = 200;
}  // namespace

const std::vector<OwnEntry>& own_entries() {
  using T = Folder::Type;
  static const std::vector<OwnEntry> entries{
      {kResults, T::file}, {kCorrupt, T::file}, {kMeta, T::file},    {kSummaryCsv, T::file},  {kSummaryJson, T::file},
      {kTimelines, T::file}, {kCells, T::file},   {kLock, T::file},    {kLogs, T::folder},  {kParts, T::folder},     {kSlurm, T::folder},
      {kData, T::folder},  {kMachines, T::folder}};
  return entries;
}

bool is_own_entry(const std::string& name) {
  const auto& all = own_entries();
  return std::any_of(all.begin(), all.end(), [&](const OwnEntry& e) { return name == e.name; });
}

CellFiles cell_files(const std::string& key, int attempt) {
  std::string stem;
  for (char c : key) stem += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  if (stem.size() > kMaxStem) {
    // Allocator names are the user's and may be long: a name the file system refuses would stop the run.
    const uint64_t h = record::fnv1a64(key.data(), key.size());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    stem = stem.substr(0, kMaxStem - 17) + "-" + hex;
  }
  if (attempt > 1) stem += ".attempt" + std::to_string(attempt);
  return {stem, std::string(kLogs) + "/" + stem + ".log", std::string(kLogs) + "/" + stem + ".stdout",
          std::string(kData) + "/" + stem + ".data"};
}

std::string path_in(const std::string& dir, const char* name) { return dir + "/" + name; }

std::string log_stem(const std::string& log_path) {
  std::string name = std::filesystem::path(log_path).filename().string();
  if (name.size() > 4 && name.ends_with(".log")) name.resize(name.size() - 4);
  return name;
}

std::string stdout_beside(const std::string& log_path) {
  const std::string dir = std::filesystem::path(log_path).parent_path().string();
  return (dir.empty() ? "" : dir + "/") + log_stem(log_path) + ".stdout";
}

std::string data_folder_name(const std::string& log_path) { return log_stem(log_path) + ".data"; }

}  // namespace allocmark::results::layout
