#include "workloads/workload.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

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

uint64_t parse_bytes(std::string_view text) {
  std::string s(text);
  if (s.empty()) throw std::invalid_argument("empty size");
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || value < 0 || !std::isfinite(value))
    throw std::invalid_argument("not a size: '" + s + "'");
  std::string suffix(end);
  double scale = 1;
  if (suffix == "" || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k") scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") scale = 1024.0 * 1024 * 1024;
  else throw std::invalid_argument("unknown size suffix '" + suffix + "' in '" + s + "' (use K, M or G)");
  return static_cast<uint64_t>(value * scale);
}

std::string check_param_value(const ParamSpec& spec, const std::string& value) {
  std::size_t used = 0;
  switch (spec.type) {
    case ParamType::Int:
      try {
        (void)std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (value.empty() || used != value.size()) return "'" + value + "' is not an integer";
      break;
    case ParamType::Float:
      try {
        double v = std::stod(value, &used);
        if (!std::isfinite(v)) return "'" + value + "' is not a finite number";
      } catch (const std::exception&) {
        used = 0;
      }
      if (value.empty() || used != value.size()) return "'" + value + "' is not a number";
      break;
    case ParamType::Bytes:
      try {
        (void)parse_bytes(value);
      } catch (const std::exception& e) {
        return e.what();
      }
      break;
    case ParamType::String:
      break;
  }
  return "";
}

namespace {
const std::string& lookup(const std::map<std::string, std::string>& values, const std::string& name) {
  auto it = values.find(name);
  if (it == values.end()) throw std::out_of_range("workload parameter '" + name + "' has no value");
  return it->second;
}

std::vector<WorkloadInfo>& registry() {
  static std::vector<WorkloadInfo> workloads;
  return workloads;
}
}  // namespace

int64_t Params::integer(const std::string& name) const { return std::stoll(lookup(values_, name)); }
double Params::real(const std::string& name) const { return std::stod(lookup(values_, name)); }
uint64_t Params::bytes(const std::string& name) const { return parse_bytes(lookup(values_, name)); }
const std::string& Params::text(const std::string& name) const { return lookup(values_, name); }

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

}  // namespace allocmark::workloads
