// For tests: a thread's events written as the recorder writes them (the op byte, then its varints:
// alloc dt, id, size[, align] | realloc dt, old, new, size, old size | free dt, id, size | phase
// dt, epoch), and small traces of such threads. Mechanism tests only: traces that validate
// anything come from real programs (record_test.cpp, tests/trace_test.py).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "harness/trace/format.h"

namespace allocmark::trace::testing {

class Events {
 public:
  Events& op(Op o, std::initializer_list<uint64_t> fields) {
    bytes_.push_back(static_cast<uint8_t>(o));
    for (uint64_t f : fields) {
      uint8_t b[kMaxVarint];
      bytes_.insert(bytes_.end(), b, b + put_varint(b, f));
    }
    ++count_;
    return *this;
  }
  ThreadEvents done() const { return ThreadEvents{bytes_, count_}; }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t count_ = 0;
};

// `threads` threads, each allocating one 64-byte block (ids 1..threads), written to `path`.
inline void write_one_block_per_thread(const std::string& path, int threads) {
  Trace t;
  for (int i = 0; i < threads; ++i) t.threads.push_back(Events().op(Op::Malloc, {1, static_cast<uint64_t>(i + 1), 64}).done());
  t.max_id = static_cast<uint64_t>(threads);
  write_trace(path, t);
}

}  // namespace allocmark::trace::testing
