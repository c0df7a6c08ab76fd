#include "harness/settings/settings.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "workloads/touch.h"


namespace allocmark::matrix {

using nlohmann::json;

namespace {

constexpr const char* kPinHelp =
    "where worker threads run: none, compact (default: fill a node's CPUs, then the next), scatter (round-robin over "
    "nodes) or a CPU list such as 0,2-3; within the CPUs and memory nodes this process may use";
constexpr const char* kNodesHelp = "only these NUMA nodes' CPUs, and bind the workers' memory to them (e.g. 0-1)";
constexpr unsigned kPlacementScope = kMatrixKey | kCompared | kCellSpec | kWorker;

std::vector<SettingRow> build_rows() {
#define ALLOCMARK_SETTING_ROW(type, name, def, flag, kind, min, max, scope, absent, help)                           \
  SettingRow{#name, flag, SettingKind::kind, static_cast<double>(min), static_cast<double>(max), scope, help,       \
             json(absent), [](const Settings& s) { return json(s.name); },                                           \
             [](const SettingChoices& c) { return c.name ? json(*c.name) : json(); },                                \
             [](SettingChoices& c, const json& v) { c.name = v.get<type>(); }},
  std::vector<SettingRow> rows{ALLOCMARK_SETTINGS(ALLOCMARK_SETTING_ROW)};
#undef ALLOCMARK_SETTING_ROW
  // The placement policy's two halves, parsed together by apply_settings into Settings::pin.
  rows.push_back({"pin", "--pin", SettingKind::Text, 0, 0, kPlacementScope, kPinHelp, json(),
                  [](const Settings& s) { return json(s.pin.pin_text()); },
                  [](const SettingChoices& c) { return c.pin ? json(*c.pin) : json(); },
                  [](SettingChoices& c, const json& v) { c.pin = v.get<std::string>(); }});
  rows.push_back({"nodes", "--nodes", SettingKind::Text, 0, 0, kPlacementScope, kNodesHelp, json(),
                  [](const Settings& s) { return s.pin.nodes.empty() ? json() : json(s.pin.nodes_text()); },
                  [](const SettingChoices& c) { return c.nodes ? json(*c.nodes) : json(); },
                  [](SettingChoices& c, const json& v) { c.nodes = v.get<std::string>(); }});
  return rows;
}

std::string range_text(const SettingRow& row) {
  if (row.kind == SettingKind::Int || row.kind == SettingKind::OffOrInt) return fmt::format("{}..{}", static_cast<long long>(row.min), static_cast<long long>(row.max));
  return fmt::format("({:g}, {:g}]", row.min, row.max);
}

[[noreturn]] void refuse(const std::string& where, const std::string& expected, const std::string& found) {
  throw ConfigError(fmt::format("{} must be {} (found {})", where, expected, found));
}

json checked(const SettingRow& row, const json& v, const std::string& where, const std::string& found) {
  switch (row.kind) {
    case SettingKind::Int:
      if (!v.is_number_integer()) refuse(where, "an integer in " + range_text(row), found);
      if (v.get<double>() < row.min || v.get<double>() > row.max) refuse(where, "in " + range_text(row), found);
      return v;
    case SettingKind::OffOrInt:
      if (!v.is_number_integer()) refuse(where, "0 (off) or an integer in " + range_text(row), found);
      if (v.get<double>() != 0 && (v.get<double>() < row.min || v.get<double>() > row.max))
        refuse(where, "0 (off) or in " + range_text(row), found);
      return v;
    case SettingKind::Number:
      if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > row.min) || v.get<double>() > row.max)
        refuse(where, "a finite number in " + range_text(row), found);
      return json(v.get<double>());
    case SettingKind::Bool:
      if (!v.is_boolean()) refuse(where, "true or false", found);
      return v;
    case SettingKind::Preset:
      if (!v.is_string() || (v != "quick" && v != "full")) refuse(where, "\"quick\" or \"full\"", found);
      return v;
    case SettingKind::Writes: {
      std::string words;
      bool known = false;
      for (const char* w : workloads::kWritesNames) {
        words += std::string(words.empty() ? "" : " or ") + "\"" + w + "\"";
        known = known || (v.is_string() && v == w);
      }
      if (!known) refuse(where, words, found);
      return v;
    }
    case SettingKind::Text:
      if (!v.is_string()) refuse(where, "a string", found);
      return v;
  }
  throw std::logic_error("a setting kind without a check");
}

std::string excerpt(const json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>())) return fmt::format("{}", v.get<double>());  // JSON has no inf
  std::string text = v.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// The long flag of a row ("--reps" of "--reps,-r"), as flag messages name it.
