// Reading the kernel's files (/proc, /sys) the harness measures with: raw open/read into the
// caller's buffer, no allocation, no iostreams, so the worker may call these at phase edges and the
// preloads inside malloc. Each leaves errno as the failed call set it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace allocmark::os {

// The whole file at `path` into buf (at most size - 1 bytes, then a NUL); the bytes read, or -1
// when it cannot be opened or read. Reads are retried on EINTR.
ssize_t read_file(const char* path, char* buf, std::size_t size);

// Calls line(ctx, text, length) for each line of the file at `path` (without its newline; the
// last one also without), streamed through buf: a line that does not fit in buf is skipped.
// False when the file cannot be opened or read.
bool read_lines(const char* path, char* buf, std::size_t size, void (*line)(void* ctx, const char* text, std::size_t length),
                void* ctx);

// "/proc/self/FILE" for pid 0, else "/proc/PID/FILE", into out.
void proc_path(char* out, std::size_t size, pid_t pid, const char* file);

// The whole file at `path` (a /proc or /sys file, read as read_file does), "" when it cannot be
// opened or read. Allocates: for the driver (its command line, the machine's description), not for
// phase edges.
std::string read_text(const std::string& path);

// The pid of every process now in /proc (its folders named by a number); empty when /proc cannot
// be listed. Allocates: for the driver (the sweep of a cell's leftover processes).
std::vector<pid_t> process_ids();

// The running program's own path (/proc/self/exe). Allocates: for the driver, not for phase edges.
// Throws std::runtime_error when the link cannot be read.
std::string self_exe_path();

}  // namespace allocmark::os
