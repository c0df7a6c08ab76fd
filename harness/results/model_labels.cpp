// Labels of the results model's groups: see model_labels.h.
#include "harness/results/model_labels.h"

#include <fmt/format.h>

#include "harness/results/model.h"
#include "harness/results/model_identity.h"  // fnv1a_hex
#include "workloads/workload.h"

namespace allocmark::results {
namespace detail {

std::string Disambiguator::qualified(std::size_t slot) const {
  const Entry& e = entries_[slot];
  std::set<std::string> keys;
  for (const auto& other : entries_)
    if (other.name == e.name)
      for (const auto& [k, v] : other.attributes) keys.insert(k);
  std::string parts;
  for (const auto& k : keys) {
    std::optional<std::string> first;
    bool differs = false;
    for (const auto& other : entries_) {
      if (other.name != e.name) continue;
      std::string v = value_of(other, k);
      if (!first) first = v;
      else if (*first != v) differs = true;
    }
    if (!differs) continue;
    std::string v = value_of(e, k);
    // A library path or a long MALLOC_CONF would swamp the column: a short hash still tells them apart.
    if (v.size() > 24) v = "#" + fnv1a_hex(v, 6);
    parts += (parts.empty() ? "" : ",") + k + "=" + v;
  }
  return parts.empty() ? e.name : e.name + "[" + parts + "]";
}

std::string Disambiguator::value_of(const Entry& e, const std::string& key) {
  auto it = e.attributes.find(key);
  if (it == e.attributes.end()) return "-";
  return it->second.empty() ? "\"\"" : it->second;
}

Disambiguator::Attributes attributes_of(const json& object) {
  Disambiguator::Attributes out;
  for (const auto& [k, v] : object.items()) out[k] = value_label(v);
  return out;
}

void CommonIdentity::add(const std::string& field, const std::optional<json>& value) {
  if (!value || value->is_null() || varying_.count(field)) return;
  auto it = values_.find(field);
  if (it == values_.end()) {
    order_.push_back(field);
    values_.emplace(field, *value);
  } else if (it->second != *value) {
    values_.erase(it);
    varying_.insert(field);
  }
}

nlohmann::ordered_json CommonIdentity::result() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& f : order_)
    if (auto it = values_.find(f); it != values_.end()) out[f] = nlohmann::ordered_json::parse(it->second.dump());
  return out;
}

bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      std::size_t ei = i, ej = j;
      while (ei < a.size() && digit(a[ei])) ++ei;
      while (ej < b.size() && digit(b[ej])) ++ej;
      const std::string_view da = std::string_view(a).substr(i, ei - i), db = std::string_view(b).substr(j, ej - j);
      // Same value in fewer digits first is fine; values by length, then by digits (no overflow).
      const std::size_t la = da.find_first_not_of('0'), lb = db.find_first_not_of('0');
      const std::string_view va = la == std::string_view::npos ? "" : da.substr(la);
      const std::string_view vb = lb == std::string_view::npos ? "" : db.substr(lb);
      if (va.size() != vb.size()) return va.size() < vb.size();
      if (va != vb) return va < vb;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j || (a.size() - i == b.size() - j && a < b);
}

std::string instance_label(const std::string& workload, const json& params) {
  const workloads::WorkloadInfo* info = workloads::find_workload(workload);
  if (!info || info->instance_param.empty() || !params.is_object()) return workload;
  auto it = params.find(info->instance_param);
  if (it == params.end() || !it->is_string() || it->get<std::string>().empty()) return workload;
  return workload + ":" + it->get<std::string>();
}

}  // namespace detail

namespace {

template <class T>
std::string first_unknown(const std::vector<T>& wanted, const std::set<T>& present, std::string_view flag) {
  for (const auto& w : wanted) {
    if (present.count(w)) continue;
    std::string there;
    for (const auto& v : present) there += (there.empty() ? "" : ", ") + fmt::format("{}", v);
    return fmt::format("{}: no cell has '{}' (there: {})", flag, w, there);
  }
  return "";
}

}  // namespace

std::string Model::unknown_filter_value(const CellFilter& filter) const {
  std::set<std::string> workload_names, allocator_names;
  std::set<int> thread_counts;
  for (const CellResult& cell : cells_) {
    const CellIdentity& id = identities_[cell.identity];
    workload_names.insert(id.workload);
    workload_names.insert(detail::instance_label(id.workload, id.params));  // replay:NAME names its cells too
    allocator_names.insert(identities_[cell.identity].allocator);
    thread_counts.insert(cell.threads);
  }
  for (std::string problem : {first_unknown(filter.workloads, workload_names, "--workload"),
                              first_unknown(filter.allocators, allocator_names, "--allocator"),
                              first_unknown(filter.threads, thread_counts, "--threads")})
    if (!problem.empty()) return problem;
  return "";
}

}  // namespace allocmark::results
