// The trace codec: round trips, and every kind of damage refused with where it is. Real programs'
// traces are tested with the recorder (record_preload_test) and the CLI (tests/trace_test.py).
#include "harness/trace/format.h"
#include "harness/trace/test_events.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

namespace allocmark::trace {
namespace {

using testing::Events;

Trace two_threads() {
  Trace t;
  t.phase_names = {"build"};
  t.phase_times_us = {50};
  // dt, id, size | realloc: dt, old, new, size, old size | free: dt, id, size | phase: dt, epoch
  t.threads.push_back(Events()
                          .op(Op::Malloc, {10, 1, 100})
                          .op(Op::Phase, {40, 1})
                          .op(Op::Realloc, {1, 1, 2, 300, 100})
                          .op(Op::NewAligned, {1, 3, 64, 64})
                          .done());
  t.threads.push_back(Events().op(Op::Calloc, {70, 1025, 40}).op(Op::Free, {5, 2, 300}).op(Op::DeleteAligned, {1, 3, 64}).done());
  t.max_id = 1025;
  t.events = 7;
  t.ended = true;
  t.header = {{"program", "test"}};
  return t;
}

std::string temp_path(const char* name) { return std::string("/tmp/allocmark_trace_test_") + std::to_string(getpid()) + name; }

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

TEST(TraceFormat, RoundTripsThroughAFile) {
  Trace t = two_threads();
  std::string path = temp_path("rt");
  write_trace(path, t);
  Trace r = read_trace(path);
  std::remove(path.c_str());
  EXPECT_EQ(r.header["program"], "test");
  EXPECT_EQ(r.phase_names, t.phase_names);
  EXPECT_EQ(r.phase_times_us, t.phase_times_us);
  ASSERT_EQ(r.threads.size(), 2u);
  Trace dense = two_threads();
  renumber_ids(dense);
  EXPECT_EQ(r.threads[0].bytes, dense.threads[0].bytes);
  EXPECT_EQ(r.threads[1].bytes, dense.threads[1].bytes);
  EXPECT_EQ(r.events, 7u);
  EXPECT_EQ(r.max_id, 4u);  // ids 1, 2, 3 and 1025, renumbered 1..4
  EXPECT_TRUE(r.ended);
  // Times are absolute once decoded.
  EventCursor c = r.threads[0].cursor();
  Event e;
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.time_us, 10u);
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.op, Op::Phase);
  EXPECT_EQ(e.epoch, 1u);
  EXPECT_EQ(e.time_us, 50u);
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.op, Op::Realloc);
  EXPECT_EQ(e.old_id, 1u);
  EXPECT_EQ(e.id, 2u);
  EXPECT_EQ(e.size, 300u);
  EXPECT_EQ(e.old_size, 100u);
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.align, 64u);
  EXPECT_FALSE(c.next(e));
  EXPECT_TRUE(c.ok());
}

TEST(TraceFormat, AStreamFedByteByByteParsesAsAWhole) {
  std::vector<uint8_t> stream = encode_stream(two_threads());
  StreamParser whole, bytes;
  whole.feed(stream.data(), stream.size());
  for (uint8_t b : stream) bytes.feed(&b, 1);
  Trace a = whole.finish(), b = bytes.finish();
  EXPECT_EQ(a.threads[1].bytes, b.threads[1].bytes);
  EXPECT_EQ(a.events, b.events);
}

TEST(TraceFormat, ChunksOfOneThreadContinueItsClock) {
  Trace t = two_threads();
  std::vector<uint8_t> s;
  auto chunk = [&](const Events& e) {
    ThreadEvents te = e.done();
    s.push_back(kTagChunk);
    s.push_back(0);
    s.push_back(static_cast<uint8_t>(te.bytes.size()));
    s.insert(s.end(), te.bytes.begin(), te.bytes.end());
  };
  chunk(Events().op(Op::Malloc, {10, 1, 8}));
  chunk(Events().op(Op::Free, {5, 1, 8}));
  StreamParser p;
  p.feed(s.data(), s.size());
  Trace r = p.finish();
  EventCursor c = r.threads[0].cursor();
  Event e;
  c.next(e);
  c.next(e);
  EXPECT_EQ(e.time_us, 15u);
}

TEST(TraceFormat, ANewImageVoidsWhatCameBefore) {
  std::vector<uint8_t> s = encode_stream(two_threads());
  s.pop_back();  // the 'E' chunk's fields and tag
  s.pop_back();
  s.pop_back();
  std::vector<uint8_t> image{kTagImage, 42};
  s.insert(s.end(), image.begin(), image.end());
  StreamParser p;
  p.feed(s.data(), s.size());
  Trace r = p.finish();
  EXPECT_TRUE(r.threads.empty());
  EXPECT_EQ(r.images, 1u);
  EXPECT_FALSE(r.ended);
}

