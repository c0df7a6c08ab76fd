// The cell codec: every function here walks ALLOCMARK_CELL_FIELDS (cell.h); a field's spelling is
// in its row only.
#include "harness/record/cell.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace allocmark::record {
namespace {

using nlohmann::json;

enum class In { allocator, cell };
enum class Part { none, path, digest };

std::string found_text(const json& v) {
  std::string text = v.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// A field of a cell description, named by its path ("cell.allocator.name") when it is missing or
// of the wrong kind, never as a raw JSON library message. Absent and optional: null.
const json& field(const json& obj, const std::string& where, const char* key, bool required) {
  static const json absent;
  if (!obj.is_object()) throw ConfigError(where + ": expected an object, found " + obj.type_name());
  if (!obj.contains(key)) {
    if (required) throw ConfigError(where + "." + key + ": missing");
    return absent;
  }
  return obj[key];
}

// One struct per column type: how a value is written, read back (strictly from a description,
// leniently from a record or the worker's description: what is absent or mistyped is left as it was)
// and how it enters the key.
struct text {
  static json write(const std::string& v) { return v; }
  static bool is_set(const std::string&) { return true; }
  static bool described(const std::string&) { return true; }
  static json in_record(const std::string& v) { return v; }
  static void read(std::string& out, const json& obj, const std::string& where, const char* key, bool required) {
    const json& v = field(obj, where, key, required);
    if (v.is_null() && !required) return;
    if (!v.is_string()) throw ConfigError(where + "." + key + ": expected a string, found " + found_text(v));
    out = v.get<std::string>();
  }
  static void lenient(std::string& out, const json& v) {
    if (v.is_string()) out = v.get<std::string>();
  }
  static std::string path(const std::string& v) { return v; }
  static std::string digest(const char* label, const std::string& v) { return label + v + "\n"; }
};

struct count {
  static json write(int v) { return v; }
  static bool is_set(int) { return true; }
  static bool described(int) { return true; }
  static json in_record(int v) { return v; }
  static void read(int& out, const json& obj, const std::string& where, const char* key, bool) {
    const json& v = field(obj, where, key, true);
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 1000000)
      throw ConfigError(where + "." + key + ": expected an integer of at least 1, found " + found_text(v));
    out = v.get<int>();
  }
  static void lenient(int& out, const json& v) {
    if (v.is_number_integer()) out = v.get<int>();
  }
  static std::string path(int v) { return std::to_string(v); }
  static std::string digest(const char* label, int v) { return label + std::to_string(v) + "\n"; }
};

struct texts {
  using Map = std::map<std::string, std::string>;
  static json write(const Map& v) { return v; }
  static bool is_set(const Map&) { return true; }
  static bool described(const Map&) { return true; }
  static json in_record(const Map& v) { return v; }
  static void read(Map& out, const json& obj, const std::string& where, const char* key, bool required) {
    const json& v = field(obj, where, key, required);
    if (v.is_null() && !required) return;
    if (!v.is_object()) throw ConfigError(where + "." + key + ": expected an object of strings, found " + found_text(v));
    for (const auto& [k, item] : v.items()) {
      if (!item.is_string()) throw ConfigError(where + "." + key + "." + k + ": expected a string, found " + found_text(item));
      out[k] = item.get<std::string>();
    }
  }
  // A record written by hand may give a parameter as a number: it is the cell of its text.
  static void lenient(Map& out, const json& v) {
    if (!v.is_object()) return;
    for (const auto& [k, item] : v.items()) out[k] = item.is_string() ? item.get<std::string>() : item.dump();
  }
  static std::string path(const Map& v) { return json(v).dump(); }
  static std::string digest(const char* label, const Map& v) {
    std::string out;
    for (const auto& [k, item] : v) out += label + k + "=" + item + "\n";
    return out;
  }
};

// An object of strings that most cells leave empty (a release's facts): written only when it has
// any, so that records of other cells are as they were.
struct facts : texts {
  static bool is_set(const Map& v) { return !v.empty(); }
  static bool described(const Map& v) { return !v.empty(); }
};

// A thp mode: "" (the machine's own) is written only in the description; the record says how the
// cell got it.
struct thp {
  static json write(const std::string& v) { return v; }
  static bool is_set(const std::string& v) { return !v.empty(); }
  static bool described(const std::string&) { return true; }  // "" too: the machine's own mode
  static constexpr const char* kMode = "mode";
  static constexpr const char* kHow = "how";
  static json in_record(const std::string& v) { return {{kMode, v}, {kHow, thp_obtained_by(v)}}; }
  static void read(std::string& out, const json& obj, const std::string& where, const char* key, bool required) {
    text::read(out, obj, where, key, required);
    if (!out.empty())
      if (auto problem = thp_mode_problem(out); !problem.empty()) throw ConfigError(where + "." + key + ": " + problem);
  }
  // The record holds {mode, how}; meta.json's entry the mode alone.
  static void lenient(std::string& out, const json& v) {
    text::lenient(out, v.is_object() ? v.value(kMode, json()) : v);
  }
  static std::string path(const std::string& v) { return v; }
  static std::string digest(const char* label, const std::string& v) { return v.empty() ? "" : label + v + "\n"; }
};

// A row's value under `key`, unless the row has no such column (nullptr) or the value is unset.
void put(json& j, const char* key, bool set, json value) {
  if (key && set) j[key] = std::move(value);
}

// Where the description holds a row's field.
json& place(json& description, In in) { return in == In::allocator ? description["allocator"] : description; }

std::string hex10(const std::string& text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a64(text.data(), text.size())));
  return std::string(buf, 10);
}

}  // namespace

