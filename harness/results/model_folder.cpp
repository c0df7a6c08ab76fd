// The results model's reading of folders: results.jsonl line by line, a batch executor's parts/
// files, meta.json's host, a run writing the folder now, and the warnings said once all is read.
#include "harness/results/model.h"

#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace allocmark::results {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string describe_line(const std::string& file, std::size_t line) { return fmt::format("{}:{}", file, line); }

}  // namespace

void Model::add_line(std::string_view text, const std::string& file, std::size_t line, bool unterminated) {
  if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank: nothing lost
  json record = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded() || !record.is_object()) {
    warnings_.push_back(unterminated ? describe_line(file, line) +
                                           ": last line cut short (no newline at the end: a run still writing, or "
                                           "one that died mid-write); skipped"
                                     : describe_line(file, line) + ": not a JSON object; line skipped");
    return;
  }
  add_record(record, file, line);
}

void Model::add_folder(const std::string& dir, const LoadOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ResultsError(dir + ": no such results folder");
  std::string canonical = fs::weakly_canonical(dir, ec).string();
  if (std::find(folders_seen_.begin(), folders_seen_.end(), canonical) != folders_seen_.end()) {
    warnings_.push_back(dir + ": given twice; read once");
    return;
  }
  folders_seen_.push_back(canonical);

  // The host of records that do not name their own: the machine the folder's run was on.
  default_host_.clear();
  const meta::Recorded recorded = meta::read(dir);
  for (const char* name : {layout::kCells, layout::kResults}) check_readable_file(layout::path_in(dir, name));
  if (recorded.state == meta::Recorded::State::invalid) warnings_.push_back(recorded.path + ": not a JSON object; its host is unknown");
  default_host_ = meta::host(recorded.value);
  // Every reader (show, report, compare, gate) says it: emulated timings must not pass for a machine's.
  if (std::string notice = lab_notice(recorded.value); !notice.empty()) warnings_.push_back(dir + ": " + notice);

  // A run writing the folder now is said with whatever is read of it, so that a partial answer is
  // not taken for a whole one.
  const FolderWriter writer = options.own_folder ? FolderWriter{} : folder_writer(dir);
  auto note_writer = [&](std::size_t finished) {
    if (!writer.active) return std::string();
    json planned;  // the run's plan, when its cells.json is there to say it
    if (std::ifstream in(layout::path_in(dir, layout::kCells)); in) planned = json::parse(in, nullptr, false);
    std::string notice = fmt::format(
        "{}: a run is writing this folder ({}): {} cells finished; what is read now is partial", dir,
        writer.pid ? fmt::format("pid {}", writer.pid) : "its holder is unnamed",
        planned.is_object() ? fmt::format("{} of {}", finished, planned.size()) : std::to_string(finished));
    writer_notices_.push_back(notice);
    return "; " + notice;
  };

  std::string file = layout::path_in(dir, layout::kResults);
  std::ifstream in(file, std::ios::binary);
  const std::vector<std::string> parts = part_files(dir);
  if (!in && parts.empty()) {
    std::string running = note_writer(0);
    if (!options.require_cells) return;
    throw ResultsError(fmt::format("{} holds no {} (not a results folder?)", dir, layout::kResults) + running);
  }
  const std::size_t before = cells_.size(), read_before = records_in_other_folders_;
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line)
    // getline sets eof only when the last line had no newline to end it.
    add_line(text, file, line, in.eof());
  // Records a batch executor's tasks finished that the driver has not gathered into results.jsonl
  // yet (docs/ARCHITECTURE.md, "Executors"): one whole record per file. One the driver already
  // appended but had not removed yet (it died in between) is the same cell: skipped silently.
  reading_parts_ = true;
  for (const auto& part : parts) {
    std::ifstream p(part, std::ios::binary);
    std::string record((std::istreambuf_iterator<char>(p)), std::istreambuf_iterator<char>());
    add_line(record, part, 1, false);
  }
  reading_parts_ = false;
  finish_file(file);
  std::string running = note_writer(cells_.size() - before);
  // A folder whose every record was read from another folder already (a copy) is not empty.
  if (options.require_cells && cells_.size() == before && records_in_other_folders_ == read_before)
    throw ResultsError(file + " holds no finished cell" + running);
}

std::string writer_notice(const std::string& dir) {
  if (!folder_writer(dir).active) return "";  // the common case: no second read of the folder
  try {
    Model model = Model::load({dir}, LoadOptions{.require_cells = false});
    return model.writer_notices().empty() ? "" : model.writer_notices().front();
  } catch (const ResultsError&) {  // a record of the wrong shape: the reader itself will say so
    return "";
  }
}

void refuse_folder_being_written(const std::string& dir, const std::string& remedy) {
  if (!folder_writer(dir).active) return;
  const std::string notice = writer_notice(dir);
  throw ResultsError((notice.empty() ? dir + ": a run is writing this folder" : notice) + "; " + remedy);
}

Model Model::load(const std::vector<std::string>& dirs, const LoadOptions& options) {
  if (dirs.empty()) throw ResultsError("no results folder given");
  Model model;
  for (const auto& dir : dirs) model.add_folder(dir, options);
  if (std::size_t n = model.records_in_other_folders_)
    model.warnings_.push_back(fmt::format("{} record{} appear{} in more than one folder; counted once (the same "
                                          "record_id, or the same content for records without one)",
                                          n, n == 1 ? "" : "s", n == 1 ? "s" : ""));
  model.warn_on_id_collisions();
  model.warn_on_differing_outputs();
  model.order_releases();
  return model;
}

Model Model::from_records(const std::vector<json>& records, const std::string& source) {
  Model model;
  for (std::size_t i = 0; i < records.size(); ++i) model.add_record(records[i], source, i + 1);
  model.finish_file(source);
  model.warn_on_id_collisions();
  model.warn_on_differing_outputs();
  model.order_releases();
  return model;
}

void Model::warn_on_differing_outputs() {
  // Cells of one program and parameters, whatever the allocator, repetition or host.
  std::map<std::string, std::map<std::string, std::set<std::string>>> outputs;  // workload+params -> checksum -> allocators
  std::map<std::string, std::string> names;
  for (const auto& c : cells_) {
    if (!c.stdout_checksum) continue;
    const CellIdentity& id = identities_[c.identity];
    std::string what = id.workload + '\n' + id.params.dump();
    names[what] = id.workload;
    outputs[what][*c.stdout_checksum].insert(id.allocator);
  }
  for (const auto& [what, sums] : outputs) {
    if (sums.size() < 2) continue;
    std::string listed;
    for (const auto& [sum, allocators] : sums) {
      std::string who;
      for (const auto& a : allocators) who += (who.empty() ? "" : ", ") + a;
      listed += fmt::format("{}{} under {}", listed.empty() ? "" : "; ", sum, who);
    }
    warnings_.push_back(fmt::format("{}: output differs between cells (stdout checksums: {}); an allocator may change "
                                    "what the program computes, or the program's output is not deterministic",
                                    names[what], listed));
  }
}

}  // namespace allocmark::results
