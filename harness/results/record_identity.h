// Which cell a results.jsonl record is, which attempt, where it came from, and the one rule by which
// a record of a cell supersedes another: the one reading of those fields for every reader (the
// results model, ResultsDir's resume bookkeeping, merge, status). The names every writer and reader
// use are the record's (record/record_keys.h). The figures a record carries are read by the model's
// field table (metric_table.h); docs/results-schema.md says what each field means.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "harness/record/record_keys.h"

namespace allocmark::results {

// The keys' one definition is the record's (record/record_keys.h); the results readers name them here.
using record::kRecordAttempt;
using record::kRecordHost;
using record::kRecordId;
using record::kRecordKey;
using record::kRecordOrigin;
using record::kRecordStatus;

struct RecordIdentity {
  std::string key;
  std::string origin;  // "" in the folder it was recorded in
  int attempt = 1;
  std::string status = "?";

  // Records compete for one cell when they have the same key and origin: attempts supersede each
  // other within one run's folder, never across the folders of a merge.
  std::string slot() const { return origin + '\n' + key; }
};

// The identity of a record as the driver writes it; nullopt when it has no string key or an
// attempt that is not a positive integer (not a record the driver wrote).
std::optional<RecordIdentity> record_identity_of(const nlohmann::json& record);

// How a later-read record of the same slot stands against the one kept so far: a higher attempt
// takes its place; the same attempt twice is a duplicate (the first read stays); a lower attempt
// was superseded already.
enum class RecordVersus { supersedes, duplicate, superseded };
RecordVersus versus(const RecordIdentity& later, const RecordIdentity& kept);

// What makes two copies of a record one record wherever they are read (a copied folder, a folder
// merged with a merge of itself): its record_id with its key and attempt, so that two records of
// other cells (or attempts) that share an id, by an edit or a copy's mistake, stay two records; for
// records from before ids, its content without `origin` and `host`, the fields merge adds.
std::string record_copy_identity(const nlohmann::json& record);

// The record's record_id, "" when it has none (a record from before ids).
std::string record_id_of(const nlohmann::json& record);

// Records that share a record_id but are other cells or attempts (record_copy_identity differs):
// both are kept, and every reader says so. Fed each record as it is read, with the file and line
// that name it; a few words per record (hashes), so a large file costs little.
class RecordIdCollisions {
 public:
  void add(const nlohmann::json& record, const std::string& file, std::size_t line);
  // "" when none; else one line naming the first few pairs and the count.
  std::string warning() const;
  std::size_t count() const { return count_; }

 private:
  struct First {
    std::size_t copy, file, line;  // hash of record_copy_identity; index in files_
  };
  std::unordered_map<std::size_t, First> first_;  // hash of the record_id -> the first record read with it
  std::vector<std::string> files_;
  std::vector<std::string> listed_;
  std::size_t count_ = 0;
};

}  // namespace allocmark::results
