// Labels of the results model's groups (model_labels.cpp): the names that tell identities of one
// name apart, the identity fields a group's cells share, the natural order of names with numbers.
// Private to the model's files (model*.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace allocmark::results::detail {

using nlohmann::json;

// Labels that tell identities of one name apart: name[key=value,...] over the keys whose values
// differ among every identity of that name in the model, so a label reads the same in every row.
class Disambiguator {
 public:
  using Attributes = std::map<std::string, std::string>;

  // Registers one identity of a name; returns its slot.
  std::size_t add(const std::string& name, Attributes attributes) {
    std::string text = name + '\n';
    for (const auto& [k, v] : attributes) text += k + '=' + v + '\n';
    auto [it, inserted] = index_.emplace(text, entries_.size());
    if (inserted) entries_.push_back({name, std::move(attributes)});
    return it->second;
  }
  const std::string& name(std::size_t slot) const { return entries_[slot].name; }

  std::string qualified(std::size_t slot) const;

 private:
  struct Entry {
    std::string name;
    Attributes attributes;
  };
  static std::string value_of(const Entry& e, const std::string& key);
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;
};

// Each member of `object` as Disambiguator attributes (values as value_label writes them).
Disambiguator::Attributes attributes_of(const json& object);

// The identity fields of a group: those every cell agrees on. Unknown values (a failed cell's
// library) do not disagree with known ones.
class CommonIdentity {
 public:
  void add(const std::string& field, const std::optional<json>& value);
  nlohmann::ordered_json result() const;

 private:
  std::vector<std::string> order_;
  std::map<std::string, json> values_;
  std::set<std::string> varying_;
};

// Names with numbers in them in the order a reader expects: digit runs compare by value.
bool natural_less(const std::string& a, const std::string& b);

// WORKLOAD:VALUE for an instance the workload names by a parameter (replay's traces), else the
// workload's name.
std::string instance_label(const std::string& workload, const json& params);

}  // namespace allocmark::results::detail
