#include "harness/results/results_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "harness/results/reporters/reporter.h"

namespace allocmark::results {
namespace fs = std::filesystem;
using nlohmann::json;


ResultsDir::ResultsDir(std::string path, const OpenOptions& options) : path_(std::move(path)) {
  if (path_.empty()) throw ResultsError("--out: the results folder name is empty");
  std::error_code ec;
  if (fs::exists(path_, ec) && !fs::is_directory(path_, ec)) throw ResultsError(path_ + " exists and is not a folder");
  fs::create_directories(path_ + "/logs", ec);
  if (ec) throw ResultsError("cannot create " + path_ + ": " + ec.message());
  lock(options.command);
  std::string jsonl = path_ + "/results.jsonl";
  const bool jsonl_used = fs::exists(jsonl) && fs::file_size(jsonl) > 0;
  had_results_ = jsonl_used || !part_files(path_).empty() || !submission_dirs(path_).empty();
  if (!had_results_) return;
  if (!options.resume && !options.extend)
    throw ResultsError(path_ + " already holds results; pass --resume to complete it, --extend to add other cells to it, or --out for a new folder");
  if (jsonl_used) scan(options.discard_corrupt);
  gather_parts();
}

std::vector<std::string> part_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir + "/parts", ec)) {
    if (!sub.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(sub.path(), ec))
      if (f.is_regular_file() && f.path().extension() == ".json") out.push_back(f.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> submission_dirs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir + "/slurm", ec))
    if (sub.is_directory()) out.push_back(sub.path().string());
  // s2 before s10
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return out;
}

void ResultsDir::gather_parts() {
  std::size_t gathered = 0;
  for (const auto& part : part_files(path_)) {
    std::ifstream in(part, std::ios::binary);
    json record = json::parse(in, nullptr, false);
    in.close();
    if (record.is_discarded() || !record.is_object() || !record.contains("key") || !record["key"].is_string()) {
      notes_.push_back(part + " is not a valid record; left where it is");
      continue;
    }
    auto it = recorded_.find(record["key"].get<std::string>());
    if (it == recorded_.end() || it->second.attempt < record.value("attempt", 1)) {
      append(record);
      ++gathered;
    }
    std::error_code ec;
    fs::remove(part, ec);
  }
  if (gathered) notes_.push_back("gathered " + std::to_string(gathered) + " records finished by batch tasks (parts/) into results.jsonl");
}

ResultsDir::~ResultsDir() = default;

ResultsDir::OwnedFd::~OwnedFd() {
  if (fd >= 0) ::close(fd);
}

