// How a cell ended, decided from how its worker ended and what it reported. Pure: unit-tested on
// recorded outcomes (ok, crash, hang, cut-short stream, an exit without `done`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace allocmark::runner {

struct WorkerEnd {
  bool timed_out = false;       // killed by the runner at the cell's timeout
  int wait_status = 0;          // from waitpid
  double timeout_s = 0;         // the limit, for the message
  bool saw_done = false;        // the worker's final `done` event arrived
  nlohmann::json error_event;   // the worker's `error` event, or null
  std::size_t partial_bytes = 0;     // an unfinished last report line
  std::size_t malformed_lines = 0;   // report lines that were not JSON objects
  std::string log_tail;         // the end of the worker's log, for reasons
};

struct CellStatus {
  std::string status;   // ok | failed | crashed | timeout
  nlohmann::json error; // null for ok, else a sentence
};

CellStatus classify(const WorkerEnd& end);

// "killed by signal 9 (Killed); ..." with the OOM-killer hint for a SIGKILL allocmark did not send.
std::string signal_reason(int sig);

}  // namespace allocmark::runner
