#include "harness/runner/merge.h"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "harness/matrix/config.h"
#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/model.h"
#include "harness/results/reporters/reporter.h"
#include "harness/results/results_dir.h"
#include "harness/results/safe_text.h"
#include "harness/runner/executor_choice.h"
#include "harness/runner/session.h"

namespace allocmark::runner {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
namespace rs = allocmark::results;

using MergeError = matrix::ConfigError;  // bad input: exit 2

// The checks every command that must not act on a partial folder makes: a run holding its lock
// here, and its Slurm array still running.
void refuse_if_in_use(const std::string& dir) {
  rs::refuse_folder_being_written(dir, "merge it when that run has finished");
  refuse_while_cells_run_elsewhere(dir, "merge it", &std::cerr);
}

struct Source {
  std::string folder;  // canonical
  json meta;
  std::vector<json> records;  // the winning attempt of each key, in file order
  std::vector<std::pair<std::string, std::size_t>> read_at;  // each record's file and line
};

Source read_source(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw MergeError(dir + ": no such results folder");
  Source s;
  s.folder = fs::canonical(dir, ec).string();
  const rs::meta::Recorded meta = rs::meta::read(dir);
  rs::check_readable_file(rs::layout::path_in(dir, rs::layout::kResults));
  if (!meta.ok()) throw MergeError(meta.path + ": missing or not valid JSON");
  s.meta = meta.value;
  refuse_if_in_use(dir);
  const std::string host = rs::meta::host(s.meta);

  struct Text {
    std::string file;
    std::size_t line;
    std::string text;
  };
  std::vector<Text> texts;
  const std::string results = rs::layout::path_in(dir, rs::layout::kResults);
  std::ifstream in(results, std::ios::binary);
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n)
    if (line.find_first_not_of(" \t\r") != std::string::npos) texts.push_back({results, n, line});
  for (const auto& part : rs::part_files(dir)) {
    std::ifstream p(part, std::ios::binary);
    texts.push_back({part, 1, std::string((std::istreambuf_iterator<char>(p)), std::istreambuf_iterator<char>())});
  }
  std::map<std::string, std::pair<std::size_t, rs::RecordIdentity>> by_slot;  // -> index in records, its identity
  for (const auto& [file, n, text] : texts) {
    const std::string where = file == results ? fmt::format("{}:{}", file, n) : file;
    json r = json::parse(text, nullptr, false);
    if (!rs::record_identity_of(r))
      throw MergeError(where + ": not a valid record; repair the folder (`allocmark run ... --resume` names and handles damaged lines) before merging it");
    if (!r.contains(rs::kRecordHost) || !r[rs::kRecordHost].is_string()) r[rs::kRecordHost] = host;
    if (!r.contains(rs::kRecordOrigin) || !r[rs::kRecordOrigin].is_string()) r[rs::kRecordOrigin] = s.folder;
    const rs::RecordIdentity id = *rs::record_identity_of(r);
    auto [it, fresh] = by_slot.try_emplace(id.slot(), s.records.size(), id);
    if (fresh) {
      s.records.push_back(std::move(r));
      s.read_at.emplace_back(file, n);
    } else if (rs::versus(id, it->second.second) == rs::RecordVersus::supersedes) {
      s.records[it->second.first] = std::move(r);
      s.read_at[it->second.first] = {file, n};
      it->second.second = id;
    }
  }
  if (s.records.empty()) throw MergeError(dir + " holds no finished cell");
  return s;
}

std::vector<Source> read_sources(const std::vector<std::string>& dirs) {
  std::vector<Source> sources;
  std::set<std::string> seen_folders;
  for (const auto& d : dirs) {
    Source s = read_source(d);
    if (!seen_folders.insert(s.folder).second) throw MergeError(d + " is given twice");
    sources.push_back(std::move(s));
  }
  return sources;
}

// The sources' machines, allocators and records, folded one source after another.
class Merger {
 public:
  void add(const Source& s) {
    add_machines(s);
    for (const auto& a : s.meta.value(rs::meta::kAllocators, json::array())) {
      bool known = false;
      for (const auto& b : allocators_) known = known || b == a;
      if (!known) allocators_.push_back(a);
    }
    const std::size_t cells = add_records(s);
    json entry{{"folder", s.folder}, {"cells", cells}};
    namespace m = rs::meta;
    for (const char* field : {m::kAllocmark, m::kMachine, m::kMachines, m::kMatrix, m::kMatrixFile, m::kRuns, m::kStarted, m::kStrippedEnvironment})
      if (s.meta.contains(field)) entry[field] = s.meta[field];
    merged_from_.push_back(entry);
  }

  std::string lines() const {
    std::string lines;
    for (const auto& r : kept_) lines += r.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    return lines;
  }

