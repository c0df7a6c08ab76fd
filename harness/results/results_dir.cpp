#include "harness/results/results_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <filesystem>
#include <functional>

#include "harness/results/folder_layout.h"
#include "harness/results/meta.h"

namespace allocmark::results {
namespace fs = std::filesystem;
using nlohmann::json;
namespace lay = layout;

namespace {

std::string system_reason() { return std::strerror(errno); }

// The folder of a run, created when missing. The path itself is the user's: links in it are followed.
Folder create_folder(const std::string& path) {
  if (path.empty()) throw ResultsError("--out: the results folder name is empty");
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) throw ResultsError(path + " exists and is not a folder");
  fs::create_directories(path, ec);
  if (ec) throw ResultsError("cannot create " + path + ": " + ec.message());
  return Folder(path);
}

// Each *.json file of each folder in parts/, in sorted order; links and anything else are skipped.
void for_each_part(const Folder& dir, const std::function<void(const Folder& sub, const std::string& name)>& visit) {
  std::optional<Folder> parts;
  try {
    parts = dir.sub_if_exists(lay::kParts);
  } catch (const ResultsError&) {
    return;  // a link: a run refuses the folder, a reader reads nothing through it
  }
  if (!parts) return;
  for (const auto& sub : parts->list()) {
    if (sub.type != Folder::Type::folder) continue;
    const Folder inside = parts->sub(sub.name, false);
    for (const auto& f : inside.list())
      if (f.type == Folder::Type::file && fs::path(f.name).extension() == ".json") visit(inside, f.name);
  }
}

// No link, device or fifo anywhere in `folder` down to `depth` levels (1: its entries only).
void refuse_links_inside(const Folder& folder, int depth) {
  for (const auto& e : folder.list()) {
    if (e.type == Folder::Type::link || e.type == Folder::Type::other)
      throw ResultsError(misplaced(folder.path_of(e.name), e.type, "a file or folder"));
    if (e.type == Folder::Type::folder && depth > 1) refuse_links_inside(folder.sub(e.name, false), depth - 1);
  }
}

}  // namespace

