// The OS layer (harness/os/): the launcher with real programs and real pipes, the file reader on
// real /proc files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>

#include "harness/os/clock.h"
#include "harness/os/files.h"
#include "harness/os/spawn.h"

using namespace allocmark::os;

namespace {

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  void close_write() {
    ::close(fds[1]);
    fds[1] = -1;
  }
  std::string read_all() {
    close_write();
    std::string text;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    return text;
  }
};

int exit_status(pid_t pid) {
  int status = 0;
  EXPECT_TRUE(wait_for(pid, status));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST(Spawn, TheChildGetsExactlyTheEnvironmentGiven) {
  Pipe out;
  SpawnOptions o;
  o.argv = {"/usr/bin/env"};
  o.env = std::vector<std::string>{"A=1", "B=two words"};
  o.fds = {{out.fds[1], 1}};
  SpawnResult r = spawn(o);
  ASSERT_GT(r.pid, 0) << r.error;
  EXPECT_EQ(out.read_all(), "A=1\nB=two words\n");
  EXPECT_EQ(exit_status(r.pid), 0);
}

TEST(Spawn, DescriptorsArePassedEvenWhenOneCopyOverwritesAnothersSource) {
  Pipe first, second;
  // The child's fd numbered like `second`'s write end leads to `first`, and the other way round.
  const int a = first.fds[1], b = second.fds[1];
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo one >&" + std::to_string(b) + "; echo two >&" + std::to_string(a)};
  o.fds = {{a, b}, {b, a}};
  SpawnResult r = spawn(o);
  ASSERT_GT(r.pid, 0) << r.error;
  EXPECT_EQ(exit_status(r.pid), 0);
  EXPECT_EQ(first.read_all(), "one\n");
  EXPECT_EQ(second.read_all(), "two\n");
}

TEST(Spawn, ADescriptorNotPassedIsClosedInTheChild) {
  Pipe kept;
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo x >&" + std::to_string(kept.fds[1])};
  SpawnResult r = spawn(o);
  ASSERT_GT(r.pid, 0) << r.error;
  EXPECT_NE(exit_status(r.pid), 0);
  EXPECT_EQ(kept.read_all(), "");
}

TEST(Spawn, ANewGroupIsLedByTheChildElseItStaysInOurs) {
  for (bool group : {true, false}) {
    SpawnOptions o;
    o.argv = {"/bin/sleep", "5"};
    o.new_group = group;
    SpawnResult r = spawn(o);
    ASSERT_GT(r.pid, 0) << r.error;
    EXPECT_EQ(::getpgid(r.pid), group ? r.pid : ::getpgrp());
    ::kill(r.pid, SIGKILL);
    EXPECT_EQ(exit_status(r.pid), 128 + SIGKILL);
  }
}

TEST(Spawn, WithADeathSignalTheChildDiesWithItsParent) {
  // We adopt the orphan (subreaper) to see how it ends.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Pipe said;
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    SpawnOptions o;
    o.argv = {"/bin/sleep", "30"};
    o.pdeathsig = SIGKILL;
    SpawnResult r = spawn(o);
    (void)!::write(said.fds[1], &r.pid, sizeof r.pid);
    ::_exit(r.pid > 0 ? 0 : 1);
  }
  pid_t child = -1;
  said.close_write();
  ASSERT_EQ(::read(said.fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  EXPECT_EQ(exit_status(middle), 0);
  ASSERT_GT(child, 0);
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 200 && (got = ::waitpid(child, &status, WNOHANG)) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (got == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_EQ(got, child) << "the child outlived its parent";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(Spawn, AProgramThatCannotStartIsAnErrorWithItsReason) {
  SpawnOptions o;
  o.argv = {"/nonexistent/program"};
  SpawnResult r = spawn(o);
  EXPECT_EQ(r.pid, -1);
  EXPECT_EQ(r.error_number, ENOENT);
  EXPECT_EQ(r.error, "cannot execute /nonexistent/program: No such file or directory");
  o.argv = {"allocmark-no-such-tool"};
  o.search_path = true;
  r = spawn(o);
  EXPECT_EQ(r.error_number, ENOENT);
  o = {};
  o.argv = {"/bin/true"};
  o.cwd = "/nonexistent";
  EXPECT_EQ(spawn(o).error, "cannot enter /nonexistent: No such file or directory");
}

TEST(Spawn, FailingInTheChildWritesTheReasonToItsStandardErrorAndExits127) {
  Pipe err;
  SpawnOptions o;
  o.argv = {"/nonexistent/program"};
  o.fds = {{err.fds[1], 2}};
  o.fail_in_child = true;
  SpawnResult r = spawn(o);
  ASSERT_GT(r.pid, 0) << r.error;
  EXPECT_EQ(exit_status(r.pid), 127);
  EXPECT_EQ(err.read_all(), "allocmark: cannot execute /nonexistent/program: No such file or directory\n");

  Pipe refused;
  o.fds = {{refused.fds[1], 2}};
  o.refuse = "this cell cannot run here";
  r = spawn(o);
  ASSERT_GT(r.pid, 0) << r.error;
  EXPECT_EQ(exit_status(r.pid), 127);
  EXPECT_EQ(refused.read_all(), "allocmark: this cell cannot run here\n");
}

TEST(Spawn, ThpDisableReachesTheProgram) {
  Pipe out;
  SpawnOptions o;
  o.argv = {"/bin/grep", "^THP_enabled", "/proc/self/status"};
  o.fds = {{out.fds[1], 1}};
  o.thp_disable = true;
  SpawnResult r = spawn(o);
  ASSERT_GT(r.pid, 0) << r.error;
  EXPECT_EQ(exit_status(r.pid), 0);
  EXPECT_EQ(out.read_all(), "THP_enabled:\t0\n");
}

// What a `run` child found, written to its fd 3 with system calls only (it is a child of a
// threaded test program): the descriptor it was told of, its session and SIGTERM's disposition.
static int report_what_the_child_has(const void* arg) {
  const int unpassed = *static_cast<const int*>(arg);
  struct sigaction term {};
  ::sigaction(SIGTERM, nullptr, &term);
  const char* lines[] = {::fcntl(unpassed, F_GETFD) < 0 && errno == EBADF ? "closed\n" : "open\n",
                         ::getsid(0) == ::getpid() ? "own session\n" : "caller's session\n",
                         term.sa_handler == SIG_IGN ? "SIGTERM ignored\n" : "SIGTERM default\n"};
  for (const char* line : lines) (void)!::write(3, line, std::strlen(line));
  return 7;
}

TEST(Spawn, ARunChildRunsTheFunctionInItsOwnSessionWithOnlyTheDescriptorsPassed) {
  Pipe out;
  // Not close-on-exec, and not fd 3: only the run child's own closing keeps it from the function.
  const int unpassed = ::fcntl(out.fds[1], F_DUPFD, 10);
  ASSERT_GE(unpassed, 0);
  SpawnOptions o;
  o.run = report_what_the_child_has;
  o.run_arg = &unpassed;
  o.new_session = true;
  o.ignore_signals = {SIGTERM};
  o.fds = {{out.fds[1], 3}};
  SpawnResult r = spawn(o);
  ::close(unpassed);
  ASSERT_GT(r.pid, 0) << r.error;
  EXPECT_EQ(exit_status(r.pid), 7);
  EXPECT_EQ(out.read_all(), "closed\nown session\nSIGTERM ignored\n");
}

TEST(Spawn, ASessionAndAGroupTogetherAreRefused) {
  SpawnOptions o;
  o.argv = {"/bin/true"};
  o.new_session = o.new_group = true;
  SpawnResult r = spawn(o);
  EXPECT_EQ(r.pid, -1);
  EXPECT_EQ(r.error_number, EINVAL);
}

TEST(ProcFiles, ReadFileFillsTheCallersBufferAndCutsWhatDoesNotFit) {
  char buf[8192];
  ASSERT_GT(read_file("/proc/self/status", buf, sizeof buf), 0);
  EXPECT_EQ(std::string(buf).rfind("Name:", 0), 0u);
  char small[6];
  EXPECT_EQ(read_file("/proc/self/status", small, sizeof small), 5);
  EXPECT_STREQ(small, "Name:");
  EXPECT_EQ(read_file("/nonexistent", buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST(ProcFiles, ReadLinesStreamsEveryLineThroughASmallBuffer) {
  char path[64];
  proc_path(path, sizeof path, 0, "status");
  EXPECT_STREQ(path, "/proc/self/status");
  proc_path(path, sizeof path, 42, "numa_maps");
  EXPECT_STREQ(path, "/proc/42/numa_maps");
  char whole[16384];
  ASSERT_GT(read_file("/proc/self/limits", whole, sizeof whole), 0);
  std::string joined;
  char buf[128];  // each line of limits is 80 bytes or less
  auto add = [](void* ctx, const char* text, std::size_t length) { static_cast<std::string*>(ctx)->append(text, length).append("\n"); };
  ASSERT_TRUE(read_lines("/proc/self/limits", buf, sizeof buf, add, &joined));
  EXPECT_EQ(joined, whole);
}

TEST(ProcFiles, ReadTextIsTheWholeFileBeyondAnyBufferAndNothingWhenUnreadable) {
  // /proc/self/maps of a gtest program is longer than read_text's 4 KiB steps.
  const std::string maps = read_text("/proc/self/maps");
  EXPECT_GT(maps.size(), 4096u);
  EXPECT_EQ(maps.back(), '\n');
  EXPECT_NE(maps.find("metrics_test"), std::string::npos);
  EXPECT_EQ(read_text("/nonexistent"), "");
  EXPECT_EQ(read_text("/proc"), "");  // a folder: open succeeds, read does not
}

TEST(ProcFiles, ProcessIdsHoldThisProcessAndAChildWhileItRuns) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "5"};
  SpawnResult r = spawn(o);
  ASSERT_GT(r.pid, 0) << r.error;
  const std::vector<pid_t> pids = process_ids();
  ::kill(r.pid, SIGKILL);
  exit_status(r.pid);
  EXPECT_NE(std::find(pids.begin(), pids.end(), ::getpid()), pids.end());
  EXPECT_NE(std::find(pids.begin(), pids.end(), r.pid), pids.end());
}

TEST(ProcFiles, SelfExePathIsThisProgram) {
  const std::string path = self_exe_path();
  EXPECT_EQ(path.substr(path.rfind('/') + 1), "metrics_test");
}

TEST(Clock, MonotonicNanosecondsAndSecondsAreOneClock) {
  const int64_t a = monotonic_ns();
  const double s = monotonic_s();
  const int64_t b = monotonic_ns();
  EXPECT_LE(a, b);
  EXPECT_GE(s, a * 1e-9 - 1e-6);
  EXPECT_LE(s, b * 1e-9 + 1e-6);
  // os::Clock is the same clock: its time points are monotonic_ns's nanoseconds.
  const int64_t c = monotonic_ns();
  const int64_t t = Clock::now().time_since_epoch().count();
  const int64_t d = monotonic_ns();
  EXPECT_LE(c, t);
  EXPECT_LE(t, d);
}
