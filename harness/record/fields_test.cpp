// The record's field tables (a phase's figures, a record's top-level keys) against what writes them
// (metrics::phase_record) and what documents them (docs/results-schema.md).
#include "harness/record/fields.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/metrics/phase_record.h"
#include "harness/record/cell.h"
#include "harness/record/record_keys.h"

namespace allocmark::record {
namespace {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot; (dot = path.find('.', start)) != std::string_view::npos; start = dot + 1)
    parts.emplace_back(path.substr(start, dot - start));
  parts.emplace_back(path.substr(start));
  return parts;
}

// A markdown table of the schema: each name in a row's first cell (`a`, `b`), with the row's text.
using Table = std::map<std::string, std::string>;

void add_row(Table& table, const std::string& line) {
  const std::size_t second = line.find('|', 1);
  if (second == std::string::npos) return;
  static const std::regex name("`([^`]+)`");
  const std::string first = line.substr(1, second - 1);
  for (std::sregex_iterator it(first.begin(), first.end(), name), end; it != end; ++it) table[(*it)[1]] = line;
}

// The table under `heading` (a line of its own), or every table of the document for "".
Table schema_table(const std::string& heading) {
  const char* root = std::getenv("ALLOCMARK_SOURCE_DIR");
  std::ifstream doc(std::string(root ? root : ".") + "/docs/results-schema.md");
  EXPECT_TRUE(doc) << "docs/results-schema.md not found (ALLOCMARK_SOURCE_DIR)";
  Table table;
  bool inside = heading.empty(), in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (!heading.empty() && line.rfind("#", 0) == 0) {
      if (in_table) break;
      inside = line == heading;
      continue;
    }
    if (!inside) continue;
    if (line.rfind("|", 0) == 0) {
      in_table = true;
      add_row(table, line);
    } else if (in_table && !heading.empty()) {
      break;
    }
  }
  return table;
}

bool mentions(const std::string& text, const std::string& name) { return text.find("`" + name + "`") != std::string::npos; }

// Every path of the table is documented: a phase path's first part in the phases[] table (or, under
// contention, in its table) and each further part in that row (`thp_events` names `fault_alloc`);
// a node path as a `nodes[].NAME` row.
TEST(RecordFields, TheSchemaListsEveryField) {
  const Table phases = schema_table("### phases[]"), contention = schema_table("### contention"), all = schema_table("");
  ASSERT_FALSE(phases.empty());
  ASSERT_FALSE(contention.empty());
  for (const FieldSpec& row : kPhaseFields) {
    SCOPED_TRACE(std::string(row.name));
    if (!row.phase_path.empty()) {
      std::vector<std::string> parts = split_path(row.phase_path);
      const Table* table = &phases;
      if (parts.size() > 1 && parts.front() == "contention") {
        table = &contention;
        parts.erase(parts.begin());
      }
      auto it = table->find(parts.front());
      if (it == table->end()) {
        ADD_FAILURE() << "docs/results-schema.md does not list the phase field " << row.phase_path;
        continue;
      }
      for (std::size_t i = 1; i < parts.size(); ++i)
        EXPECT_TRUE(mentions(it->second, parts[i])) << "the row of `" << parts.front() << "` does not name `" << parts[i] << "`";
    }
    if (!row.node_path.empty()) {
      const std::string documented = "nodes[]." + split_path(row.node_path).front();
      EXPECT_TRUE(all.count(documented)) << "docs/results-schema.md does not list " << documented;
    }
  }
}

// What a record's phase holds is where the model reads it: every row a producer fills (a member of
// PhaseFigures, a counter, a THP event) is at its phase path in phase_record()'s object.
TEST(RecordFields, PhaseRecordWritesEveryFigureWhereTheModelReadsIt) {
  metrics::PhaseFigures f;
  f.thp_events = metrics::ThpEvents{};
  const nlohmann::json phase = metrics::phase_record(f);
  std::set<std::string> names;
  for (const FieldSpec& row : kPhaseFields) {
    EXPECT_TRUE(names.insert(std::string(row.name)).second) << row.name << " is two rows";
    if (row.kind == Kind::read) continue;
    const nlohmann::json* at = &phase;
    for (const std::string& part : split_path(row.phase_path)) {
      ASSERT_TRUE(at->is_object() && at->contains(part)) << row.phase_path << " is not in " << phase.dump();
      at = &(*at)[part];
    }
    EXPECT_TRUE(row.kind == Kind::figure || row.kind == Kind::recorded ? at->is_null() || at->is_number() : at->is_number())
        << row.phase_path;
  }
}

// Every top-level key of a record (record_keys.h) is a row of the results.jsonl table, once, and
// none is also a cell field's key (ALLOCMARK_CELL_FIELDS' rec column): one definition per key.
TEST(RecordKeys, TheSchemaListsEveryTopLevelKey) {
  const Table top = schema_table("## results.jsonl");
  ASSERT_FALSE(top.empty());
#define ALLOCMARK_CELL_RECORD_KEY(row, member, type, in, name, required, worker, rec, ...) rec,
  const char* const cell_keys[] = {ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_RECORD_KEY)};
#undef ALLOCMARK_CELL_RECORD_KEY
  std::set<std::string> keys;
  for (const char* key : cell_keys)
    if (key) keys.insert(key);
  for (const RecordKeySpec& row : kRecordKeys) {
    EXPECT_TRUE(keys.insert(row.key).second) << row.key << " is two rows, or a cell field's key too";
    EXPECT_TRUE(top.count(row.key)) << "docs/results-schema.md's results.jsonl table does not list the record key " << row.key;
  }
}

}  // namespace
}  // namespace allocmark::record