ResultsDir::ResultsDir(std::string path, const OpenOptions& options) : path_(std::move(path)), folder_(create_folder(path_)) {
  refuse_misplaced_entries();
  folder_.sub(lay::kLogs, /*create=*/true);
  lock(options.command);
  struct stat st {};
  const bool jsonl_used = ::fstatat(folder_.fd(), lay::kResults, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > 0;
  had_results_ = jsonl_used || !part_files(path_).empty() || !submission_dirs(path_).empty();
  if (!had_results_) return;
  if (!options.resume && !options.extend)
    throw ResultsError(path_ + " already holds results; pass --resume to complete it, --extend to add other cells to it, or --out for a new folder");
  if (jsonl_used) scan(options.discard_corrupt);
  gather_parts();
}

void ResultsDir::refuse_misplaced_entries() const {
  for (const auto& entry : lay::own_entries()) {
    const Folder::Type found = folder_.type(entry.name);
    if (found != Folder::Type::missing && found != entry.type)
      throw ResultsError(misplaced(folder_.path_of(entry.name), found, type_name(entry.type)));
  }
  // How deep the run writes, gathers or removes in each: logs/L, parts/SUB/N.json,
  // slurm/sN/cells/N.json, machines/HOST.json, data/CELL.data (inside which the workload is at home).
  for (const auto& [name, depth] : {std::pair{lay::kLogs, 1}, {lay::kParts, 2}, {lay::kSlurm, 3}, {lay::kMachines, 1}, {lay::kData, 1}})
    if (auto sub = folder_.sub_if_exists(name)) refuse_links_inside(*sub, depth);
}

std::vector<std::string> part_files(const std::string& dir) {
  std::vector<std::string> out;
  try {
    for_each_part(Folder(dir), [&](const Folder& sub, const std::string& name) { out.push_back(sub.path_of(name)); });
  } catch (const ResultsError&) {
    return {};  // no such folder: no parts
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> submission_dirs(const std::string& dir) {
  std::vector<std::string> out;
  try {
    if (auto slurm = Folder(dir).sub_if_exists(lay::kSlurm))
      for (const auto& e : slurm->list())
        if (e.type == Folder::Type::folder) out.push_back(slurm->path_of(e.name));
  } catch (const ResultsError&) {
    return {};  // no such folder, or slurm/ is a link: nothing submitted from here
  }
  // s2 before s10
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return out;
}

void ResultsDir::gather_parts() {
  std::size_t gathered = 0;
  for_each_part(folder_, [&](const Folder& sub, const std::string& name) {
    json record = json::parse(sub.read_file(name).value_or(""), nullptr, false);
    const std::optional<RecordIdentity> id = record_identity_of(record);
    if (!id) {
      notes_.push_back(sub.path_of(name) + " is not a valid record; left where it is");
      return;
    }
    auto it = recorded_.find(id->key);
    if (it == recorded_.end() || versus(*id, it->second.identity) == RecordVersus::supersedes) {
      append(record);
      ++gathered;
    }
    sub.remove_file(name);
  });
  if (gathered)
    notes_.push_back(fmt::format("gathered {} records finished by batch tasks ({}/) into {}", gathered, lay::kParts, lay::kResults));
}

ResultsDir::~ResultsDir() = default;

ResultsDir::OwnedFd::~OwnedFd() {
  if (fd >= 0) ::close(fd);
}

void ResultsDir::lock(const std::string& command) {
  const std::string lock_path = folder_.path_of(lay::kLock);
  // Inheritable on purpose: workers inherit it, so the folder stays locked while any worker of
  // this run is alive, even one that outlived a killed driver.
  lock_.fd = folder_.open_file(lay::kLock, O_RDWR | O_CREAT, 0644, /*inheritable=*/true);
  if (lock_.fd < 0) throw ResultsError("cannot create " + lock_path + ": " + system_reason());
  if (::flock(lock_.fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[1024];
    ssize_t n = ::pread(lock_.fd, buf, sizeof buf - 1, 0);
    std::string holder(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
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
  const std::string jsonl = folder_.path_of(lay::kResults);
  int fd = folder_.open_file(lay::kResults, O_RDONLY);
  FILE* in = fd < 0 ? nullptr : ::fdopen(fd, "rb");
  if (!in) {
    const std::string why = system_reason();
    if (fd >= 0) ::close(fd);
    throw ResultsError("cannot read " + jsonl + ": " + why);
  }
  std::string line, kept, discarded;
  std::size_t number = 0, good_end = 0, offset = 0;
  std::vector<std::size_t> corrupt;
  bool cut_short = false;
  std::map<std::string, std::vector<std::size_t>> same_attempt;
  char* raw = nullptr;
  std::size_t capacity = 0;
  for (ssize_t n; (n = ::getline(&raw, &capacity, in)) > 0;) {
    ++number;
    const bool has_newline = raw[n - 1] == '\n';
    offset += static_cast<std::size_t>(n);
    line.assign(raw, static_cast<std::size_t>(n) - (has_newline ? 1 : 0));
    const std::optional<RecordIdentity> id = record_identity_of(json::parse(line, nullptr, false));
    const bool valid = id.has_value();
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
    auto [it, fresh] = recorded_.try_emplace(id->key, RecordedCell{*id, number});
    if (!fresh) {
      switch (versus(*id, it->second.identity)) {
        case RecordVersus::supersedes: it->second = {*id, number}; break;
        case RecordVersus::duplicate: same_attempt[id->key].push_back(number); break;
        case RecordVersus::superseded: break;
      }
    }
  }
  std::free(raw);
  std::fclose(in);
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
    folder_.append(lay::kCorrupt, discarded);
    folder_.write_atomically(lay::kResults, kept);
    notes_.push_back(fmt::format("{} invalid lines moved from {} to {}", corrupt.size(), lay::kResults, lay::kCorrupt));
  } else if (cut_short) {
    int out = folder_.open_file(lay::kResults, O_WRONLY);
    const bool cut = out >= 0 && ::ftruncate(out, static_cast<off_t>(good_end)) == 0;
    const std::string why = system_reason();
    if (out >= 0) ::close(out);
    if (!cut) throw ResultsError("cannot cut back " + jsonl + ": " + why);
  }
  if (cut_short) notes_.push_back("dropped a last line cut short (line " + std::to_string(number) + ")");
  for (const auto& [key, lines] : same_attempt)
    notes_.push_back("cell " + key + " is recorded " + std::to_string(lines.size() + 1) + " times (first at line " +
                     std::to_string(recorded_[key].line) + "); readers count it once");
}

void ResultsDir::append(const json& record) {
  const std::string jsonl = folder_.path_of(lay::kResults);
  std::string line = record.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";  // never lose a cell to a stray byte
  int fd = folder_.open_file(lay::kResults, O_WRONLY | O_CREAT | O_APPEND);
  if (fd < 0) throw ResultsError("cannot append to " + jsonl + ": " + system_reason());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw ResultsError("cannot stat " + jsonl + ": " + std::strerror(err));
  }
  const off_t before = st.st_size;
  int err = write_fully(fd, line);
  if (!err && ::fsync(fd) != 0) err = errno;
  if (err) {
    // All or nothing: a torn line would make the file lie about this cell and hide the ones after it.
    (void)!::ftruncate(fd, before);
    ::fsync(fd);
    ::close(fd);
    throw ResultsError("write to " + jsonl + " failed: " + std::strerror(err) + " (the partial line was removed)");
  }
  ::close(fd);
  if (std::optional<RecordIdentity> id = record_identity_of(record)) recorded_[id->key] = RecordedCell{*id, 0};
}

json ResultsDir::read_meta() const {
  std::optional<std::string> text = folder_.read_file(lay::kMeta);
  if (!text) return nullptr;
  std::optional<json> meta = meta::decode(*text);
  if (!meta) throw ResultsError(folder_.path_of(lay::kMeta) + " is not valid JSON; cannot check what this folder was run with");
  return *meta;
}

void ResultsDir::write_meta(const json& meta) const { folder_.write_atomically(lay::kMeta, meta.dump(2, ' ', false, json::error_handler_t::replace) + "\n"); }

FolderWriter folder_writer(const std::string& dir) {
  FolderWriter out;
  const std::string path = lay::path_in(dir, lay::kLock);
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

}  // namespace allocmark::results
