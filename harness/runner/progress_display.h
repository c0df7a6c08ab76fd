// What a matrix run shows while its cells run. On a terminal: one line redrawn in place (the cell,
// its own and the run's elapsed time, eta) and a line per cell that did not end ok. Anywhere else (a file, a pipe, a CI log):
// a line per finished cell and, while one runs long, a heartbeat at most every kHeartbeatSeconds,
// never a carriage return or an erase sequence (a lab cell's CI log once held a hundred redraws).
// The clock is a parameter so that the heartbeat's timing is tested without waiting for it.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <ostream>
#include <string>

#include "harness/os/clock.h"
#include "harness/results/safe_text.h"

namespace allocmark::runner {

inline constexpr double kHeartbeatSeconds = 30;

// "MM:SS", or "H:MM:SS" from an hour.
inline std::string clock_text(double seconds) {
  int s = static_cast<int>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

class ProgressDisplay {
 public:
  using Clock = std::function<os::Clock::time_point()>;
  ProgressDisplay(std::ostream& msg, bool tty, std::size_t total, std::size_t jobs,
                  Clock clock = [] { return os::Clock::now(); })
      : msg_(msg), tty_(tty), total_(total), jobs_(jobs), clock_(std::move(clock)), t0_(clock_()), last_line_(t0_) {}

  bool redraws() const { return tty_; }
  // A cell started (the driver's, between cells: nothing here runs inside a measured phase).
  void started(std::size_t index, std::string label) {
    index_ = index;
    label_ = std::move(label);
    running_ = true;
    last_line_ = cell_t0_ = clock_();
    if (tty_) redraw();
  }
  // Called every second or so while a cell runs: the redraw, or a heartbeat when one is due.
  void tick() {
    if (tty_) redraw();
    else heartbeat();
  }
  // A cell ended (`ran` cells so far); on a terminal only a cell that did not end ok is a line.
  void finished(std::size_t index, const std::string& label, const std::string& status, double wall_s,
                const std::string& error) {
    ++ran_;
    last_line_ = clock_();
    if (tty_ && status == "ok") return;
    // The label (allocator and program names) and the error (a program's stderr) are shown, never obeyed.
    msg_ << fmt::format("{}[{}/{}] {}\n", tty_ ? "\r\033[K" : "", index, total_,
                        results::terminal_line(fmt::format("{}: {} ({:.1f} s){}", label, status, wall_s,
                                                           error.empty() ? "" : ": " + error)))
         << std::flush;
  }
  void clear_line() {
    if (tty_) msg_ << "\r\033[K" << std::flush;
  }

 private:
  static double seconds_since(os::Clock::time_point t, os::Clock::time_point now) {
    return std::chrono::duration<double>(now - t).count();
  }
  // Both clocks, named: a single "elapsed" counted from the run's start was once read as the cell's
  // (a 2.5 min cell taken for 7.5 min, docs/validation.md issue 43).
  std::string clocks(os::Clock::time_point now) const {
    return fmt::format("cell {}, run {}", clock_text(seconds_since(cell_t0_, now)), clock_text(seconds_since(t0_, now)));
  }
  void redraw() {
    if (!running_) return;
    const auto now = clock_();
    const double e = seconds_since(t0_, now);
    const std::string eta = ran_ ? clock_text(std::max(0.0, e / ran_ * (jobs_ - ran_))) : "--:--";
    msg_ << fmt::format("\r\033[K[{}/{}] {}  {}  eta {}", index_, total_, results::terminal_line(label_), clocks(now),
                        eta)
         << std::flush;
  }
  void heartbeat() {
    const auto now = clock_();
    if (!running_ || std::chrono::duration<double>(now - last_line_).count() < kHeartbeatSeconds) return;
    last_line_ = now;
    msg_ << results::terminal_line(
                fmt::format("[{}/{}] {}: running, {}", index_, total_, label_, clocks(now)))
         << "\n" << std::flush;
  }

  std::ostream& msg_;
  const bool tty_;
  const std::size_t total_, jobs_;
  const Clock clock_;
  const os::Clock::time_point t0_;
  os::Clock::time_point last_line_, cell_t0_;
  std::size_t index_ = 0, ran_ = 0;
  std::string label_;
  bool running_ = false;
};

}  // namespace allocmark::runner
