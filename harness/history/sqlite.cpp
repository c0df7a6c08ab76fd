#include "harness/history/sqlite.h"

namespace allocmark::history::detail {

void fail(sqlite3* db, const std::string& path, const std::string& what) {
  const int code = db ? sqlite3_extended_errcode(db) : SQLITE_ERROR;
  std::string reason = db ? sqlite3_errmsg(db) : "out of memory";
  // Busy after the whole busy_timeout is another writer holding the file far longer than an add.
  if ((code & 0xff) == SQLITE_BUSY) reason += " (another process held the history for the whole wait)";
  throw HistoryError(path + ": " + what + ": " + reason);
}

void exec(sqlite3* db, const std::string& path, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, path, std::string("cannot run ") + sql);
}

Statement::Statement(sqlite3* db, const std::string& path, std::string_view sql) : db_(db), path_(path) {
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK)
    fail(db, path, "cannot prepare a statement");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, const std::string& text) {
  if (sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT) != SQLITE_OK)
    fail(db_, path_, "cannot bind a value");
  return *this;
}

Statement& Statement::bind(int index, long long number) {
  if (sqlite3_bind_int64(stmt_, index, number) != SQLITE_OK) fail(db_, path_, "cannot bind a value");
  return *this;
}

Statement& Statement::bind(int index, double number) {
  if (sqlite3_bind_double(stmt_, index, number) != SQLITE_OK) fail(db_, path_, "cannot bind a value");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, path_, "cannot read or write");
}

void Statement::run() {
  while (step()) {
  }
}

std::string Statement::text(int column) const {
  const unsigned char* t = sqlite3_column_text(stmt_, column);
  return t ? std::string(reinterpret_cast<const char*>(t), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)))
           : std::string();
}

long long Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Transaction::Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) {
  exec(db, path, "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  exec(db_, path_, "COMMIT");
  done_ = true;
}

}  // namespace allocmark::history::detail
