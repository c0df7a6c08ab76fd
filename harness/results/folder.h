// A folder opened once as a descriptor, with everything inside it reached relative to that
// descriptor without following symbolic links (openat/fstatat/unlinkat/renameat with O_NOFOLLOW,
// AT_SYMLINK_NOFOLLOW). A results folder may come from someone else (a CI artifact): a link planted
// where allocmark keeps a file or folder must never make it remove, truncate, append to or gather
// anything outside the folder. Names given to a Folder are single path components; a nested folder
// is reached through sub().
#pragma once

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace allocmark::results {

class ResultsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Folder {
 public:
  enum class Type { missing, file, folder, link, other };  // other: a device, fifo or socket

  struct Entry {
    std::string name;
    Type type;
  };

  // Opens the folder at `path`: the path itself is the caller's (links in it are followed, as the
  // user named it). Throws ResultsError naming the path and the reason.
  explicit Folder(std::string path);
  Folder(Folder&& other) noexcept;
  Folder& operator=(Folder&& other) noexcept;
  Folder(const Folder&) = delete;
  Folder& operator=(const Folder&) = delete;
  ~Folder();

  const std::string& path() const { return path_; }
  std::string path_of(const std::string& name) const { return path_ + "/" + name; }
  int fd() const { return fd_; }

  // What `name` is, the link itself when it is one.
  Type type(const std::string& name) const;
  // The entries of this folder (not . and ..), sorted by name, each typed as type() does.
  std::vector<Entry> list() const;

  // The folder `name` inside this one, never through a link; created when missing and `create`.
  // Throws ResultsError when it is a link or not a folder.
  Folder sub(const std::string& name, bool create) const;
  // The same, or nothing when `name` does not exist.
  std::optional<Folder> sub_if_exists(const std::string& name) const;

  // Opens the regular file `name` (open(2) flags; O_NOFOLLOW and O_CLOEXEC are added unless
  // `inheritable`); a link, folder or device there is a ResultsError naming it. The caller closes it.
  int open_file(const std::string& name, int flags, mode_t mode = 0644, bool inheritable = false) const;
  // The whole file, or nothing when it does not exist.
  std::optional<std::string> read_file(const std::string& name) const;
  // Appends `text` to the regular file `name` (created when missing). Throws ResultsError.
  void append(const std::string& name, const std::string& text) const;
  // Writes `text` to a new temporary file here (a fresh name, O_EXCL: a link planted at any name is
  // never written through) and renames it over `name`, so a reader sees the old file or the new one.
  void write_atomically(const std::string& name, const std::string& text) const;

  // Removes the file or link `name` (a link is removed, never what it points to); missing is fine.
  void remove_file(const std::string& name) const;
  // Removes `name` and, when it is a folder, everything below it; links inside are removed as links.
  void remove_tree(const std::string& name) const;
  // Removes the folder `name` if it is empty; false when it is not (or missing).
  bool remove_if_empty(const std::string& name) const;

 private:
  Folder(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

const char* type_name(Folder::Type type);
// Writes all of `text` to `fd`: 0, or the errno of the first failure (ENOSPC for a write of nothing).
int write_fully(int fd, const std::string& text);
// "P is a symbolic link, not a folder (...)": the one message for a misplaced entry; `wanted` as
// type_name() says it, or any text ("a file or folder").
std::string misplaced(const std::string& path, Folder::Type found, const std::string& wanted);

// For readers, before they open `path`: nothing when it is missing or a regular file (links
// followed: reading through one changes nothing); otherwise ResultsError naming it, since a fifo
// or a device in a folder from someone else would block the reader or feed it without end. The
// check is units::input_file_problem, the one every file a user names goes through.
void check_readable_file(const std::string& path);

// Writes `text` to `path` through a temporary file beside it (Folder::write_atomically in the
// folder holding it): a reader sees the old file or the new one, never half of one. Throws
// ResultsError with the system's reason (read-only file system, permission denied, no space).
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace allocmark::results
