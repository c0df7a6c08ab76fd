// timelines.jsonl: what the charts draw of each cell beyond summary.json, one line per ok cell the
// model kept (a retry's last attempt, every origin of a merged folder, records still in parts/),
// named by summary.json's labels. Written by the model so plots/ applies no reader rule of its own.
#include <fstream>
#include <map>

#include "harness/record/record_keys.h"
#include "harness/results/reporters/reporter.h"

namespace allocmark::results {
namespace {

// The timeline and phase edges of the records at `wanted` lines of `file` (or its one record).
std::map<std::size_t, nlohmann::json> read_records(const std::string& file, bool whole_file,
                                                   const std::map<std::size_t, std::size_t>& wanted) {
  std::map<std::size_t, nlohmann::json> out;
  std::ifstream in(file, std::ios::binary);
  if (whole_file) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out[1] = nlohmann::json::parse(text, nullptr, false);
    return out;
  }
  std::string text;
  for (std::size_t line = 1; std::getline(in, text) && out.size() < wanted.size(); ++line)
    if (wanted.count(line)) out[line] = nlohmann::json::parse(text, nullptr, false);
  return out;
}

// The phase fields the timeline chart marks: its edges and live bytes.
nlohmann::json phase_edges(const nlohmann::json& phases) {
  nlohmann::json out = nlohmann::json::array();
  if (!phases.is_array()) return out;
  for (const auto& p : phases) {
    if (!p.is_object()) continue;
    nlohmann::json edge = nlohmann::json::object();
    for (const char* k : {"name", "start_ms", "end_ms", "start_live_bytes", "end_live_bytes", "peak_live_bytes"})
      edge[k] = p.value(k, nlohmann::json());
    out.push_back(std::move(edge));
  }
  return out;
}

// The last phase's return curve on the timeline's clock: [[t_ms, rss_bytes], ...] from its end,
// the end's own RSS first; empty where the cell has none (settle off, a program, older records).
nlohmann::json return_curve_points(const nlohmann::json& phases) {
  nlohmann::json out = nlohmann::json::array();
  if (!phases.is_array() || phases.empty() || !phases.back().is_object()) return out;
  const nlohmann::json& last = phases.back();
  const nlohmann::json curve = last.value("return_curve", nlohmann::json());
  const nlohmann::json end_ms = last.value("end_ms", nlohmann::json());
  if (!curve.is_object() || !end_ms.is_number()) return out;
  if (last.value("end_rss_bytes", nlohmann::json()).is_number()) out.push_back({end_ms, last["end_rss_bytes"]});
  for (const char* point : {"after_10ms", "after_100ms", "settled"}) {
    const nlohmann::json p = curve.value(point, nlohmann::json());
    if (p.is_object() && p.value("t_ms", nlohmann::json()).is_number() && p.value("rss_bytes", nlohmann::json()).is_number())
      out.push_back({end_ms.get<double>() + p["t_ms"].get<double>(), p["rss_bytes"]});
  }
  return out;
}

}  // namespace

std::string chart_timelines(const Model& model, const Grouping& grouping) {
  // file -> (line -> cell index), so each file is read once, in order.
  std::map<std::pair<std::string, bool>, std::map<std::size_t, std::size_t>> wanted;
  for (std::size_t i = 0; i < model.cells().size(); ++i) {
    const CellResult& c = model.cells()[i];
    if (c.ok() && !c.phases.empty()) wanted[{c.file, c.whole_file}][c.line] = i;
  }
  std::map<std::size_t, std::string> lines;  // by cell index: the model's (file) order
  for (const auto& [source, cells] : wanted) {
    auto records = read_records(source.first, source.second, cells);
    for (const auto& [line, index] : cells) {
      const CellResult& cell = model.cells()[index];
      const nlohmann::json& record = records[line];
      const Group& group = grouping.groups[grouping.cell_groups[index]];
      nlohmann::json out = nlohmann::json::object();
      for (std::size_t d = 0; d < grouping.dimensions.size(); ++d)
        if (grouping.dimensions[d] != Dimension::phase)
          out[std::string(dimension_name(grouping.dimensions[d]))] = group.values[d];
      out["rep"] = cell.rep;
      // The floor the peak RSS chart draws is idle RSS plus each phase's peak live bytes.
      if (cell.idle_rss_bytes) out["idle_rss_bytes"] = *cell.idle_rss_bytes;
      out["attempt"] = cell.attempt;
      const PhaseValues whole = whole_cell(cell);
      for (Metric m : {Metric::peak_rss_bytes, Metric::peak_live_bytes})
        if (auto v = metric_value(m, cell, whole)) out[std::string(metric_row(m).name)] = *v;
      const bool readable = record.is_object();
      out["timeline"] = readable ? record.value(record::kRecordTimeline, nlohmann::json::array()) : nlohmann::json::array();
      out["phases"] = phase_edges(readable ? record.value(record::kRecordPhases, nlohmann::json()) : nlohmann::json());
      // Only where there is one, so the timelines of folders without a settle read as they always did.
      if (nlohmann::json curve = return_curve_points(readable ? record.value(record::kRecordPhases, nlohmann::json()) : nlohmann::json());
          !curve.empty())
        out["return_curve"] = std::move(curve);
      lines[index] = out.dump() + "\n";
    }
  }
  std::string text;
  for (const auto& [index, line] : lines) text += line;
  return text;
}

}  // namespace allocmark::results
