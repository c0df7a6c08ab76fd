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
  if (auto id = record.find(kRecordId); id != record.end() && id->is_string()) return "record_id " + id->get<std::string>();
  std::string content = "content";
  if (record.is_object())
    for (const auto& [field, value] : record.items())
      if (field != kRecordOrigin && field != kRecordHost)
        content += '\n' + field + '=' + value.dump(-1, ' ', false, json::error_handler_t::replace);
  return content;
}

}  // namespace allocmark::results
