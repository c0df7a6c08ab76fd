#include "harness/results/record_identity.h"

namespace allocmark::results {

using nlohmann::json;

std::optional<RecordIdentity> record_identity_of(const json& record) {
  if (!record.is_object()) return std::nullopt;
  auto key = record.find(kRecordKey);
  if (key == record.end() || !key->is_string()) return std::nullopt;
  RecordIdentity id;
  id.key = key->get<std::string>();
  if (auto a = record.find(kRecordAttempt); a != record.end()) {
    if (!a->is_number_integer() || a->get<long long>() < 1 || a->get<long long>() > 1'000'000) return std::nullopt;
    id.attempt = a->get<int>();
  }
  if (auto o = record.find(kRecordOrigin); o != record.end() && o->is_string()) id.origin = o->get<std::string>();
  if (auto s = record.find(kRecordStatus); s != record.end() && s->is_string()) id.status = s->get<std::string>();
  return id;
}

RecordVersus versus(const RecordIdentity& later, const RecordIdentity& kept) {
  if (later.attempt > kept.attempt) return RecordVersus::supersedes;
  return later.attempt == kept.attempt ? RecordVersus::duplicate : RecordVersus::superseded;
}

std::string record_copy_identity(const json& record) {
  if (std::string id = record_id_of(record); !id.empty()) {
    auto field = [&](const char* name) {
      auto it = record.find(name);
      return it == record.end() ? std::string("-") : it->dump(-1, ' ', false, json::error_handler_t::replace);
    };
    return "record_id " + id + "\nkey " + field(kRecordKey) + "\nattempt " + field(kRecordAttempt);
  }
  std::string content = "content";
  if (record.is_object())
    for (const auto& [field, value] : record.items())
      if (field != kRecordOrigin && field != kRecordHost)
        content += '\n' + field + '=' + value.dump(-1, ' ', false, json::error_handler_t::replace);
  return content;
}

std::string record_id_of(const json& record) {
  if (!record.is_object()) return "";
  auto id = record.find(kRecordId);
  return id != record.end() && id->is_string() ? id->get<std::string>() : "";
}

void RecordIdCollisions::add(const json& record, const std::string& file, std::size_t line) {
  const std::string id = record_id_of(record);
  if (id.empty()) return;
  const std::size_t copy = std::hash<std::string>{}(record_copy_identity(record));
  if (files_.empty() || files_.back() != file) files_.push_back(file);
  auto [first, fresh] = first_.try_emplace(std::hash<std::string>{}(id), First{copy, files_.size() - 1, line});
  if (fresh || first->second.copy == copy) return;
  ++count_;
  constexpr std::size_t kListed = 5;
  const std::string& first_file = files_[first->second.file];
  if (listed_.size() < kListed)
    listed_.push_back(file + ":" + std::to_string(line) + " and " + (first_file == file ? "line " : first_file + ":") +
                      std::to_string(first->second.line) + " (record_id " + id + ")");
}

std::string RecordIdCollisions::warning() const {
  if (!count_) return "";
  std::string listed;
  for (const auto& pair : listed_) listed += (listed.empty() ? "" : ", ") + pair;
  if (count_ > listed_.size()) listed += ", and " + std::to_string(count_ - listed_.size()) + " more";
  return std::to_string(count_) + (count_ == 1 ? " record shares its" : " records share their") +
         " record_id with a record of another cell or attempt (key or attempt differ): both kept, each its own record: " + listed;
}

}  // namespace allocmark::results
