// liballocmark-trace-record.so on real programs: a small driver here (fork/exec with the pipe,
// the protocol's environment) reads the record stream and decodes it with encoding.h alone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/trace/encoding.h"

namespace allocmark::trace {
namespace {

const char* kRecorder = ALLOCMARK_TRACE_RECORD_LIBRARY;
const char* kProgram = ALLOCMARK_TRACE_RECORD_PROGRAM;
const char* kJemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
const char* kPython = "/usr/bin/python3";
constexpr int kPhaseFd = 100;

struct Outcome {
  std::string stream;  // what came through the pipe
  std::string out;     // the program's standard output
  int status = -1;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `preload` empty: the program alone (no recorder, no trace environment).
Outcome run(const std::vector<std::string>& argv, const std::string& preload, bool phases = false) {
  char out_path[] = "/tmp/trace_record_test_XXXXXX";
  int out_fd = mkstemp(out_path);
  int p[2];
  if (out_fd < 0 || pipe(p) != 0) std::abort();
  const pid_t driver = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    dup2(out_fd, 1);
    if (!preload.empty()) {
      setenv("LD_PRELOAD", preload.c_str(), 1);
      setenv("ALLOCMARK_TRACE_FD", std::to_string(p[1]).c_str(), 1);
      setenv("ALLOCMARK_TRACE_DRIVER_PID", std::to_string(driver).c_str(), 1);
      if (phases) {
        int placeholder = open("/dev/null", O_RDONLY);  // the driver keeps K free like this
        dup2(placeholder, kPhaseFd);
        setenv("ALLOCMARK_PHASE_FD", std::to_string(kPhaseFd).c_str(), 1);
      }
    } else {
      close(p[1]);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(p[1]);
  Outcome r;
  char buf[65536];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.stream.append(buf, static_cast<std::size_t>(n));
  }
  close(p[0]);
  waitpid(pid, &r.status, 0);
  close(out_fd);
  r.out = read_file(out_path);
  unlink(out_path);
  return r;
}

struct Event {
  Op op;
  uint32_t thread;
  uint64_t time_us, id = 0, old_id = 0, size = 0, old_size = 0, align = 0, epoch = 0;
};

struct Decoded {
  std::string error;  // empty: the stream parsed to its end and every id checked out
  int images = 0;
  std::vector<std::string> execs;  // the 'X' chunks' paths
  bool ended = false;
  uint64_t unknown_frees = 0, lost_events = 0;
  std::map<uint64_t, std::string> phase_names;  // epoch -> name
  std::vector<Event> events;
  std::set<uint32_t> threads;
  std::map<uint64_t, Event> allocs;  // id -> its allocation
  uint64_t count(Op op, uint64_t size) const {
    uint64_t n = 0;
    for (const auto& e : events) n += e.op == op && e.size == size;
    return n;
  }
};

struct Reader {
  const uint8_t *p, *end;
  bool ok = true;
  uint64_t v() {
    uint64_t x = 0;
    std::size_t n = get_varint(p, end, x);
    if (!n) ok = false;
    p += n;
    return x;
  }
};

// Reads `len` and that many bytes; false (with `error` set) when the stream ends first.
bool read_counted(Reader& in, std::string& to, Decoded& d, const char* error) {
  uint64_t len = in.v();
  if (!in.ok || len > static_cast<uint64_t>(in.end - in.p)) {
    d.error = error;
    return false;
  }
  to.assign(reinterpret_cast<const char*>(in.p), len);
  in.p += len;
  return true;
}

// One chunk of the record stream after its tag; thread chunks' bytes go to `bytes`.
void read_chunk(uint8_t tag, Reader& in, Decoded& d, std::map<uint32_t, std::string>& bytes) {
  std::string text;
  if (tag == kTagChunk) {
    auto thread = static_cast<uint32_t>(in.v());
    if (read_counted(in, text, d, "chunk cut off")) bytes[thread] += text;
  } else if (tag == kTagPhase) {
    uint64_t epoch = in.v();
    in.v();
    if (read_counted(in, text, d, "phase cut off")) d.phase_names[epoch] = text;
  } else if (tag == kTagImage) {
    in.v();
    ++d.images;
    bytes.clear();  // a new image voids what came before
    d.phase_names.clear();
  } else if (tag == kTagExec) {
    if (read_counted(in, text, d, "exec cut off")) d.execs.push_back(text);
  } else if (tag == kTagEnd) {
    d.unknown_frees = in.v();
    d.lost_events = in.v();
    d.ended = true;
  } else {
    d.error = "unknown tag " + std::to_string(tag);
  }
}

Event read_event(Reader& r, Op op, uint32_t thread, uint64_t& t) {
  Event e{op, thread, t += r.v()};
  if (is_alloc(e.op)) {
    e.id = r.v();
    e.size = r.v();
    if (has_align(e.op)) e.align = r.v();
  } else if (e.op == Op::Realloc) {
    e.old_id = r.v();
    e.id = r.v();
    e.size = r.v();
    e.old_size = r.v();
  } else if (is_free(e.op)) {
    e.id = r.v();
    e.size = r.v();
  } else {
    e.epoch = r.v();
  }
  e.time_us = t;
  return e;
}

// False, with d.error set, at an unknown op or an event cut off.
bool decode_thread(uint32_t thread, const std::string& b, Decoded& d) {
  d.threads.insert(thread);
  Reader r{reinterpret_cast<const uint8_t*>(b.data()), reinterpret_cast<const uint8_t*>(b.data()) + b.size()};
  uint64_t t = 0;
  while (r.p < r.end && r.ok) {
    const uint8_t b0 = *r.p++;
    if (!is_known(b0)) { d.error = "unknown op " + std::to_string(b0); return false; }
    d.events.push_back(read_event(r, static_cast<Op>(b0), thread, t));
  }
  if (!r.ok) { d.error = "event cut off in thread " + std::to_string(thread); return false; }
  return true;
}

// Ids: each allocated once; each freed at most once, after (in time) its allocation.
void check_ids(Decoded& d) {
  std::map<uint64_t, uint64_t> alloc_time;
  for (const auto& e : d.events) {
    const bool allocates = is_alloc(e.op) || e.op == Op::Realloc;
    if (allocates && e.id != 0) {
      if (!d.allocs.emplace(e.id, e).second) { d.error = "id allocated twice: " + std::to_string(e.id); return; }
      alloc_time[e.id] = e.time_us;
    }
  }
  std::set<uint64_t> freed;
  for (const auto& e : d.events) {
    uint64_t gone = is_free(e.op) ? e.id : e.op == Op::Realloc && !(e.id == 0 && e.size > 0) ? e.old_id : 0;
    if (!gone) continue;
    if (!alloc_time.count(gone)) { d.error = "freed, never allocated: " + std::to_string(gone); return; }
    if (alloc_time[gone] > e.time_us) { d.error = "freed before allocated: " + std::to_string(gone); return; }
    if (!freed.insert(gone).second) { d.error = "freed twice: " + std::to_string(gone); return; }
    if (is_free(e.op) && e.size != d.allocs[gone].size) { d.error = "free with another size"; return; }
  }
}

Decoded decode(const std::string& stream) {
  Decoded d;
  Reader in{reinterpret_cast<const uint8_t*>(stream.data()), reinterpret_cast<const uint8_t*>(stream.data()) + stream.size()};
  std::map<uint32_t, std::string> bytes;
  while (in.p < in.end && in.ok && d.error.empty()) {
    if (d.ended) d.error = "bytes after the 'E' chunk";
    const uint8_t tag = *in.p++;
    read_chunk(tag, in, d, bytes);
  }
  if (!in.ok && d.error.empty()) d.error = "varint cut off";
  if (!d.error.empty()) return d;
  for (const auto& [thread, b] : bytes)
    if (!decode_thread(thread, b, d)) return d;
  check_ids(d);
  return d;
}

std::string recorder_first(const std::string& allocator = "") {
  return allocator.empty() ? std::string(kRecorder) : std::string(kRecorder) + " " + allocator;
}

// The recorded run's trace, checked as every test wants it: one image, parsed to its end, ended.
Decoded recorded_ok(const std::vector<std::string>& argv, const std::string& allocator = "") {
  Outcome plain = run(argv, "");
  Outcome traced = run(argv, recorder_first(allocator));
  EXPECT_EQ(traced.status, 0);
  EXPECT_EQ(traced.out, plain.out) << "the program's output changed under the recorder";
  Decoded d = decode(traced.stream);
  EXPECT_EQ(d.error, "");
  EXPECT_TRUE(d.ended) << "no 'E' chunk";
  EXPECT_EQ(d.images, 1);
  EXPECT_EQ(d.lost_events, 0u);
  return d;
}

TEST(TraceRecord, PythonDictOfStrings) {
  Decoded d = recorded_ok({kPython, "-c", "d = {str(i) * 20: i for i in range(100000)}; print(len(d))"});
  EXPECT_GT(d.events.size(), 1000u);
  EXPECT_GT(d.count(Op::Malloc, 0) + d.allocs.size(), 1000u);
}

TEST(TraceRecord, SortOfAFile) {
  char path[] = "/tmp/trace_record_sort_XXXXXX";
  int fd = mkstemp(path);
  std::string text;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    text += std::to_string(x % 1000000007) + " line\n";
  }
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  Decoded d = recorded_ok({"/usr/bin/sort", "-n", path});
  EXPECT_GT(d.events.size(), 10u);
  unlink(path);
}

TEST(TraceRecord, XzWithTwoThreads) {
  char path[] = "/tmp/trace_record_xz_XXXXXX";
  int fd = mkstemp(path);
  std::string text;
  uint64_t x = 2463534242ull;
  while (text.size() < 3 * 1024 * 1024) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    text += std::to_string(x) + (x % 3 ? " a\n" : " bb\n");
  }
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  Decoded d = recorded_ok({"/usr/bin/xz", "-T2", "-1", "--block-size=512KiB", "-c", path});
  EXPECT_GE(d.threads.size(), 2u) << "xz -T2 compresses in worker threads";
  unlink(path);
}

// Every interposed call, in two threads, counted exactly; a nested call (libstdc++'s operator
// new calling malloc) appears once, as the outer one.
TEST(TraceRecord, EveryCallOfACppProgram) {
  for (std::string allocator : {"", kJemalloc}) {
    SCOPED_TRACE(allocator.empty() ? "glibc" : "jemalloc");
    const bool jemalloc = !allocator.empty();
    Decoded d = jemalloc ? recorded_ok({kProgram, "--no-pvalloc"}, allocator) : recorded_ok({kProgram});
    const uint64_t n = 2 * 500;
    EXPECT_EQ(d.threads.size(), 2u);
    EXPECT_EQ(d.count(Op::Malloc, 1001), n);
    EXPECT_EQ(d.count(Op::Free, 1001), n);
    EXPECT_EQ(d.count(Op::Calloc, 3006), n);
    EXPECT_EQ(d.count(Op::Malloc, 1003), n);
    EXPECT_EQ(d.count(Op::Realloc, 5003), n);
    EXPECT_EQ(d.count(Op::Free, 5003), n);
    EXPECT_EQ(d.count(Op::PosixMemalign, 1004), n);
    EXPECT_EQ(d.count(Op::AlignedAlloc, 1280), n);
    EXPECT_EQ(d.count(Op::Memalign, 1006), n);
    EXPECT_EQ(d.count(Op::Valloc, 1007), n);
    EXPECT_EQ(d.count(Op::Pvalloc, 1008), jemalloc ? 0 : n);
    EXPECT_EQ(d.count(Op::New, 1009), n);
    EXPECT_EQ(d.count(Op::Delete, 1009), n);
    EXPECT_EQ(d.count(Op::NewArray, 1010), n);
    EXPECT_EQ(d.count(Op::DeleteArray, 1010), n);
    EXPECT_EQ(d.count(Op::NewAligned, 1011), n);
    EXPECT_EQ(d.count(Op::DeleteAligned, 1011), n);
    EXPECT_EQ(d.count(Op::NewArrayAligned, 1012), n);
    EXPECT_EQ(d.count(Op::DeleteArrayAligned, 1012), n);
    EXPECT_EQ(d.count(Op::New, 1013), n);  // nothrow
    EXPECT_EQ(d.count(Op::Delete, 1013), n);
    EXPECT_EQ(d.count(Op::DeleteSized, 1014), n);
    EXPECT_EQ(d.count(Op::DeleteArraySized, 1017), n);
    EXPECT_EQ(d.count(Op::Malloc, 1016), n);  // strdup calls malloc
    for (uint64_t size : {1009, 1010, 1011, 1012, 1013, 1014, 1017}) EXPECT_EQ(d.count(Op::Malloc, size), 0u) << size;
    for (const auto& e : d.events)
      if (e.op == Op::PosixMemalign || e.op == Op::NewAligned) {
        EXPECT_EQ(e.align, 64u);
      }
  }
}

TEST(TraceRecord, PythonUnderJemalloc) {
  Decoded d = recorded_ok({kPython, "-c", "x = [bytearray(1000 + i) for i in range(20000)]; print(len(x))"}, kJemalloc);
  EXPECT_GE(d.count(Op::Malloc, 1001) + d.count(Op::Calloc, 1001), 1u);
  EXPECT_GT(d.events.size(), 20000u);
}

// A fork child stops recording: its allocations (a 12345678-byte bytearray) are nowhere, and it
// leaves by os._exit (the interposed _exit) without writing.
TEST(TraceRecord, ForkChildWritesNothing) {
  Decoded d = recorded_ok({kPython, "-c",
                           "import os\n"
                           "pid = os.fork()\n"
                           "if pid == 0:\n"
                           "    x = bytearray(12345678)\n"
                           "    os._exit(0)\n"
                           "os.waitpid(pid, 0)\n"
                           "y = bytearray(7654321)\n"
                           "print('parent')\n"});
  uint64_t child = 0, parent = 0;
  for (const auto& [id, e] : d.allocs) {
    child += e.size >= 12345678 && e.size <= 12345680;
    parent += e.size >= 7654321 && e.size <= 7654323;
  }
  EXPECT_EQ(child, 0u);
  EXPECT_EQ(parent, 1u);
}

// The program's children (not the driver's) load the recorder and record nothing.
TEST(TraceRecord, ChildProcessesStaySilent) {
  Decoded d = recorded_ok({kPython, "-c",
                           "import subprocess\n"
                           "subprocess.run(['/usr/bin/python3', '-c', 'x = bytearray(12345678)'], check=True)\n"
                           "print('done')\n"});
  for (const auto& [id, e] : d.allocs) EXPECT_FALSE(e.size >= 12345678 && e.size <= 12345680);
}

// Exec: an 'I' chunk per image; the trace is the last one's. dash leaves by _exit.
TEST(TraceRecord, ExecStartsANewImage) {
  Outcome traced = run({"/bin/sh", "-c", "echo sh; exec /usr/bin/python3 -c 'x = bytearray(7654321); print(1)'"},
                   recorder_first());
  EXPECT_EQ(traced.status, 0);
  EXPECT_EQ(traced.out, "sh\n1\n");
  Decoded d = decode(traced.stream);
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.images, 2);
  EXPECT_EQ(d.execs, std::vector<std::string>{"/usr/bin/python3"}) << "the exec names its image first";
  EXPECT_TRUE(d.ended);
  uint64_t big = 0;
  for (const auto& [id, e] : d.allocs) big += e.size >= 7654321 && e.size <= 7654323;
  EXPECT_EQ(big, 1u);

