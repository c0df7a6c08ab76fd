#include "harness/os/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace allocmark::os {

namespace {
// read(2) retried on EINTR.
ssize_t read_some(int fd, char* buf, std::size_t size) {
  for (;;) {
    const ssize_t n = ::read(fd, buf, size);
    if (n >= 0 || errno != EINTR) return n;
  }
}

void close_keeping_errno(int fd) {
  const int saved = errno;
  ::close(fd);
  errno = saved;
}
}  // namespace

ssize_t read_file(const char* path, char* buf, std::size_t size) {
  if (size == 0) return -1;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::size_t used = 0;
  while (used + 1 < size) {
    const ssize_t n = read_some(fd, buf + used, size - 1 - used);
    if (n < 0) {
      close_keeping_errno(fd);
      return -1;
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  close_keeping_errno(fd);
  buf[used] = '\0';
  return static_cast<ssize_t>(used);
}

bool read_lines(const char* path, char* buf, std::size_t size, void (*line)(void* ctx, const char* text, std::size_t length),
                void* ctx) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::size_t used = 0;
  for (;;) {
    const ssize_t n = read_some(fd, buf + used, size - used);
    if (n < 0) {
      close_keeping_errno(fd);
      return false;
    }
    used += static_cast<std::size_t>(n);
    std::size_t start = 0;
    for (;;) {
      auto* nl = static_cast<char*>(std::memchr(buf + start, '\n', used - start));
      if (!nl) break;
      line(ctx, buf + start, static_cast<std::size_t>(nl - (buf + start)));
      start = static_cast<std::size_t>(nl - buf) + 1;
    }
    if (n == 0) {
      if (start < used) line(ctx, buf + start, used - start);
      break;
    }
    std::memmove(buf, buf + start, used - start);
    used -= start;
    if (used == size) used = 0;  // a line longer than the buffer: dropped
  }
  close_keeping_errno(fd);
  return true;
}

void proc_path(char* out, std::size_t size, pid_t pid, const char* file) {
  if (pid == 0)
    std::snprintf(out, size, "/proc/self/%s", file);
  else
    std::snprintf(out, size, "/proc/%d/%s", static_cast<int>(pid), file);
}

std::string read_text(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read_some(fd, buf, sizeof buf);
    if (n < 0) text.clear();
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  close_keeping_errno(fd);
  return text;
}

std::vector<pid_t> process_ids() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (!proc) return pids;
  while (const dirent* e = ::readdir(proc))
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9') pids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  ::closedir(proc);
  return pids;
}

std::string self_exe_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf)
    throw std::runtime_error(std::string("cannot read /proc/self/exe: ") + std::strerror(n < 0 ? errno : ENAMETOOLONG));
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace allocmark::os