TEST(TraceFormat, ACorruptEventIsRefusedWithItsStreamOffset) {
  std::vector<uint8_t> s = encode_stream(two_threads());
  // The first thread chunk follows the phase chunk: P, 1, 50, 5, "build" = 9 bytes; then C, 0, len.
  const std::size_t first_event = 9 + 3;
  ASSERT_EQ(s[first_event], static_cast<uint8_t>(Op::Malloc));
  s[first_event] = 0xEE;
  StreamParser p;
  try {
    p.feed(s.data(), s.size());
    FAIL() << "accepted";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("record stream offset " + std::to_string(first_event)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("corrupt event"), std::string::npos) << e.what();
  }
}

TEST(TraceFormat, AStreamCutInsideAChunkIsRefused) {
  std::vector<uint8_t> s = encode_stream(two_threads());
  StreamParser p;
  p.feed(s.data(), s.size() - 6);
  EXPECT_THROW(p.finish(), TraceError);
}

// The recording of a program a signal ended may stop inside a chunk: its complete events are kept.
TEST(TraceFormat, ARecordingCutBySignalKeepsItsCompleteEvents) {
  Trace t = two_threads();
  t.ended = false;
  std::vector<uint8_t> s = encode_stream(t);
  StreamParser p;
  p.feed(s.data(), s.size() - 2);  // inside thread 1's last event (DeleteAligned: op, dt, id, size)
  Trace r = p.finish(true);
  ASSERT_EQ(r.threads.size(), 2u);
  EXPECT_EQ(r.threads[0].events, 4u);
  EXPECT_EQ(r.threads[1].events, 2u);
  EXPECT_FALSE(r.ended);
}

// ... and a free whose allocation was still in another thread's buffer is counted, not an error.
TEST(TraceFormat, ARecordingCutBySignalCountsFreesOfBlocksNeverSeen) {
  Trace t;
  t.threads.push_back(Events().op(Op::Malloc, {1, 1, 8}).op(Op::Free, {1, 5, 8}).op(Op::Realloc, {1, 6, 2, 32, 16}).done());
  std::vector<uint8_t> s = encode_stream(t);
  StreamParser strict, cut;
  strict.feed(s.data(), s.size());
  EXPECT_THROW(strict.finish(), TraceError);
  cut.feed(s.data(), s.size());
  Trace r = cut.finish(true);
  EXPECT_EQ(r.events, 2u);
  EXPECT_EQ(r.threads[0].events, 2u);
  EXPECT_EQ(r.unknown_frees, 2u);
  EventCursor c = r.threads[0].cursor();
  Event e;
  ASSERT_TRUE(c.next(e));
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.op, Op::Realloc);
  EXPECT_EQ(e.old_id, 0u);
  EXPECT_EQ(e.time_us, 3u);
}

TEST(TraceFormat, IdsAreChecked) {
  auto check = [](ThreadEvents events) {
    Trace t;
    t.threads.push_back(std::move(events));
    renumber_ids(t);
  };
  EXPECT_THROW(check(Events().op(Op::Free, {1, 7, 8}).done()), TraceError);  // freed, never allocated
  EXPECT_THROW(check(Events().op(Op::Malloc, {1, 7, 8}).op(Op::Malloc, {1, 7, 8}).done()), TraceError);  // allocated twice
  EXPECT_THROW(check(Events().op(Op::Malloc, {1, 7, 8}).op(Op::Free, {1, 7, 8}).op(Op::Free, {1, 7, 8}).done()),
               TraceError);  // freed twice
  EXPECT_NO_THROW(check(Events().op(Op::Malloc, {1, 7, 8}).op(Op::Free, {1, 7, 8}).done()));
  // A failed realloc leaves its block live; realloc(p, 0) returning NULL freed it.
  EXPECT_NO_THROW(check(Events().op(Op::Malloc, {1, 7, 8}).op(Op::Realloc, {1, 7, 0, 1 << 30, 8}).op(Op::Free, {1, 7, 8}).done()));
  EXPECT_THROW(check(Events().op(Op::Malloc, {1, 7, 8}).op(Op::Realloc, {1, 7, 0, 0, 8}).op(Op::Free, {1, 7, 8}).done()),
               TraceError);
  EXPECT_THROW(check(Events().op(Op::Realloc, {1, 9, 0, 1 << 30, 8}).done()), TraceError);  // resized, never allocated
}

