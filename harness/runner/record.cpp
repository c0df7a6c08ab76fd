#include "harness/runner/record.h"

#include "harness/record/cell.h"
#include "harness/record/record_keys.h"
#include "harness/results/model.h"
#include "harness/results/safe_text.h"

namespace allocmark::runner {

using nlohmann::json;

namespace {
// `value` with every string in it (keys too) made valid UTF-8: a program's command, arguments and
// environment, and the paths of its files, are bytes, and a record is JSON.
json valid_utf8_strings(const json& value) {
  if (value.is_string()) return results::valid_utf8(value.get_ref<const std::string&>());
  if (value.is_array()) {
    json out = json::array();
    for (const auto& v : value) out.push_back(valid_utf8_strings(v));
    return out;
  }
  if (value.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : value.items()) out[results::valid_utf8(k)] = valid_utf8_strings(v);
    return out;
  }
  return value;
}
}  // namespace

RecordBuilder::RecordBuilder(const matrix::Cell& cell, std::string log_path, int64_t start_ns) : start_ns_(start_ns) {
  // The cell's fields are the codec's (its thp: the mode and how the cell got it, only on the thp
  // axis; cells off it ran under meta.json's machine.thp_enabled).
  json fields = record::record_cell(cell);
  fields.update({{record::kRecordKey, cell.key()},
                 {record::kRecordStatus, "failed"},
                 {record::kRecordError, nullptr},
                 {record::kRecordLibrary, nullptr},
                 {record::kRecordLog, std::move(log_path)}});
  record_ = valid_utf8_strings(fields);
}

void RecordBuilder::annotate(const json& fields) {
  for (const auto& [k, v] : fields.items()) record_[k] = valid_utf8_strings(v);
}

void RecordBuilder::on_event(const json& ev) {
  const std::string kind = ev.value("event", "");
  if (kind == "start") {
    record_[record::kRecordLibrary] = ev.value("library", json());
    record_[record::kRecordAllocatorVersion] = ev.value("version", json());
    record_[record::kRecordAllocatorOptions] = ev.value("options", json::object());
  } else if (kind == "baseline") {
    record_[record::kRecordIdleRssBytes] = ev.value("idle_rss_bytes", json());
    record_[record::kRecordIdleAllocStats] = ev.value("alloc_stats", json::object());
    if (ev.contains("pinned_cpus")) record_[record::kRecordPinnedCpus] = ev["pinned_cpus"];
    if (ev.contains("placement")) record_[record::kRecordPlacement] = ev["placement"];
  } else if (kind == "phase_end" && ev.contains("phase") && ev["phase"].is_object()) {
    json p = ev["phase"];
    p["start_ms"] = (p.value("t_begin_ns", int64_t{0}) - start_ns_) / 1e6;
    p["end_ms"] = (p.value("t_end_ns", int64_t{0}) - start_ns_) / 1e6;
    p.erase("t_begin_ns");
    p.erase("t_end_ns");
    phases_.push_back(std::move(p));
  } else if (kind == "done") {
    done_ = ev;
  } else if (kind == "error") {
    error_event_ = ev;
  }
}

json RecordBuilder::finish(const json& timeline, uint64_t sampled_peak_rss, double wall_s, const CellStatus& status) const {
  json record = record_;
  record[record::kRecordPhases] = phases_;
  record[record::kRecordTimeline] = timeline;
  record[record::kRecordSampledPeakRssBytes] = sampled_peak_rss;
  record[record::kRecordAllocStats] = done_.is_null() ? json::object() : done_.value("alloc_stats", json::object());
  if (!done_.is_null() && done_.contains("contention")) record[record::kRecordContention] = done_["contention"];
  record[record::kRecordWallS] = wall_s;
  record[record::kRecordStatus] = status.status;
  record[record::kRecordError] = status.error;
  // For the scripts that read results.jsonl: the schema's version, and the figures records always
  // carried beside the measurements, each computed by the results model's metric (one formula).
  record[record::kRecordSchemaVersionKey] = results::kRecordSchemaVersion;
  results::add_figures_for_readers(record);
  return record;
}

}  // namespace allocmark::runner