uint64_t fnv1a64(const void* data, std::size_t size, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

const std::vector<std::string>& thp_modes() {
  static const std::vector<std::string> modes{"always", "madvise", "never"};
  return modes;
}

std::string thp_mode_problem(const std::string& mode) {
  if (std::find(thp_modes().begin(), thp_modes().end(), mode) != thp_modes().end()) return "";
  return "'" + mode + "' is not a transparent huge page mode (valid: never, madvise, always)";
}

// The one mode a process can set for itself (PR_SET_THP_DISABLE): the runner sets it by this rule
// and the plan refuses other modes the machine does not run by it.
std::string thp_obtained_by(const std::string& mode) { return mode == "never" ? kThpHowPrctl : kThpHowMachine; }

// The key's text is today's, byte for byte: the keys in results folders already written (what
// --resume and the gate match) are computed this way.
std::string Cell::key() const {
  std::string path, identity;
  const Cell& c = *this;
#define ALLOCMARK_CELL_KEY(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  if constexpr (Part::part == Part::path) path += (path.empty() ? "" : "/") + std::string(label) + type::path(c.member); \
  if constexpr (Part::part == Part::digest) identity += type::digest(label, c.member);
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_KEY)
#undef ALLOCMARK_CELL_KEY
  return path + "/" + hex10(identity);
}

std::string Cell::label() const {
  return allocator.name + " " + workload + " t" + std::to_string(threads) + " r" + std::to_string(rep);
}

namespace {

// Which column of the rows a reader takes its keys from.
enum class Column { worker, rec, meta, setup };

// A row's key in `column`, nullptr when that column does not carry the row.
const char* column_key(CellField field, Column column) {
  switch (field) {
#define ALLOCMARK_CELL_COLUMN_KEY(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  case CellField::row: {                                                                                   \
    const char* keys[] = {worker, rec, meta, setup};                                                       \
    return keys[static_cast<int>(column)];                                                                 \
  }
    ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_COLUMN_KEY)
#undef ALLOCMARK_CELL_COLUMN_KEY
  }
  return nullptr;
}

// A cell read leniently from an object whose keys are `column`'s (what is absent or mistyped stays
// as it is in `c`), taking only the rows held `in` the allocator or the cell when `only` says so:
// meta.json's allocator and workload entries both name theirs "name".
Cell lenient_cell(const json& object, Column column, Cell c, std::optional<In> only = std::nullopt) {
  if (!object.is_object()) return c;
#define ALLOCMARK_CELL_LENIENT(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  if (const char* key = column_key(CellField::row, column); key && (!only || *only == In::in))            \
    type::lenient(c.member, object.value(key, json()));
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_LENIENT)
#undef ALLOCMARK_CELL_LENIENT
  return c;
}

}  // namespace