  json meta(const std::vector<Source>& sources, const std::string& command) const {
    namespace m = rs::meta;
    json meta{{m::kAllocmark, allocmark_identity()},
              {m::kMergedFrom, merged_from_},
              {m::kMachines, machines_},
              {m::kAllocators, allocators_},
              {m::kStarted, std::time(nullptr)},
              {m::kRuns, json::array({{{m::run_entry::kMode, "merge"}, {m::run_entry::kCommand, command}, {m::run_entry::kStarted, std::time(nullptr)}}})}};
    // One machine: the folder reads like a run on it (the gate's fingerprint, plots' captions).
    if (machines_.size() == 1) meta[m::kMachine] = machines_.begin()->second;
    if (!sources.empty() && sources[0].meta.contains(m::kBackends)) meta[m::kBackends] = sources[0].meta[m::kBackends];
    return meta;
  }

  MergeOutcome outcome(std::size_t sources) const {
    return {kept_.size(), sources, machines_.size(), repeated_, collisions_.warning()};
  }

 private:
  void add_machines(const Source& s) {
    for (const auto& [host, machine] : rs::meta::machines(s.meta)) {
      auto [it, fresh] = machines_.try_emplace(host, machine);
      if (!fresh)
        if (auto diff = rs::machine_differences(it->second, machine); !diff.empty())
          throw MergeError(fmt::format("host {} is described differently by {} and {} ({}); its cells would pool across "
                                       "machines that differ: merge those folders separately",
                                       host, described_by_[host], s.folder, diff));
      described_by_.try_emplace(host, s.folder);
    }
  }

  // The source's records not already kept; returns how many of them were new to the merge.
  std::size_t add_records(const Source& s) {
    std::size_t cells = 0;
    for (std::size_t i = 0; i < s.records.size(); ++i) {
      const json& r = s.records[i];
      collisions_.add(r, s.read_at[i].first, s.read_at[i].second);
      if (!records_seen_.insert(rs::record_copy_identity(r)).second) {
        ++repeated_;
        continue;
      }
      ++cells;
      const rs::RecordIdentity id = *rs::record_identity_of(r);
      auto [at, fresh] = by_slot_.try_emplace(id.slot(), kept_.size());
      if (fresh) {
        kept_.push_back(r);
        continue;
      }
      switch (rs::versus(id, *rs::record_identity_of(kept_[at->second]))) {
        case rs::RecordVersus::duplicate:
          throw MergeError(fmt::format("{} holds cell {} of {} (attempt {}) that an earlier folder holds too with other "
                                       "figures; one of them was edited: merge the folders it came from instead",
                                       s.folder, id.key, id.origin, id.attempt));
        case rs::RecordVersus::supersedes: kept_[at->second] = r; break;  // a retry of that run's cell, as within one folder
        case rs::RecordVersus::superseded: break;
      }
    }
    return cells;
  }

  std::map<std::string, json> machines_;
  std::map<std::string, std::string> described_by_;
  json merged_from_ = json::array(), allocators_ = json::array();
  // The same record in two sources (a copy of a folder, a merged folder and one of its sources) is
  // one repetition: kept once, never pooled with itself. One cell of one origin with two different
  // records is a later attempt (kept) or a conflict (refused).
  std::set<std::string> records_seen_;
  std::map<std::string, std::size_t> by_slot_;  // RecordIdentity::slot -> index in kept_
  std::vector<json> kept_;
  std::size_t repeated_ = 0;
  rs::RecordIdCollisions collisions_;  // records of other cells sharing an id: both kept, and said
};

// All or nothing: built beside OUT and renamed into place.
void write_merged(const std::string& out, const std::string& lines, const json& meta) {
  std::error_code ec;
  const fs::path target = fs::absolute(out).lexically_normal();
  const std::string tmp = target.string() + ".merging." + std::to_string(::getpid());
  fs::create_directories(target.parent_path(), ec);
  fs::remove_all(tmp, ec);
  try {
    fs::create_directories(tmp);
    rs::write_file_atomically(rs::layout::path_in(tmp, rs::layout::kResults), lines);
    rs::write_file_atomically(rs::layout::path_in(tmp, rs::layout::kMeta), meta.dump(2) + "\n");
    rs::write_summaries(tmp);
    if (fs::exists(target)) fs::remove(target);  // the empty folder checked above
    fs::rename(tmp, target);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace

MergeOutcome merge_folders(const std::vector<std::string>& dirs, const std::string& out, const std::string& command) {
  if (dirs.size() < 2) throw MergeError("merge: give at least two results folders");
  if (out.empty()) throw MergeError("-o: the merged folder's name is empty");
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    throw MergeError(out + " already exists; merge into a new folder");
  const std::vector<Source> sources = read_sources(dirs);
  Merger merger;
  for (const auto& s : sources) merger.add(s);
  write_merged(out, merger.lines(), merger.meta(sources, command));
  return merger.outcome(sources.size());
}

}  // namespace allocmark::runner
