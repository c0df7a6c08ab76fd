#include "harness/matrix/config.h"

#include "allocators/backends.h"
#include "harness/placement/placement.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "harness/toml/unknown_keys.h"
#include "units/input_file.h"
#include "units/units.h"

namespace allocmark::matrix {
namespace {

std::string where(const std::string& path, const toml::node& node) {
  const auto& src = node.source();
  std::ostringstream out;
  out << path << ":" << src.begin.line << ":" << src.begin.column;
  return out.str();
}

[[noreturn]] void fail(const std::string& path, const toml::node& node, const std::string& what) {
  throw ConfigError(where(path, node) + ": " + what);
}

void reject_unknown_keys(const std::string& path, const toml::table& table, const std::string& section,
                         const std::set<std::string>& allowed) {
  if (std::string what = toml_files::unknown_key(path, table, section, allowed); !what.empty()) throw ConfigError(what);
}

std::string scalar_text(const std::string& path, const toml::node& node, const std::string& what) {
  if (auto s = node.as_string()) return s->get();
  if (auto i = node.as_integer()) return std::to_string(i->get());
  if (auto f = node.as_floating_point()) return units::format_number(f->get());
  if (auto b = node.as_boolean()) return b->get() ? "1" : "0";
  fail(path, node, what + " must be a string, number or boolean");
}

std::vector<std::string> string_list(const std::string& path, const toml::node& node, const std::string& key) {
  const auto* arr = node.as_array();
  if (!arr) fail(path, node, "'" + key + "' must be a list of strings");
  // An axis with no value is not a request for the defaults: leave the key out for those.
  if (arr->empty()) fail(path, node, "'" + key + "' is an empty list (name at least one, or leave the key out for the default)");
  std::vector<std::string> out;
  for (const auto& item : *arr) {
    if (!item.is_string()) fail(path, item, "'" + key + "' must be a list of strings");
    out.push_back(item.as_string()->get());
  }
  return out;
}

// A number in [min, max], finite, of T's kind; anything else is an error at the value's position.
template <class T>
T number(const std::string& path, const toml::node& node, const std::string& key, T min, T max) {
  std::optional<double> v;
  if (auto i = node.as_integer()) v = static_cast<double>(i->get());
  if (auto f = node.as_floating_point(); f && std::is_floating_point_v<T>) v = f->get();
  if (!v) fail(path, node, "'" + key + "' must be " + (std::is_floating_point_v<T> ? "a number" : "an integer"));
  if (!std::isfinite(*v)) fail(path, node, "'" + key + "' must be a finite number");
  std::ostringstream range;
  range << min << ".." << max;
  if (*v < static_cast<double>(min) || *v > static_cast<double>(max))
    fail(path, node, "'" + key + "' must be in " + range.str());
  return static_cast<T>(*v);
}

// A [matrix] value as JSON, for the settings table to check; `nodes` may also be a list of node numbers.
nlohmann::json toml_value(const std::string& path, const toml::node& node, const std::string& key) {
  if (auto s = node.as_string()) return s->get();
  if (auto i = node.as_integer()) return i->get();
  if (auto f = node.as_floating_point()) return f->get();
  if (auto b = node.as_boolean()) return b->get();
  if (const auto* arr = node.as_array(); arr && key == "nodes") {
    std::string text;
    for (const auto& item : *arr) text += (text.empty() ? "" : ",") + std::to_string(number<int>(path, item, "nodes", 0, 4095));
    return text;
  }
  return node.is_array() ? nlohmann::json::array() : nlohmann::json::object();  // refused by check_setting
}

void parse_matrix_table(const std::string& path, const toml::table& t, MatrixFile& out) {
  std::set<std::string> keys{"allocators", "workloads", "threads", "thp", "pin_threads", "expect_hours"};
  for (const auto& row : setting_rows())
    if (row.scope & kMatrixKey) keys.insert(row.key);
  reject_unknown_keys(path, t, "[matrix]", keys);
  if (auto n = t.get("allocators")) out.allocators = string_list(path, *n, "allocators");
  if (auto n = t.get("workloads")) out.workloads = string_list(path, *n, "workloads");
  if (auto n = t.get("threads")) {
    const auto* arr = n->as_array();
    if (!arr) fail(path, *n, "'threads' must be a list of integers");
    if (arr->empty()) fail(path, *n, "'threads' is an empty list (name at least one, or leave the key out for the default)");
    for (const auto& item : *arr) out.threads.push_back(number<int>(path, item, "threads", 1, kMaxThreads));
  }
  if (auto n = t.get("thp")) {
    out.thp = string_list(path, *n, "thp");
    out.thp_origin = where(path, *n);
  }
  if (auto n = t.get("expect_hours")) {
    out.expect_hours = number<double>(path, *n, "expect_hours", 0, kMaxExpectHours);
    out.expect_hours_origin = where(path, *n);
  }
  if (auto n = t.get("pin_threads")) {
    if (!n->is_boolean()) fail(path, *n, "'pin_threads' must be true or false");
    if (t.get("pin")) fail(path, *n, "'pin_threads' and 'pin' both set; keep 'pin' (pin_threads = true is pin = \"compact\", false is \"none\")");
    out.pin = n->as_boolean()->get() ? "compact" : "none";
    out.origins["pin"] = where(path, *n);
  }
  for (const auto& row : setting_rows()) {
    const toml::node* n = (row.scope & kMatrixKey) ? t.get(row.key) : nullptr;
    if (!n) continue;
    const std::string at = where(path, *n);
    row.choose(out, check_setting(row, toml_value(path, *n, row.key), at + ": '" + row.key + "'"));
    out.origins[row.key] = at;
  }
  if (out.pin || out.nodes) {
    try {
      placement::parse_pin(out.pin.value_or("compact"), out.nodes.value_or(""));
    } catch (const std::invalid_argument& e) {
      fail(path, *(t.get("nodes") ? t.get("nodes") : t.get("pin") ? t.get("pin") : t.get("pin_threads")), e.what());
    }
  }
}

void parse_allocator_defs(const std::string& path, const toml::node& node, MatrixFile& out) {
  const auto* defs = node.as_table();
  if (!defs) fail(path, node, "[allocators] must hold one table per allocator, e.g. [allocators.\"jemalloc:bg\"]");
  for (const auto& [key, value] : *defs) {
    std::string name(key.str());
    const auto* t = value.as_table();
    if (!t) fail(path, value, "allocator '" + name + "' must be a table");
    // '@' is the thp axis' mark in a crossed name (jemalloc@thp=never): a variant of its own
    // spelled like one would read as a cell of the axis.
    if (name.find('@') != std::string::npos)
      fail(path, value, "allocator '" + name + "': '@' is not allowed in a variant's name (the thp axis names its cells NAME@thp=MODE)");
    reject_unknown_keys(path, *t, "allocator '" + name + "'", {"backend", "kind", "library", "env", "description"});
    AllocatorDef def;
    def.name = name;
    def.origin = where(path, value);
    if (t->contains("backend") && t->contains("kind"))
      fail(path, value, "allocator '" + name + "' sets both 'backend' and 'kind'; they mean the same, keep one");
    const toml::node* backend = t->get("backend") ? t->get("backend") : t->get("kind");
    if (!backend || !backend->is_string())
      fail(path, value, "allocator '" + name + "' needs backend = one of " + allocmark::allocators::backend_names());
    def.backend = backend->as_string()->get();
    if (auto lib = t->get("library")) {
      if (!lib->is_string()) fail(path, *lib, "'library' must be a path string");
      def.library = lib->as_string()->get();
      def.library_origin = where(path, *lib);
      if (def.library.empty()) fail(path, *lib, "'library' is empty");
    }
    if (auto env = t->get("env")) {
      const auto* et = env->as_table();
      if (!et) fail(path, *env, "'env' must be a table of NAME = \"value\"");
      for (const auto& [ek, ev] : *et) def.env[std::string(ek.str())] = scalar_text(path, ev, "env value");
    }
    if (auto d = t->get("description"); d && d->is_string()) def.description = d->as_string()->get();
    out.allocator_defs[name] = def;
  }
}

void parse_programs(const std::string& path, const toml::node& node, MatrixFile& out) {
  const auto* defs = node.as_table();
  if (!defs) fail(path, node, "[programs] must hold one table per program, e.g. [programs.myapp]");
  for (const auto& [key, value] : *defs) {
    std::string name(key.str());
    const auto* t = value.as_table();
    if (!t) fail(path, value, "program '" + name + "' must be a table");
    reject_unknown_keys(path, *t, "program '" + name + "'", {"command", "cwd", "input", "env"});
    ProgramDef def;
    def.name = name;
    def.origin = where(path, value);
    auto text = [&](const char* k, std::string& into) {
      if (auto n = t->get(k)) {
        if (!n->is_string()) fail(path, *n, std::string("'") + k + "' must be a string");
        into = n->as_string()->get();
      }
    };
    if (!t->get("command")) fail(path, value, "program '" + name + "' needs command = \"PROGRAM ARGS\"");
    text("command", def.command);
    text("cwd", def.cwd);
    text("input", def.input);
    if (auto env = t->get("env")) {
      const auto* et = env->as_table();
      if (!et) fail(path, *env, "'env' must be a table of NAME = \"value\"");
      for (const auto& [ek, ev] : *et) def.env[std::string(ek.str())] = scalar_text(path, ev, "env value");
    }
    // Relative folders and files are relative to the matrix file, not to wherever allocmark runs.
    std::filesystem::path base = std::filesystem::absolute(path).parent_path();
    if (!def.cwd.empty() && std::filesystem::path(def.cwd).is_relative()) def.cwd = (base / def.cwd).lexically_normal().string();
    if (!def.input.empty() && std::filesystem::path(def.input).is_relative() && def.cwd.empty())
      def.input = (base / def.input).lexically_normal().string();
    out.programs[name] = def;
  }
}

void parse_traces(const std::string& path, const toml::node& node, MatrixFile& out) {
  const auto* defs = node.as_table();
  if (!defs) fail(path, node, "[traces] must hold one table per trace, e.g. [traces.myservice]");
  for (const auto& [key, value] : *defs) {
    std::string name(key.str());
    const auto* t = value.as_table();
    if (!t) fail(path, value, "trace '" + name + "' must be a table");
    TraceDef def;
    def.name = name;
    def.origin = where(path, value);
    const auto* file = t->get("file");
    if (!file || !file->is_string()) fail(path, value, "trace '" + name + "' needs file = \"PATH\" (a file allocmark trace record wrote)");
    for (const auto& [k, v] : *t) {
      std::string param(k.str());
      if (param == "trace" || param == "name")
        fail(path, v, "trace '" + name + "': '" + param + "' is set by the table (file = ..., and its name)");
      def.params[param == "file" ? "trace" : param] = Located{scalar_text(path, v, "'" + param + "'"), where(path, v)};
    }
    // Relative to the matrix file, not to wherever allocmark runs.
    std::filesystem::path f = def.params["trace"].value;
    if (f.is_relative())
      def.params["trace"].value = (std::filesystem::absolute(path).parent_path() / f).lexically_normal().string();
    out.traces[name] = def;
  }
}

}  // namespace

MatrixFile load_matrix_file(const std::string& path, bool variants_only, const std::string& what) {
  // toml++ would read a folder as an empty matrix and wait for ever on a fifo.
  if (std::string problem = units::input_file_problem(path); !problem.empty()) throw ConfigError(what + ": " + problem);
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream out;
    const auto& b = e.source().begin;
    if (b.line == 0)
      out << path << ": " << e.description();
    else
      out << path << ":" << b.line << ":" << b.column << ": " << e.description();
    throw ConfigError(out.str());
  }
  MatrixFile out;
  out.path = path;
  if (variants_only)
    reject_unknown_keys(path, root, "a variants file", {"allocators"});
  else
    reject_unknown_keys(path, root, "a matrix file", {"matrix", "params", "allocators", "programs", "traces"});
  if (auto m = root.get("matrix")) {
    if (!m->is_table()) fail(path, *m, "[matrix] must be a table");
    parse_matrix_table(path, *m->as_table(), out);
  }
  if (auto p = root.get("params")) {
    if (!p->is_table()) fail(path, *p, "[params] must hold one table per workload, e.g. [params.size_mix]");
    for (const auto& [wk, wv] : *p->as_table()) {
      if (!wv.is_table()) fail(path, wv, "[params." + std::string(wk.str()) + "] must be a table");
      out.params_origin[std::string(wk.str())] = where(path, wv);
      for (const auto& [k, v] : *wv.as_table())
        out.params[std::string(wk.str())][std::string(k.str())] =
            Located{scalar_text(path, v, "parameter '" + std::string(k.str()) + "'"), where(path, v)};
    }
  }
  if (auto a = root.get("allocators")) parse_allocator_defs(path, *a, out);
  if (auto p = root.get("programs"); p && !variants_only) parse_programs(path, *p, out);
  if (auto t = root.get("traces"); t && !variants_only) parse_traces(path, *t, out);
  return out;
}

std::string config_dir() {
  if (const char* dir = std::getenv("ALLOCMARK_CONFIG_DIR"); dir && *dir) return dir;
  return ALLOCMARK_DEFAULT_CONFIG_DIR;
}

}  // namespace allocmark::matrix
