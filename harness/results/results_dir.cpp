#include "harness/results/results_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness/results/reporters/reporter.h"

namespace allocmark::results {
namespace fs = std::filesystem;
using nlohmann::json;


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

void ResultsDir::write_summaries() const { results::write_summaries(path_); }

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw ResultsError("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw ResultsError("cannot replace " + path + ": " + ec.message());
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

}  // namespace allocmark::results