const char* record_key(CellField field) { return column_key(field, Column::rec); }

const char* meta_key(CellField field) { return column_key(field, Column::meta); }

const char* setup_key(CellField field) { return column_key(field, Column::setup); }

std::string thp_how_in(const json& record) {
  std::string how;
  if (const char* key = record_key(CellField::thp); record.is_object() && record.contains(key) && record[key].is_object())
    text::lenient(how, record[key].value(thp::kHow, json()));
  return how;
}

json cell_description(const Cell& c) {
  json j = json::object();
#define ALLOCMARK_CELL_DESCRIBE(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  if (type::described(c.member)) place(j, In::in)[name] = type::write(c.member);
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_DESCRIBE)
#undef ALLOCMARK_CELL_DESCRIBE
  return j;
}

Cell cell_from_description(const json& j) {
  Cell c;
  const json& allocator = field(j, "cell", "allocator", true);
  auto object = [&](In in) -> const json& { return in == In::allocator ? allocator : j; };
  auto where = [](In in) { return in == In::allocator ? std::string("cell.allocator") : std::string("cell"); };
#define ALLOCMARK_CELL_READ(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  type::read(c.member, object(In::in), where(In::in), name, required);
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_READ)
#undef ALLOCMARK_CELL_READ
  return c;
}

json worker_cell(const Cell& c) {
  json j = json::object();
#define ALLOCMARK_CELL_WORKER(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  put(j, worker, type::is_set(c.member), type::write(c.member));
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_WORKER)
#undef ALLOCMARK_CELL_WORKER
  return j;
}

Cell cell_of_worker(const json& description) { return lenient_cell(description, Column::worker, Cell{}); }

json record_cell(const Cell& c) {
  json j = json::object();
#define ALLOCMARK_CELL_RECORD(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  put(j, rec, type::is_set(c.member), type::in_record(c.member));
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_RECORD)
#undef ALLOCMARK_CELL_RECORD
  return j;
}

Cell cell_of_record(const json& record) {
  Cell c;
  c.rep = 0;  // a record that does not say
  return lenient_cell(record, Column::rec, c);
}

json cell_setup(const Cell& c) {
  json j = json::object();
#define ALLOCMARK_CELL_SETUP(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  put(j, setup, true, type::write(c.member));
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_SETUP)
#undef ALLOCMARK_CELL_SETUP
  return j;
}

Cell cell_of_setup(const json& setup) { return lenient_cell(setup, Column::setup, Cell{}); }

std::map<std::string, std::string> texts_of(const json& object) {
  std::map<std::string, std::string> out;
  texts::lenient(out, object);
  return out;
}

json meta_allocator(const ResolvedAllocator& allocator) {
  Cell c;
  c.allocator = allocator;
  json j = json::object();
#define ALLOCMARK_CELL_META_ALLOCATOR(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  if (In::in == In::allocator) put(j, meta, type::is_set(c.member), type::write(c.member));
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_META_ALLOCATOR)
#undef ALLOCMARK_CELL_META_ALLOCATOR
  return j;
}

json meta_workload(const Cell& c) {
  json j = json::object();
#define ALLOCMARK_CELL_META_WORKLOAD(row, member, type, in, name, required, worker, rec, meta, part, label, setup) \
  if (In::in == In::cell) put(j, meta, type::is_set(c.member), type::write(c.member));
  ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_META_WORKLOAD)
#undef ALLOCMARK_CELL_META_WORKLOAD
  return j;
}

ResolvedAllocator allocator_of_meta(const json& entry) { return lenient_cell(entry, Column::meta, Cell{}, In::allocator).allocator; }

Cell workload_of_meta(const json& entry) { return lenient_cell(entry, Column::meta, Cell{}, In::cell); }

}  // namespace allocmark::record
