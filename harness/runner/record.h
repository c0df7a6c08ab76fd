// Builds one results.jsonl record from the cell, the worker's events and the parent's timeline:
// what was measured, and beside it the figures records have always carried for their readers
// (whole-cell peaks, totals, phase ops/s), each computed by the results model's metric
// (results::add_figures_for_readers), never by a formula of its own.
// Pure: unit-tested on recorded event streams. The status comes from classify() (status.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/matrix/plan.h"
#include "harness/record/record_keys.h"
#include "harness/runner/status.h"

namespace allocmark::runner {

class RecordBuilder {
 public:
  // `start_ns`: CLOCK_MONOTONIC at spawn; phase edges are reported relative to it.
  RecordBuilder(const matrix::Cell& cell, std::string log_path, int64_t start_ns);

  void on_event(const nlohmann::json& event);
  bool saw_done() const { return !done_.is_null(); }
  bool saw_start() const { return !record_[record::kRecordLibrary].is_null(); }
  // Fields the driver adds itself (a program cell's exit status and output checksum), their
  // strings made valid UTF-8.
  void annotate(const nlohmann::json& fields);
  const nlohmann::json& error_event() const { return error_event_; }

  // The finished record. `timeline` is the parent's [[t_ms, rss], ...]; `wall_s` spawn to exit.
  nlohmann::json finish(const nlohmann::json& timeline, uint64_t sampled_peak_rss, double wall_s,
                        const CellStatus& status) const;

 private:
  nlohmann::json record_;
  nlohmann::json phases_ = nlohmann::json::array();
  nlohmann::json done_, error_event_;
  int64_t start_ns_;
};

}  // namespace allocmark::runner
