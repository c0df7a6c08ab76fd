#include "harness/runner/record.h"

#include "harness/record/cell.h"
#include "harness/record/event_keys.h"
#include "harness/record/record_keys.h"
#include "harness/results/model.h"
#include "harness/results/safe_text.h"

namespace allocmark::runner {

using nlohmann::json;
namespace event = record::event;
namespace event_key = record::event_key;

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
  const std::string kind = ev.value(event_key::event, "");
  if (kind == event::start) {
    record_[record::kRecordLibrary] = ev.value(event_key::library, json());
    record_[record::kRecordAllocatorVersion] = ev.value(event_key::version, json());
    record_[record::kRecordAllocatorOptions] = ev.value(event_key::options, json::object());
  } else if (kind == event::baseline) {
    record_[record::kRecordIdleRssBytes] = ev.value(event_key::idle_rss_bytes, json());
    record_[record::kRecordIdleAllocStats] = ev.value(event_key::alloc_stats, json::object());
    if (ev.contains(event_key::pinned_cpus)) record_[record::kRecordPinnedCpus] = ev[event_key::pinned_cpus];
    if (ev.contains(event_key::placement)) record_[record::kRecordPlacement] = ev[event_key::placement];
  } else if (kind == event::phase_end && ev.contains(event_key::phase) && ev[event_key::phase].is_object()) {
    json p = ev[event_key::phase];
    p["start_ms"] = (p.value(event_key::t_begin_ns, int64_t{0}) - start_ns_) / 1e6;
    p["end_ms"] = (p.value(event_key::t_end_ns, int64_t{0}) - start_ns_) / 1e6;
    p.erase(event_key::t_begin_ns);
    p.erase(event_key::t_end_ns);
    phases_.push_back(std::move(p));
  } else if (kind == event::done) {
    done_ = ev;
  } else if (kind == event::error) {
    error_event_ = ev;
  }
}

json RecordBuilder::finish(const json& timeline, uint64_t sampled_peak_rss, double wall_s, const CellStatus& status) const {
  json record = record_;
  record[record::kRecordPhases] = phases_;
  record[record::kRecordTimeline] = timeline;
  record[record::kRecordSampledPeakRssBytes] = sampled_peak_rss;
  record[record::kRecordAllocStats] = done_.is_null() ? json::object() : done_.value(event_key::alloc_stats, json::object());
  if (!done_.is_null() && done_.contains(event_key::contention)) record[record::kRecordContention] = done_[event_key::contention];
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