  Outcome dash = run({"/bin/sh", "-c", "x=$(echo a); echo $x"}, recorder_first());
  EXPECT_EQ(dash.out, "a\n");
  Decoded e = decode(dash.stream);
  EXPECT_EQ(e.error, "");
  EXPECT_EQ(e.images, 1);
  EXPECT_TRUE(e.ended) << "dash's _exit sends 'E' too";
}

TEST(TraceRecord, PhaseMarks) {
  const char* script =
      "import os\n"
      "fd = int(os.environ['ALLOCMARK_PHASE_FD'])\n"
      "def mark(line):\n"
      "    os.write(fd, line)\n"
      "    return os.read(fd, 16)\n"
      "a = [bytearray(3000) for i in range(100)]\n"
      "print(mark(b'phase build\\n'))\n"
      "b = [bytearray(3001) for i in range(100)]\n"
      "print(mark(b'phase no good\\n'))\n"
      "print(mark(b'phase run\\n'))\n"
      "c = [bytearray(3002) for i in range(100)]\n";
  Outcome traced = run({kPython, "-c", script}, recorder_first(), true);
  EXPECT_EQ(traced.status, 0);
  EXPECT_EQ(traced.out, "b'ok\\n'\nb'error\\n'\nb'ok\\n'\n");
  Decoded d = decode(traced.stream);
  ASSERT_EQ(d.error, "");
  EXPECT_TRUE(d.ended);
  EXPECT_EQ(d.phase_names, (std::map<uint64_t, std::string>{{1, "build"}, {2, "run"}}));
  // The main thread's events: the 3000s, then Phase 1, the 3001s, Phase 2, the 3002s.
  uint64_t epoch = 0;
  int phases_seen = 0;
  for (const auto& e : d.events) {
    if (e.op == Op::Phase) {
      EXPECT_GT(e.epoch, epoch);
      epoch = e.epoch;
      ++phases_seen;
    }
    // bytearray(3000 + k) asks for 3001 + k bytes: k is the phase it was made in.
    if (e.size >= 3001 && e.size <= 3003 && is_alloc(e.op)) {
      EXPECT_EQ(epoch, e.size - 3001) << e.size;
    }
  }
  EXPECT_EQ(phases_seen, 2);
}

// Killed by a signal: no 'E' chunk (the driver reports the trace as cut off).
TEST(TraceRecord, KilledSendsNoEnd) {
  Outcome traced = run({kPython, "-c", "import os, signal\nx = bytearray(1000)\nos.kill(os.getpid(), signal.SIGKILL)"},
                   recorder_first());
  EXPECT_TRUE(WIFSIGNALED(traced.status));
  Decoded d = decode(traced.stream);
  EXPECT_FALSE(d.ended);
  EXPECT_EQ(d.images, 1);
}

// Without the driver's pid as its parent, a process that loads the recorder writes nothing.
TEST(TraceRecord, OtherProcessesRecordNothing) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    setenv("LD_PRELOAD", kRecorder, 1);
    setenv("ALLOCMARK_TRACE_FD", std::to_string(p[1]).c_str(), 1);
    setenv("ALLOCMARK_TRACE_DRIVER_PID", "1", 1);
    execl(kPython, kPython, "-c", "x = bytearray(5000)", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  char c;
  EXPECT_EQ(read(p[0], &c, 1), 0);
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(status, 0);
}

}  // namespace
}  // namespace allocmark::trace