std::string long_flag(const SettingRow& row) {
  std::string flag = row.flag;
  return flag.substr(0, flag.find(','));
}

}  // namespace

const std::vector<SettingRow>& setting_rows() {
  static const std::vector<SettingRow> rows = build_rows();
  return rows;
}

const SettingRow* find_setting(const std::string& key) {
  for (const auto& row : setting_rows())
    if (row.key == key) return &row;
  return nullptr;
}

json check_setting(const SettingRow& row, const json& value, const std::string& where) {
  return checked(row, value, where, excerpt(value));
}

json setting_from_flag(const SettingRow& row, const std::string& text) {
  const std::string where = long_flag(row) + ":", found = "'" + text + "'";
  json value = row.kind == SettingKind::Bool ? json(text == "true") : json(text);
  std::size_t used = 0;
  try {
    if (row.kind == SettingKind::Int || row.kind == SettingKind::OffOrInt) value = std::stoll(text, &used);
    if (row.kind == SettingKind::Number) value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if ((row.kind == SettingKind::Int || row.kind == SettingKind::OffOrInt || row.kind == SettingKind::Number) &&
      (text.empty() || used != text.size()))
    value = text;  // not a number: refused below as the row's kind
  return checked(row, value, where, found);
}

void read_settings(SettingChoices& out, const json& j, unsigned scope, const std::function<std::string(const std::string&)>& where) {
  if (!j.is_object()) return;
  for (const auto& row : setting_rows()) {
    if (!(row.scope & scope) || !j.contains(row.key) || j[row.key].is_null()) continue;
    row.choose(out, check_setting(row, j[row.key], where(row.key)));
    out.origins[row.key] = where(row.key);
  }
}

void apply_settings(Settings& s, const SettingChoices& c, const std::string& source) {
  // A source built in code (the flags, a confirming rerun) is checked here like a file's values.
  for (const auto& row : setting_rows()) {
    const json v = row.chosen(c);
    if (v.is_null()) continue;
    const auto origin = c.origins.find(row.key);
    check_setting(row, v, origin != c.origins.end() ? origin->second
                          : *row.flag              ? long_flag(row) + ":"
                                                   : fmt::format("{}: '{}'", source, row.key));
  }
  // One Settings field per row, named like its key.
#define ALLOCMARK_SETTING_APPLY(type, name, ...) \
  if (c.name) s.name = *c.name;
  ALLOCMARK_SETTINGS(ALLOCMARK_SETTING_APPLY)
#undef ALLOCMARK_SETTING_APPLY
  if (!c.pin && !c.nodes) return;
  const std::string pin = c.pin ? *c.pin : s.pin.pin_text();
  const std::string nodes = c.nodes ? *c.nodes : s.pin.nodes.empty() ? "" : s.pin.nodes_text();
  try {
    s.pin = placement::parse_pin(pin, nodes);
  } catch (const std::invalid_argument& e) {
    const auto origin = c.origins.find(c.nodes ? "nodes" : "pin");
    throw ConfigError((origin != c.origins.end() ? origin->second : std::string("--pin/--nodes")) + ": " + e.what());
  }
}

json settings_json(const Settings& s, unsigned scope) {
  json j = json::object();
  for (const auto& row : setting_rows())
    if (row.scope & scope) j[row.key] = row.get(s);
  return j;
}

placement::PinSpec recorded_pin(const json& matrix) {
  try {
    if (matrix.contains("pin") && matrix["pin"].is_string())
      return placement::parse_pin(matrix["pin"].get<std::string>(),
                                  matrix.contains("nodes") && matrix["nodes"].is_string() ? matrix["nodes"].get<std::string>() : "");
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("recorded matrix: ") + e.what());
  }
  return placement::parse_pin(matrix.value("pin_threads", true) ? "compact" : "none", "");
}

namespace {
Settings read_over_defaults(const json& j, unsigned scope, const std::string& where, bool recorded) {
  SettingChoices c;
  for (const auto& row : setting_rows())
    if (recorded && (row.scope & scope) && !row.absent_in_record.is_null() && (!j.contains(row.key) || j[row.key].is_null()))
      row.choose(c, row.absent_in_record);
  read_settings(c, j, scope, [&](const std::string& key) { return where + "." + key; });
  Settings s;
  apply_settings(s, c, where);
  if (!j.contains("pin")) s.pin = recorded_pin(j);  // from before the policies: pin_threads
  return s;
}
}  // namespace

Settings settings_from_json(const json& j, unsigned scope, const std::string& where) {
  return read_over_defaults(j, scope, where, false);
}

Settings recorded_settings(const json& matrix, const std::string& where) {
  return read_over_defaults(matrix, kMatrixKey, where, true);
}

}  // namespace allocmark::matrix