// Ids are renumbered 1..objects in their order: a table indexed by id is sized by what the trace
// holds, not by the largest id it names (2^31 cost 2.1 GB in `show` and 16 GB in the worker).
TEST(TraceFormat, IdsAreRenumberedDensely) {
  Trace t;
  t.threads.push_back(Events().op(Op::Malloc, {1, uint64_t{1} << 31, 8}).op(Op::Malloc, {1, 5000, 8}).op(Op::Free, {1, uint64_t{1} << 31, 8}).done());
  renumber_ids(t);
  EXPECT_EQ(t.max_id, 2u);
  EventCursor c = t.threads[0].cursor();
  Event e;
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.id, 2u);
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.id, 1u);
  ASSERT_TRUE(c.next(e));
  EXPECT_EQ(e.op, Op::Free);
  EXPECT_EQ(e.id, 2u);
  EXPECT_EQ(e.time_us, 3u);
}

TEST(TraceFormat, DamagedFilesAreRefusedSayingWhere) {
  std::string path = temp_path("bad");
  write_trace(path, two_threads());
  std::vector<uint8_t> good = slurp(path);
  auto refused = [&](std::vector<uint8_t> bytes, const std::string& expect) {
    spit(path, bytes);
    try {
      read_trace(path);
      ADD_FAILURE() << "accepted: " << expect;
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  refused(std::vector<uint8_t>(good.begin(), good.begin() + 10), "not an allocmark trace");
  auto v = good;
  v[8] = 9;
  refused(v, "version 9");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 3), "cut off");
  v = good;
  v[32 + 6] ^= 0xff;  // inside the zstd frame
  refused(v, "file offset 32");
  v = good;
  v.back() = '#';  // the header's closing brace
  refused(v, "header is not JSON");
  std::remove(path.c_str());
  EXPECT_THROW(read_trace(path), std::runtime_error);  // missing
}

// A stream so repetitive that zstd would shrink it past what readers take (kMaxExpansion) is
// written in stored blocks: whatever a recording holds, its file reads back.
TEST(TraceFormat, ARepetitiveTraceIsWrittenSoThatItReadsBack) {
  Events failed;
  for (int i = 0; i < 400000; ++i) failed.op(Op::Malloc, {0, 0, uint64_t{1} << 60});
  Trace t;
  t.threads.push_back(failed.done());
  t.events = 400000;
  std::string path = temp_path("repetitive");
  write_trace(path, t);
  EXPECT_GT(slurp(path).size(), t.threads[0].bytes.size());  // stored, not compressed 10,000 times
  Trace r = read_trace(path);
  std::remove(path.c_str());
  EXPECT_EQ(r.events, 400000u);
  EXPECT_EQ(r.threads[0].bytes, t.threads[0].bytes);
}

// The peak resident memory of this process (VmHWM), in KiB.
long peak_rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// A zstd frame that declares 4 GiB of content and holds the real stream in one raw block: what one
// damaged byte in the size field makes of a good trace. It is refused without the 4 GiB being
// allocated and zeroed first (that took 12-15 s and as much memory as the frame claimed).
TEST(TraceFormat, AFrameClaimingMoreThanItHoldsIsRefusedWithoutAllocatingTheClaim) {
  std::string path = temp_path("claim");
  write_trace(path, two_threads());
  std::vector<uint8_t> file = slurp(path), stream = encode_stream(two_threads());
  const std::vector<uint8_t> header(file.end() - static_cast<long>(file[24] | file[25] << 8), file.end());
  std::vector<uint8_t> frame = {0x28, 0xB5, 0x2F, 0xFD, 0xC0 /* 8-byte size, windowed */, 0x50 /* 1 MiB window */};
  for (int i = 0; i < 8; ++i) frame.push_back(static_cast<uint8_t>((4ull << 30) >> (8 * i)));
  const uint32_t block = 1 /* last */ | static_cast<uint32_t>(stream.size()) << 3;  // a raw block
  for (int i = 0; i < 3; ++i) frame.push_back(static_cast<uint8_t>(block >> (8 * i)));
  frame.insert(frame.end(), stream.begin(), stream.end());
  std::vector<uint8_t> damaged(file.begin(), file.begin() + 32);
  for (int i = 0; i < 8; ++i) damaged[16 + i] = static_cast<uint8_t>(static_cast<uint64_t>(frame.size()) >> (8 * i));
  damaged.insert(damaged.end(), frame.begin(), frame.end());
  damaged.insert(damaged.end(), header.begin(), header.end());
  spit(path, damaged);
  const long before = peak_rss_kib();
  try {
    read_trace(path);
    ADD_FAILURE() << "accepted a frame that claims 4 GiB";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("file offset 32: the zstd frame's content size 4294967296"), std::string::npos) << e.what();
  }
  EXPECT_LT(peak_rss_kib() - before, 64 << 10) << "the claimed size was allocated";
  std::remove(path.c_str());
}

}  // namespace
}  // namespace allocmark::trace
