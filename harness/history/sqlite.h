// The few SQLite calls the history store makes, wrapped so every failure becomes a HistoryError
// naming the file, and every statement is prepared with bound parameters (a history is data: no
// value ever becomes SQL text).
#pragma once

#include <sqlite3.h>

#include <optional>
#include <string>
#include <string_view>

#include "harness/history/store.h"

namespace allocmark::history::detail {

class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, const std::string& text);
  Statement& bind(int index, long long number);
  Statement& bind(int index, double number);
  // Steps once: true while a row is there.
  bool step();
  // Steps to the end (statements without rows).
  void run();
  std::string text(int column) const;
  long long integer(int column) const;
  double real(int column) const;
  void reset();

 private:
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

// "FILE: WHAT: SQLite's message" as a HistoryError.
[[noreturn]] void fail(sqlite3* db, const std::string& path, const std::string& what);

// Runs SQL without rows or parameters (schema steps, BEGIN, COMMIT).
void exec(sqlite3* db, const std::string& path, const char* sql);

// Rolls back on destruction unless committed: a throw inside leaves the file as it was.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path);  // BEGIN IMMEDIATE: the write lock now, waiting busy_timeout
  ~Transaction();
  void commit();

 private:
  sqlite3* db_;
  const std::string& path_;
  bool done_ = false;
};

}  // namespace allocmark::history::detail