void ResultsDir::lock(const std::string& command) {
  const std::string lock_path = path_ + "/.allocmark.lock";
  // Not O_CLOEXEC on purpose: workers inherit it, so the folder stays locked while any worker of
  // this run is alive, even one that outlived a killed driver.
  lock_.fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
  if (lock_.fd < 0) throw ResultsError("cannot create " + lock_path + ": " + std::strerror(errno));
  if (::flock(lock_.fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::ifstream in(lock_path);
    std::string holder((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!holder.empty() && holder.back() == '\n') holder.pop_back();
    ::close(lock_.fd);
    lock_.fd = -1;
    if (err == EWOULDBLOCK)
      throw ResultsError(path_ + " is in use by another allocmark run (" + (holder.empty() ? "holder unknown" : holder) +
                         "); wait for it to finish or choose another --out");
    throw ResultsError("cannot lock " + lock_path + ": " + std::strerror(err));
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  std::string text = "pid " + std::to_string(::getpid()) + " on host " + host + ", started " + when +
                     (command.empty() ? "" : ": " + command) + "\n";
  if (::ftruncate(lock_.fd, 0) == 0) (void)!::pwrite(lock_.fd, text.data(), text.size(), 0);
}

void ResultsDir::scan(bool discard_corrupt) {
  const std::string jsonl = path_ + "/results.jsonl";
  std::ifstream in(jsonl, std::ios::binary);
  if (!in) throw ResultsError("cannot read " + jsonl);
  std::string line, kept, discarded;
  std::size_t number = 0, good_end = 0, offset = 0;
  std::vector<std::size_t> corrupt;
  bool cut_short = false;
  std::map<std::string, std::vector<std::size_t>> same_attempt;
  while (std::getline(in, line)) {
    ++number;
    const bool has_newline = !in.eof();
    offset += line.size() + (has_newline ? 1 : 0);
    json rec = json::parse(line, nullptr, false);
    const bool valid = !rec.is_discarded() && rec.is_object() && rec.contains("key") && rec["key"].is_string();
    if (!valid && !has_newline) {  // the driver died mid-write: the only kind of damage resume repairs itself
      cut_short = true;
      break;
    }
    if (!valid) {
      corrupt.push_back(number);
      discarded += line + "\n";
      continue;
    }
    kept += line + "\n";
    good_end = offset;
    const std::string key = rec["key"];
    const int attempt = rec.value("attempt", 1);
    auto [it, fresh] = recorded_.try_emplace(key, RecordedCell{rec.value("status", "?"), attempt, number});
    if (!fresh) {
      if (attempt > it->second.attempt) it->second = {rec.value("status", "?"), attempt, number};
      else if (attempt == it->second.attempt) same_attempt[key].push_back(number);
    }
  }
  in.close();
  if (!corrupt.empty() && !discard_corrupt) {
    std::string lines;
    for (std::size_t i = 0; i < corrupt.size() && i < 10; ++i) lines += (i ? ", " : "") + std::to_string(corrupt[i]);
    if (corrupt.size() > 10) lines += " and " + std::to_string(corrupt.size() - 10) + " more";
    throw ResultsError(jsonl + ": line" + (corrupt.size() > 1 ? "s " : " ") + lines +
                       (corrupt.size() > 1 ? " are not valid records" : " is not a valid record") +
                       "; the cells after them are intact. Nothing was changed: inspect the lines, then remove them, "
                       "or pass --discard-corrupt-lines to move them to results.corrupt.jsonl and go on");
  }
  if (!corrupt.empty()) {
    std::ofstream bad(path_ + "/results.corrupt.jsonl", std::ios::binary | std::ios::app);
    bad << discarded;
    bad.close();
    if (!bad) throw ResultsError("cannot write " + path_ + "/results.corrupt.jsonl");
    write_file_atomically(jsonl, kept);
    notes_.push_back(std::to_string(corrupt.size()) + " invalid lines moved from results.jsonl to results.corrupt.jsonl");
  } else if (cut_short) {
    fs::resize_file(jsonl, good_end);
  }
  if (cut_short) notes_.push_back("dropped a last line cut short (line " + std::to_string(number) + ")");
  for (const auto& [key, lines] : same_attempt)
    notes_.push_back("cell " + key + " is recorded " + std::to_string(lines.size() + 1) + " times (first at line " +
                     std::to_string(recorded_[key].line) + "); readers count it once");
}

void ResultsDir::append(const json& record) {
  const std::string jsonl = path_ + "/results.jsonl";
  std::string line = record.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";  // never lose a cell to a stray byte
  int fd = ::open(jsonl.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw ResultsError("cannot append to " + jsonl + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw ResultsError("cannot stat " + jsonl + ": " + std::strerror(err));
  }
  const off_t before = st.st_size;
  std::size_t off = 0;
  int err = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (err) {
    // All or nothing: a torn line would make the file lie about this cell and hide the ones after it.
    (void)!::ftruncate(fd, before);
    ::fsync(fd);
    ::close(fd);
    throw ResultsError("write to " + jsonl + " failed: " + std::strerror(err) + " (the partial line was removed)");
  }
  ::close(fd);
  RecordedCell cell{record.value("status", "?"), record.value("attempt", 1), 0};
  recorded_[record.value("key", "")] = cell;
}

json ResultsDir::read_meta() const {
  std::ifstream in(path_ + "/meta.json");
  if (!in) return nullptr;
  json meta = json::parse(in, nullptr, false);
  if (meta.is_discarded() || !meta.is_object())
    throw ResultsError(path_ + "/meta.json is not valid JSON; cannot check what this folder was run with");
  return meta;
}

void ResultsDir::write_meta(const json& meta) const { write_file_atomically(path_ + "/meta.json", meta.dump(2) + "\n"); }

void ResultsDir::write_summaries() const { results::write_summaries(path_); }

FolderWriter folder_writer(const std::string& dir) {
  FolderWriter out;
  const std::string path = dir + "/.allocmark.lock";
  // O_NOFOLLOW: a link planted in someone else's folder must not make a reader lock another file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return out;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    out.active = true;
    char buf[1024];
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    out.holder.assign(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    if (auto nl = out.holder.find('\n'); nl != std::string::npos) out.holder.resize(nl);
    if (out.holder.rfind("pid ", 0) == 0) out.pid = std::strtol(out.holder.c_str() + 4, nullptr, 10);
    if (out.holder.empty()) out.holder = "a run";
  }
  ::close(fd);
  return out;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  // The writer's pid in the temporary name: several writers may race to publish the same file
  // (array tasks on one node each offering the node's machine description); each rename is whole.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw ResultsError("cannot write " + path + " (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw ResultsError("cannot replace " + path + ": " + ec.message());
  }
}

}  // namespace allocmark::results
