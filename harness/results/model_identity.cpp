// A cell's identity in the results model: see model_identity.h.
#include "harness/results/model_identity.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/record/cell.h"
#include "harness/results/model_reader.h"

namespace allocmark::results {
using nlohmann::json;

namespace detail {

std::uint64_t fnv1a(std::string_view text) { return record::fnv1a64(text.data(), text.size()); }

std::string fnv1a_hex(std::string_view text, std::size_t digits) { return fmt::format("{:016x}", fnv1a(text)).substr(0, digits); }

}  // namespace detail

std::size_t Model::intern(CellIdentity id) {
  std::string text = id.allocator + '\n' + id.backend + '\n' + id.workload + '\n' + id.params.dump() + '\n' +
                     id.env.dump() + '\n' + id.preload + '\n' + id.host;
  auto [it, inserted] = identity_index_.emplace(std::move(text), identities_.size());
  if (inserted) identities_.push_back(std::move(id));
  return it->second;
}

void Model::add_record(const json& record, const std::string& file, std::size_t line) {
  // One record read twice is one repetition, not two: a copy of a folder read with it, a merged
  // folder read with one of its sources. Within a folder it is a duplicate line, or a part file
  // the driver gathered but had not removed yet (skipped silently below as well).
  const std::size_t folder = folders_seen_.size();
  id_collisions_.add(record, file, line);
  if (auto [first, fresh] = records_read_.try_emplace(detail::fnv1a(record_copy_identity(record)), FirstRead{folder, line}); !fresh) {
    if (first->second.folder != folder) ++records_in_other_folders_;
    else if (!reading_parts_) duplicates_.emplace_back(line, first->second.line);
    return;
  }
  const detail::RecordReader r(record, file, line);
  auto [cell, id] = detail::read_cell(r, record, default_host_, [this](const std::string& name) { return intern_workload_metric(name); });
  // Records always carry a key; one written by hand may not. It gets the key of the cell its fields
  // describe (Cell::key, as the driver computes it), but without the driver's key nothing says two
  // records are the same cell: each is taken as its own.
  auto key = r.optional_string(kRecordKey);
  cell.key = key ? *key : record::cell_of_record(record).key();
  cell.identity = intern(std::move(id));
  cell.file = file;
  cell.line = line;
  cell.whole_file = reading_parts_;
  if (!key) {
    cells_.push_back(std::move(cell));
    return;
  }

  // A merged folder holds the same cells from several runs; attempts supersede each other only
  // within one origin (RecordIdentity::slot).
  const RecordIdentity identity{cell.key, r.optional_string(kRecordOrigin).value_or(""), cell.attempt, cell.status};
  auto [seen, first] = seen_.try_emplace(identity.slot(), Seen{cells_.size(), identity, line});
  if (first) {
    cells_.push_back(std::move(cell));
    return;
  }
  switch (versus(identity, seen->second.identity)) {
    case RecordVersus::supersedes:  // a retry: it takes the place (and the position in reports) of the earlier attempt
      seen->second.identity = identity;
      seen->second.line = line;
      cells_[seen->second.cell] = std::move(cell);
      break;
    case RecordVersus::duplicate:
      if (!reading_parts_) duplicates_.emplace_back(line, seen->second.line);
      break;
    case RecordVersus::superseded: break;  // after a higher attempt: nothing to say
  }
}

void Model::finish_file(const std::string& file) {
  if (!duplicates_.empty()) {
    constexpr std::size_t kListed = 5;
    std::string listed;
    for (std::size_t i = 0; i < std::min(kListed, duplicates_.size()); ++i)
      listed += fmt::format("{}line {} repeats line {}", i ? ", " : "", duplicates_[i].first, duplicates_[i].second);
    if (duplicates_.size() > kListed) listed += fmt::format(", and {} more", duplicates_.size() - kListed);
    warnings_.push_back(fmt::format("{}: {} duplicate record{} (same key and attempt) counted once, the first kept: {}",
                                    file, duplicates_.size(), duplicates_.size() == 1 ? "" : "s", listed));
  }
  seen_.clear();
  duplicates_.clear();
}

void Model::warn_on_id_collisions() {
  if (std::string warning = id_collisions_.warning(); !warning.empty()) warnings_.push_back(warning);
}

}  // namespace allocmark::results
