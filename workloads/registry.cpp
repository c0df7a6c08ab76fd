#include "workloads/workload.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <type_traits>

namespace allocmark::workloads {

LiveBytes::LiveBytes(int threads) : locals_(new Local[threads]) {
  for (int i = 0; i < threads; ++i) locals_[i].owner_ = this;
}

void LiveBytes::fold(int64_t delta) {
  int64_t now = total_.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t seen = peak_.load(std::memory_order_relaxed);
  while (now > seen && !peak_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

namespace {

// How each ParamType reads its text and spells its value: the one place a new type is added.
struct ParamTypeRow {
  ParamType type;
  ParamValue (*parse)(const std::string& text);  // throws std::invalid_argument
  std::string (*spell)(const ParamValue& value);
};

// The whole text as a number of T's kind, or std::invalid_argument naming what it is not.
template <class T>
T whole_number(const std::string& text, const char* what) {
  std::size_t used = 0;
  T v{};
  try {
    if constexpr (std::is_floating_point_v<T>)
      v = std::stod(text, &used);
    else
      v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) throw std::invalid_argument("'" + text + "' is not " + what);
  return v;
}

const ParamTypeRow kParamTypes[] = {
    {ParamType::Int, [](const std::string& t) { return ParamValue(whole_number<int64_t>(t, "an integer")); },
     [](const ParamValue& v) { return std::to_string(std::get<int64_t>(v)); }},
    {ParamType::Float,
     [](const std::string& t) {
       double v = whole_number<double>(t, "a number");
       if (!std::isfinite(v)) throw std::invalid_argument("'" + t + "' is not a finite number");
       return ParamValue(v);
     },
     [](const ParamValue& v) { return units::format_number(std::get<double>(v)); }},
    {ParamType::Bytes, [](const std::string& t) { return ParamValue(units::parse_bytes(t)); },
     [](const ParamValue& v) { return units::format_bytes(std::get<uint64_t>(v)); }},
    {ParamType::String, [](const std::string& t) { return ParamValue(t); },
     [](const ParamValue& v) { return std::get<std::string>(v); }},
};

const ParamTypeRow& row_of(ParamType type) {
  for (const auto& row : kParamTypes)
    if (row.type == type) return row;
  throw std::logic_error("a ParamType without a row in kParamTypes");
}

// The ParamType a value holds: the variant's alternatives are in ParamType's order.
ParamType type_of(const ParamValue& value) { return static_cast<ParamType>(value.index()); }

}  // namespace

ParamValue parse_param(const ParamSpec& spec, const std::string& text) { return row_of(spec.type).parse(text); }

std::string canonical_param_text(const ParamValue& value) { return row_of(type_of(value)).spell(value); }

std::string check_param_value(const ParamSpec& spec, const std::string& value) {
  try {
    (void)parse_param(spec, value);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

namespace {
std::vector<WorkloadInfo>& registry() {
  static std::vector<WorkloadInfo> workloads;
  return workloads;
}
}  // namespace

Params::Params(const std::map<std::string, std::string>& texts) {
  for (const auto& [k, v] : texts) values_[k] = v;
}

Params Params::of(std::map<std::string, ParamValue> values) {
  Params out;
  out.values_ = std::move(values);
  return out;
}

Params Params::typed(const WorkloadInfo& workload, const std::map<std::string, std::string>& texts) {
  Params out;
  for (const auto& spec : workload.params)
    if (auto it = texts.find(spec.name); it != texts.end()) out.values_[spec.name] = parse_param(spec, it->second);
  return out;
}

const ParamValue& Params::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::out_of_range("workload parameter '" + name + "' has no value");
  return it->second;
}

// A value of the asked type, or (given as text) the text read as that type.
template <class T>
T as(const ParamValue& v, ParamType type) {
  if (const T* typed = std::get_if<T>(&v)) return *typed;
  return std::get<T>(row_of(type).parse(std::get<std::string>(v)));
}

int64_t Params::integer(const std::string& name) const { return as<int64_t>(value(name), ParamType::Int); }
double Params::real(const std::string& name) const { return as<double>(value(name), ParamType::Float); }
uint64_t Params::bytes(const std::string& name) const { return as<uint64_t>(value(name), ParamType::Bytes); }
const std::string& Params::text(const std::string& name) const { return std::get<std::string>(value(name)); }

bool register_workload(WorkloadInfo info) {
  info.params.push_back({"seed", ParamType::Int, "1", "1", "random seed; the same seed gives the same operation sequence"});
  auto& all = registry();
  all.push_back(std::move(info));
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return true;
}

const std::vector<WorkloadInfo>& registered_workloads() { return registry(); }

const WorkloadInfo* find_workload(std::string_view name) {
  for (const auto& w : registry())
    if (w.name == name) return &w;
  return nullptr;
}

namespace {

// Quick: measured with `allocmark run -a glibc -t 1 -r 1 --size quick` on the 2-core development
// machine, other builds beside it (2026-12-06). Full: measured where a cell fits that machine
// (arena_churn, size_mix); the others are the quick figure scaled by the ratio of the parameters
// that set their work, plus their fixed wall-time phases (docs/workloads.md, "How long a cell
// takes"). A workload registered without a row is estimated at 0 (registry_test asks for one).
struct TypicalRow {
  const char* workload;
  CellSeconds seconds;
};
constexpr TypicalRow kTypicalCellSeconds[] = {
    {"arena_churn", {5, 45}},        {"hash_build", {9, 300}},  {"insert_phases", {22, 23000}},
    {"orc_scan", {11, 22500}},       {"percall", {8, 175}},     {"rocksdb", {17, 2300}},
    {"rss_budget", {16, 260}},       {"scatter_free", {4, 60}}, {"size_mix", {12, 29}},
};

}  // namespace

CellSeconds typical_cell_seconds(std::string_view workload) {
  for (const auto& row : kTypicalCellSeconds)
    if (workload == row.workload) return row.seconds;
  return {};
}

}  // namespace allocmark::workloads
