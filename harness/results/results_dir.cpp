#include "harness/results/results_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace allocmark::results {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw ResultsError("cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

std::string csv_field(const json& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_string()) s = v.get<std::string>();
  else s = v.dump();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

ResultsDir::ResultsDir(std::string path, bool resume) : path_(std::move(path)) {
  std::error_code ec;
  fs::create_directories(path_ + "/logs", ec);
  if (ec) throw ResultsError("cannot create " + path_ + ": " + ec.message());
  std::string jsonl = path_ + "/results.jsonl";
  if (!fs::exists(jsonl) || fs::file_size(jsonl) == 0) return;
  if (!resume)
    throw ResultsError(path_ + " already holds results; pass --resume to complete it or --out for a new folder");
  std::ifstream in(jsonl, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t good_end = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a line the driver did not finish: dropped below
    json rec = json::parse(text.substr(pos, nl - pos), nullptr, false);
    if (rec.is_discarded() || !rec.is_object() || !rec.contains("key")) break;
    done_.insert(rec["key"].get<std::string>());
    good_end = nl + 1;
    pos = nl + 1;
  }
  if (good_end < text.size()) fs::resize_file(jsonl, good_end);
}

void ResultsDir::append(const json& record) {
  std::string line = record.dump() + "\n";
  int fd = ::open((path_ + "/results.jsonl").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw ResultsError("cannot append to " + path_ + "/results.jsonl: " + std::strerror(errno));
  std::size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw ResultsError("write to " + path_ + "/results.jsonl failed: " + std::strerror(errno));
    }
    off += static_cast<std::size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  done_.insert(record.value("key", ""));
}

void ResultsDir::write_meta(const json& meta) const { write_file_atomically(path_ + "/meta.json", meta.dump(2) + "\n"); }

void ResultsDir::write_summary_csv() const {
  std::vector<json> records;
  try {
    records = load_records(path_);
  } catch (const ResultsError&) {
  }
  write_file_atomically(path_ + "/summary.csv", summary_csv(records));
}

std::vector<json> load_records(const std::string& dir) {
  std::string jsonl = dir + "/results.jsonl";
  std::ifstream in(jsonl);
  if (!in) throw ResultsError(dir + " holds no results.jsonl");
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line)) {
    json rec = json::parse(line, nullptr, false);
    if (!rec.is_discarded() && rec.is_object()) out.push_back(std::move(rec));
  }
  if (out.empty()) throw ResultsError(jsonl + " holds no finished cell");
  return out;
}

std::string summary_csv(const std::vector<json>& records) {
  static const std::vector<std::string> cell_cols{"allocator", "backend", "workload", "threads", "rep", "status"};
  static const std::vector<std::string> phase_cols{
      "wall_s",        "ops",          "ops_per_s",    "peak_rss_bytes",         "end_rss_bytes",
      "peak_live_bytes", "minor_faults", "voluntary_ctx_switches", "involuntary_ctx_switches", "user_s", "sys_s"};
  std::ostringstream out;
  for (const auto& c : cell_cols) out << c << ",";
  out << "phase,";
  for (const auto& c : phase_cols) out << c << ",";
  out << "idle_rss_bytes,rss_above_idle_over_live,library,error\n";
  for (const auto& rec : records) {
    json phases = rec.value("phases", json::array());
    if (phases.empty()) phases.push_back(json::object());
    for (const auto& p : phases) {
      for (const auto& c : cell_cols) out << csv_field(rec.value(c, json())) << ",";
      out << csv_field(p.value("name", json())) << ",";
      for (const auto& c : phase_cols) out << csv_field(p.value(c, json())) << ",";
      json idle = rec.value("idle_rss_bytes", json());
      out << csv_field(idle) << ",";
      if (idle.is_number() && p.value("peak_rss_bytes", json()).is_number() && p.value("peak_live_bytes", 0.0) > 0)
        out << (p["peak_rss_bytes"].get<double>() - idle.get<double>()) / p["peak_live_bytes"].get<double>();
      out << "," << csv_field(rec.value("library", json())) << "," << csv_field(rec.value("error", json())) << "\n";
    }
  }
  return out.str();
}

}  // namespace allocmark::results
