#include "harness/results/folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "units/input_file.h"
#include "harness/os/clock.h"

namespace allocmark::results {

namespace {

std::string reason(int err) { return std::strerror(err); }

void check_component(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    throw std::logic_error("Folder: '" + name + "' is not a single file name");
}

Folder::Type type_of(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return Folder::Type::link;
  if (S_ISREG(st.st_mode)) return Folder::Type::file;
  if (S_ISDIR(st.st_mode)) return Folder::Type::folder;
  return Folder::Type::other;
}

}  // namespace

int write_fully(int fd, const std::string& text) {
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    off += static_cast<std::size_t>(n);
  }
  return 0;
}

const char* type_name(Folder::Type type) {
  switch (type) {
    case Folder::Type::missing: return "missing";
    case Folder::Type::file: return "a file";
    case Folder::Type::folder: return "a folder";
    case Folder::Type::link: return "a symbolic link";
    case Folder::Type::other: return "a device, fifo or socket";
  }
  return "?";
}

std::string misplaced(const std::string& path, Folder::Type found, const std::string& wanted) {
  return path + " is " + type_name(found) + ", not " + wanted +
         " (allocmark never follows a link, nor writes through one, where it keeps its own files; nothing was "
         "changed: remove it, or use another folder)";
}

Folder::Folder(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.empty() ? "." : path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    throw ResultsError(path_ + (err == ENOTDIR ? ": is not a folder" : ": " + reason(err)));
  }
}

Folder::Folder(Folder&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) { other.fd_ = -1; }

Folder& Folder::operator=(Folder&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Folder::~Folder() {
  if (fd_ >= 0) ::close(fd_);
}

Folder::Type Folder::type(const std::string& name) const {
  check_component(name);
  struct stat st {};
  if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Type::missing;
    throw ResultsError("cannot inspect " + path_of(name) + ": " + reason(errno));
  }
  return type_of(st);
}

std::vector<Folder::Entry> Folder::list() const {
  int copy = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = copy < 0 ? nullptr : ::fdopendir(copy);
  if (!dir) {
    const int err = errno;
    if (copy >= 0) ::close(copy);
    throw ResultsError("cannot list " + path_ + ": " + reason(err));
  }
  std::vector<Entry> out;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    out.push_back({name, type_of(st)});
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

std::optional<Folder> Folder::sub_if_exists(const std::string& name) const {
  check_component(name);
  int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return Folder(path_of(name), fd);
  const int err = errno;
  if (err == ENOENT) return std::nullopt;
  if (err == ELOOP || err == ENOTDIR) throw ResultsError(misplaced(path_of(name), type(name), type_name(Type::folder)));
  throw ResultsError("cannot open " + path_of(name) + ": " + reason(err));
}

Folder Folder::sub(const std::string& name, bool create) const {
  check_component(name);
  if (create && ::mkdirat(fd_, name.c_str(), 0755) != 0 && errno != EEXIST)
    throw ResultsError("cannot create " + path_of(name) + ": " + reason(errno));
  std::optional<Folder> found = sub_if_exists(name);
  if (!found) throw ResultsError(path_of(name) + ": no such folder");
  return std::move(*found);
}

int Folder::open_file(const std::string& name, int flags, mode_t mode, bool inheritable) const {
  check_component(name);
  // O_NONBLOCK: a fifo planted here must not hang the open; it is refused below like any non-file.
  int fd = ::openat(fd_, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | (inheritable ? 0 : O_CLOEXEC), mode);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) throw ResultsError(misplaced(path_of(name), Type::link, type_name(Type::file)));
    if (err == EISDIR) throw ResultsError(misplaced(path_of(name), Type::folder, type_name(Type::file)));
    errno = err;
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ResultsError(misplaced(path_of(name), type_of(st), type_name(Type::file)));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::optional<std::string> Folder::read_file(const std::string& name) const {
  int fd = open_file(name, O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw ResultsError("cannot read " + path_of(name) + ": " + reason(errno));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw ResultsError("cannot read " + path_of(name) + ": " + reason(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

void Folder::write_atomically(const std::string& name, const std::string& text) const {
  check_component(name);
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  // A fresh name each try, created with O_EXCL: whatever was planted under a guessable temporary
  // name (the writer's pid) is never opened. Several writers may publish the same file at once
  // (array tasks on one node each offering the node's machine description); each rename is whole.
  for (int tries = 0; fd < 0; ++tries) {
    tmp = name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
          std::to_string(os::monotonic_ns() % 1000000000);
    fd = ::openat(fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && (errno != EEXIST || tries >= 100)) throw ResultsError("cannot write " + path_of(name) + ": " + reason(errno));
  }
  int err = write_fully(fd, text);
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlinkat(fd_, tmp.c_str(), 0);
    throw ResultsError("cannot write " + path_of(name) + ": " + reason(err));
  }
  if (::renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) {
    err = errno;
    ::unlinkat(fd_, tmp.c_str(), 0);
    if (err == EISDIR) throw ResultsError(misplaced(path_of(name), Type::folder, type_name(Type::file)));
    throw ResultsError("cannot replace " + path_of(name) + ": " + reason(err));
  }
}

void Folder::append(const std::string& name, const std::string& text) const {
  int fd = open_file(name, O_WRONLY | O_CREAT | O_APPEND);
  if (fd < 0) throw ResultsError("cannot write " + path_of(name) + ": " + reason(errno));
  int err = write_fully(fd, text);
  if (::close(fd) != 0 && !err) err = errno;
  if (err) throw ResultsError("cannot write " + path_of(name) + ": " + reason(err));
}

void Folder::remove_file(const std::string& name) const {
  check_component(name);
  if (::unlinkat(fd_, name.c_str(), 0) != 0 && errno != ENOENT)
    throw ResultsError("cannot remove " + path_of(name) + ": " + reason(errno));
}

void Folder::remove_tree(const std::string& name) const {
  check_component(name);
  int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return;
    if (errno != ELOOP && errno != ENOTDIR) throw ResultsError("cannot open " + path_of(name) + ": " + reason(errno));
    remove_file(name);  // a link or a file: removed itself, whatever it points to stays
    return;
  }
  {
    Folder inside(path_of(name), fd);
    for (const auto& e : inside.list()) inside.remove_tree(e.name);
  }
  if (::unlinkat(fd_, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    throw ResultsError("cannot remove " + path_of(name) + ": " + reason(errno));
}

bool Folder::remove_if_empty(const std::string& name) const {
  check_component(name);
  return ::unlinkat(fd_, name.c_str(), AT_REMOVEDIR) == 0;
}

void check_readable_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // missing (or unreachable): the reader's open says so
  if (std::string problem = units::input_file_problem(path); !problem.empty())
    throw ResultsError(problem + "; refusing to read it");
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") throw ResultsError("cannot write " + path + ": not a file name");
  std::optional<Folder> folder;
  try {
    folder.emplace(p.parent_path().empty() ? "." : p.parent_path().string());
  } catch (const ResultsError& e) {
    throw ResultsError("cannot write " + path + ": folder " + e.what());
  }
  folder->write_atomically(name, text);
}

}  // namespace allocmark::results
