// Files a user names for allocmark to read (a matrix, a baseline, a trace, a topology, a cell
// description, a program's input, a results folder's files): the one check before any of them is
// opened, and the digest of a file's contents. A fifo, a device or a folder where a file is expected
// would block a reader for ever or feed it without end (a folder reads as an empty file), so every
// reader asks here first. No dependencies beyond the standard library and POSIX, so any floor may
// include it.
#pragma once

#include <stdexcept>
#include <string>

namespace allocmark::units {

// What is wrong with `path` as a file to read, "" when nothing is: "PATH does not exist", "PATH is
// a fifo, not a regular file" (a folder, a device, a socket), "cannot read PATH: Permission denied".
// Links are followed (reading through one changes nothing). Nothing that could block is opened: the
// kind comes from stat(2), and a regular file is opened (O_NONBLOCK) only to learn it is readable.
std::string input_file_problem(const std::string& path);

// Thrown by check_input_file; the CLI answers every std::exception before a run with exit 2.
struct InputFileError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// Throws InputFileError "WHAT: PROBLEM" (`what` names the flag or field: "--confirm-matrix",
// "trace show") when input_file_problem says anything.
void check_input_file(const std::string& path, const std::string& what);

// The SHA-256 of `path`'s contents as 64 lowercase hex digits, read in blocks (no mapping, nothing
// kept). Checks the file first (check_input_file with `what`); a read error is an InputFileError.
std::string file_sha256(const std::string& path, const std::string& what);
// The SHA-256 of `bytes` (for tests, and for what is already in memory).
std::string sha256_hex(const std::string& bytes);

}  // namespace allocmark::units
