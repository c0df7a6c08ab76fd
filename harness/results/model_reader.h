// The results model's reading of one record (model_reader.cpp): the checks of its shape, and what the
// model keeps of it (CellResult, CellIdentity). Private to the model's files (model*.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::results::detail {

using nlohmann::json;

// Interns a workload metric's name: its index in Model::workload_metric_name.
using InternName = std::function<std::size_t(const std::string&)>;

// Checks the shape of one record as it is read, so a wrong type becomes a message with the file,
// line and field instead of a JSON library exception later.
class RecordReader {
 public:
  RecordReader(const json& record, const std::string& file, std::size_t line)
      : record_(record), where_(fmt::format("{}:{}", file, line)) {}

  [[noreturn]] void fail(const std::string& what) const { throw ResultsError(where_ + ": " + what); }

  std::string required_string(const char* field) const {
    auto v = optional_string(field);
    if (!v) fail(fmt::format("record has no '{}'", field));
    return *v;
  }
  std::optional<std::string> optional_string(const char* field, const json& in) const {
    auto it = in.find(field);
    if (it == in.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) fail(fmt::format("'{}' must be a string, not {}", field, it->dump()));
    return it->get<std::string>();
  }
  std::optional<std::string> optional_string(const char* field) const { return optional_string(field, record_); }
  std::optional<long long> optional_integer(const char* field) const {
    auto it = record_.find(field);
    if (it == record_.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer()) fail(fmt::format("'{}' must be an integer, not {}", field, it->dump()));
    return it->get<long long>();
  }
  long long required_integer(const char* field) const {
    auto v = optional_integer(field);
    if (!v) fail(fmt::format("record has no '{}'", field));
    return *v;
  }
  std::optional<double> optional_number(const json& in, const std::string& field, const std::string& context) const {
    auto it = in.find(field);
    if (it == in.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) fail(fmt::format("'{}{}' must be a number, not {}", context, field, it->dump()));
    return it->get<double>();
  }
  // An object member that may be absent or null (then an empty object); anything else is an error.
  json optional_object_in(const json& in, const std::string& field, const std::string& context) const {
    auto it = in.find(field);
    if (it == in.end() || it->is_null()) return json::object();
    if (!it->is_object()) fail(fmt::format("'{}{}' must be an object, not {}", context, field, it->dump()));
    return *it;
  }
  json optional_object(const char* field) const {
    auto it = record_.find(field);
    if (it == record_.end() || it->is_null()) return json::object();
    if (!it->is_object()) fail(fmt::format("'{}' must be an object, not {}", field, it->dump()));
    return *it;
  }

  // The number at a dotted `path` in `holder` (`at`: where holder is, for messages); nullopt where
  // the path or its value is absent or null.
  std::optional<double> number_at(const json& holder, std::string_view path, const std::string& at) const;
  // The record's phases: the field table's figures of each phase and of each of its nodes, and the
  // numbers of its workload_metrics (names interned by `intern`).
  std::vector<PhaseValues> phases(const InternName& intern) const;

 private:
  const json& record_;
  std::string where_;
};

// Everything a record says of its cell but its key, read in the record's field order (the first
// problem found is the one said), then held to check_plausible. Throws ResultsError naming the
// file, line and field for a record of the wrong shape.
struct ReadCell {
  CellResult cell;
  CellIdentity identity;
};
ReadCell read_cell(const RecordReader& r, const json& record, const std::string& default_host, const InternName& intern);

}  // namespace allocmark::results::detail
