#include "harness/trace/format.h"

#include <algorithm>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createDCtx_advanced: the decoder's memory from map_bytes
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "units/input_file.h"

namespace allocmark::trace {
namespace {

constexpr std::size_t kFileHeaderBytes = 32;

std::string at(uint64_t offset) { return "record stream offset " + std::to_string(offset); }

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void append_varint(std::vector<uint8_t>& out, uint64_t v) {
  uint8_t b[kMaxVarint];
  out.insert(out.end(), b, b + put_varint(b, v));
}

// An event's fields after its time, in the order the recorder writes them: one list for the
// reader and the writer (`field` reads into or writes from each).
template <class E, class F>
void each_field(E& e, F&& field) {
  if (is_alloc(e.op)) {
    field(e.id);
    field(e.size);
    if (has_align(e.op)) field(e.align);
  } else if (e.op == Op::Realloc) {
    field(e.old_id);
    field(e.id);
    field(e.size);
    field(e.old_size);
  } else if (is_free(e.op)) {
    field(e.id);
    field(e.size);
  } else {
    field(e.epoch);
  }
}

// Decodes one event at p; returns its length, 0 when it does not parse (unknown op, bad varint).
std::size_t decode_event(const uint8_t* p, const uint8_t* end, Event& e, uint64_t& time_us) {
  if (p >= end || !is_known(*p)) return 0;
  e = Event{};
  e.op = static_cast<Op>(*p);
  const uint8_t* q = p + 1;
  auto field = [&](uint64_t& v) {
    if (!q) return;
    std::size_t n = get_varint(q, end, v);
    q = n ? q + n : nullptr;
  };
  uint64_t dt = 0;
  field(dt);
  each_field(e, field);
  if (!q) return 0;
  time_us += dt;
  e.time_us = time_us;
  return static_cast<std::size_t>(q - p);
}

// Writes `e` as the recorder would, with `dt` as its time field; returns its length.
std::size_t put_event(uint8_t* out, const Event& e, uint64_t dt) {
  std::size_t n = 0;
  out[n++] = static_cast<uint8_t>(e.op);
  auto field = [&](uint64_t v) { n += put_varint(out + n, v); };
  field(dt);
  each_field(e, field);
  return n;
}

}  // namespace

void* map_bytes(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}
void unmap_bytes(void* p, std::size_t bytes) { ::munmap(p, bytes ? bytes : 1); }

bool EventCursor::next(Event& e) {
  if (p_ >= end_) return false;
  std::size_t n = decode_event(p_, end_, e, time_us_);
  if (!n) {
    ok_ = false;
    p_ = end_;
    return false;
  }
  p_ += n;
  return true;
}

// The longest unit the parser waits for whole: a 'P' chunk (tag, three varints, a 64-byte name) or
// an 'X' chunk (tag, varint, a 256-byte path); an event or a chunk's head is shorter.
constexpr std::size_t kMaxUnit = 1 + 3 * kMaxVarint + kMaxExecPath;

void StreamParser::feed(const uint8_t* data, std::size_t size) {
  // Units are parsed where they lie; only a unit cut by the end of `data` waits in pending_ (less
  // than kMaxUnit bytes), completed from the next feed a few bytes at a time.
  while (size > 0) {
    if (pending_.empty()) {
      const std::size_t n = parse_units(data, data + size, consumed_);
      consumed_ += n;
      pending_.assign(data + n, data + size);
      return;
    }
    const std::size_t had = pending_.size();
    const std::size_t take = std::min(size, kMaxUnit);
    pending_.insert(pending_.end(), data, data + take);
    const std::size_t n = parse_units(pending_.data(), pending_.data() + pending_.size(), consumed_);
    if (n == 0) {
      data += take;
      size -= take;
      continue;  // still short of one unit (take < kMaxUnit: data ran out)
    }
    // The first unit began in the old bytes and needed new ones: n > had.
    consumed_ += n;
    data += n - had;
    size -= n - had;
    pending_.clear();
  }
}

std::size_t StreamParser::parse_units(const uint8_t* p, const uint8_t* end, uint64_t base) {
  const uint8_t* q = p;
  while (q < end) {
    const std::size_t n = chunk_left_ ? parse_event(q, end, base + (q - p)) : parse_chunk(q, end, base + (q - p));
    if (!n) break;
    q += n;
  }
  return static_cast<std::size_t>(q - p);
}

// One event of the 'C' chunk being read, at p (stream offset `base`); 0 when it is not all here yet.
std::size_t StreamParser::parse_event(const uint8_t* p, const uint8_t* end, uint64_t base) {
  const auto here = static_cast<uint64_t>(end - p);
  const uint8_t* e_end = p + std::min(here, chunk_left_);
  const uint64_t thread = thread_number_[chunk_slot_];
  Event e;
  uint64_t time_us = last_time_us_[chunk_slot_];
  const std::size_t n = decode_event(p, e_end, e, time_us);
  if (!n) {
    if (here >= chunk_left_ || here >= kMaxEventBytes || !is_known(*p))
      throw TraceError(at(base) + ": corrupt event (op byte " + std::to_string(*p) + ") of thread " + std::to_string(thread));
    return 0;
  }
  if (time_us > kMaxTimeUs || time_us < last_time_us_[chunk_slot_])
    throw TraceError(at(base) + ": event time " + std::to_string(time_us) + " us of thread " + std::to_string(thread) +
                     " is implausible (more than a year after the recording started)");
  if (e.op == Op::Phase && (e.epoch == 0 || e.epoch > trace_.phase_names.size()))
    throw TraceError(at(base) + ": phase event of thread " + std::to_string(thread) + " names mark " + std::to_string(e.epoch) +
                     " of " + std::to_string(trace_.phase_names.size()) + " phase marks");
  last_time_us_[chunk_slot_] = time_us;
  auto& t = trace_.threads[chunk_slot_];
  t.bytes.insert(t.bytes.end(), p, p + n);
  ++t.events;
  ++trace_.events;
  chunk_left_ -= n;
  return n;
}

// A chunk being read at p (stream offset `base`): its varints one by one after the tag byte.
struct StreamParser::ChunkHead {
  const uint8_t* p;
  const uint8_t* end;
  uint64_t base;
  const uint8_t* q = p + 1;
  // Reads the next varint into v; false when it is not all here yet.
  bool field(uint64_t& v) {
    std::size_t n = get_varint(q, end, v);
    if (!n) {
      if (end - q >= static_cast<std::ptrdiff_t>(kMaxVarint)) throw TraceError(at(base + (q - p)) + ": malformed number");
      return false;
    }
    q += n;
    return true;
  }
  // The chunk's length with `tail` more bytes after its varints.
  std::size_t used(uint64_t tail = 0) const { return static_cast<std::size_t>(q + tail - p); }
  bool holds(uint64_t bytes) const { return static_cast<uint64_t>(end - q) >= bytes; }
};

// One chunk's head at p (stream offset `base`), or a whole small chunk; 0 when it is not all here.
std::size_t StreamParser::parse_chunk(const uint8_t* p, const uint8_t* end, uint64_t base) {
  if (trace_.ended) throw TraceError(at(base) + ": data after the end of the trace");
  const uint8_t tag = *p;
  if (tag != kTagExec) trace_.unrecorded_exec.clear();  // what follows an exec shows it went on recording
  ChunkHead h{p, end, base};
  switch (tag) {
    case kTagChunk: return thread_chunk(h);
    case kTagPhase: return phase_mark(h);
    case kTagImage: return new_image(h);
    case kTagExec: return exec_chunk(h);
    case kTagEnd: return end_chunk(h);
    default: throw TraceError(at(base) + ": unknown chunk tag " + std::to_string(tag));
  }
}

// 'C': a thread's events follow, parsed one by one (parse_event). A thread the trace has not named
// yet takes the next slot, up to kMaxThreads.
std::size_t StreamParser::thread_chunk(ChunkHead& h) {
  uint64_t thread = 0, length = 0;
  if (!h.field(thread) || !h.field(length)) return 0;
  auto it = slot_of_.find(thread);
  if (it == slot_of_.end()) {
    if (trace_.threads.size() >= kMaxThreads)
      throw TraceError(at(h.base) + ": thread " + std::to_string(thread) + " is the trace's thread " +
                       std::to_string(trace_.threads.size() + 1) + ": a trace holds at most " +
                       std::to_string(kMaxThreads) + " threads");
    it = slot_of_.emplace(thread, trace_.threads.size()).first;
    trace_.threads.emplace_back();
    thread_number_.push_back(thread);
    last_time_us_.push_back(0);
  }
  chunk_slot_ = it->second;
  chunk_left_ = length;
  return h.used();
}

// 'P': the next phase mark, its time and its name.
std::size_t StreamParser::phase_mark(ChunkHead& h) {
  uint64_t epoch = 0, time_us = 0, length = 0;
  if (!h.field(epoch) || !h.field(time_us) || !h.field(length)) return 0;
  const std::string where = at(h.base);
  if (length == 0 || length > kMaxPhaseName)
    throw TraceError(where + ": phase name of " + std::to_string(length) + " bytes (1 to " + std::to_string(kMaxPhaseName) + ")");
  if (!h.holds(length)) return 0;
  const std::string mark = "phase mark " + std::to_string(epoch);
  if (epoch != trace_.phase_names.size() + 1)
    throw TraceError(where + ": " + mark + " after " + std::to_string(trace_.phase_names.size()) + " marks");
  if (epoch > kMaxPhaseMarks)
    throw TraceError(where + ": " + mark + ": a trace holds at most " + std::to_string(kMaxPhaseMarks) + " phase marks");
  if (time_us > kMaxTimeUs)
    throw TraceError(where + ": " + mark + " time " + std::to_string(time_us) +
                     " us is implausible (more than a year after the recording started)");
  if (!valid_phase_name(reinterpret_cast<const char*>(h.q), length))
    throw TraceError(where + ": " + mark +
                     ": the name holds a control character, a space, '\"' or '\\' (not a mark the recorder takes)");
  trace_.phase_names.emplace_back(reinterpret_cast<const char*>(h.q), length);
  trace_.phase_times_us.push_back(time_us);
  return h.used(length);
}

// 'I': a new image of the traced process (exec): what the previous one recorded is void.
std::size_t StreamParser::new_image(ChunkHead& h) {
  uint64_t pid = 0;
  if (!h.field(pid)) return 0;
  uint64_t images = trace_.images + 1;
  trace_ = Trace{};
  trace_.images = images;
  thread_number_.clear();
  last_time_us_.clear();
  slot_of_.clear();
  return h.used();
}

// 'X': the traced image is about to exec this path.
std::size_t StreamParser::exec_chunk(ChunkHead& h) {
  uint64_t length = 0;
  if (!h.field(length)) return 0;
  if (length > kMaxExecPath)
    throw TraceError(at(h.base) + ": exec path of " + std::to_string(length) + " bytes (at most " + std::to_string(kMaxExecPath) + ")");
  if (!h.holds(length)) return 0;
  trace_.unrecorded_exec.assign(reinterpret_cast<const char*>(h.q), length);
  if (trace_.unrecorded_exec.empty()) trace_.unrecorded_exec = "?";
  return h.used(length);
}

// 'E': the process ended normally, with what the recorder counted.
std::size_t StreamParser::end_chunk(ChunkHead& h) {
  uint64_t unknown = 0, lost = 0;
  if (!h.field(unknown) || !h.field(lost)) return 0;
  trace_.unknown_frees = unknown;
  trace_.lost_events = lost;
  trace_.ended = true;
  return h.used();
}

Trace StreamParser::finish(bool cut_off) {
  if (cut_off) {
    pending_.clear();
    chunk_left_ = 0;
  }
  if (!pending_.empty() || chunk_left_)
    throw TraceError(at(consumed_) + ": the stream ends inside a chunk (" + std::to_string(pending_.size() + chunk_left_) +
                     " bytes missing or waiting)");
  // Threads in the order of their numbers, those without an event left out: numbers are only
  // names, so thread 999999 alone is thread 0.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < trace_.threads.size(); ++i)
    if (trace_.threads[i].events) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return thread_number_[a] < thread_number_[b]; });
  std::vector<ThreadEvents> threads;
  threads.reserve(order.size());
  for (std::size_t i : order) threads.push_back(std::move(trace_.threads[i]));
  trace_.threads = std::move(threads);
  thread_number_.clear();
  last_time_us_.clear();
  slot_of_.clear();
  renumber_ids(trace_, cut_off);
  return std::move(trace_);
}

void renumber_ids(Trace& trace, bool cut_off) {
  // Every id allocated, sorted: an id's new number is its place here, from 1.
  std::vector<uint64_t, MappedAllocator<uint64_t>> ids;
  for (const auto& t : trace.threads)
    for (EventCursor c = t.cursor();;) {
      Event e;
      if (!c.next(e)) break;
      if ((is_alloc(e.op) || e.op == Op::Realloc) && e.id) ids.push_back(e.id);
    }
  std::sort(ids.begin(), ids.end());
  for (std::size_t i = 1; i < ids.size(); ++i)
    if (ids[i] == ids[i - 1]) throw TraceError("object " + std::to_string(ids[i]) + " is allocated twice");
  auto number = [&](uint64_t id) -> uint64_t {
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    return it != ids.end() && *it == id ? static_cast<uint64_t>(it - ids.begin()) + 1 : 0;
  };
  std::vector<uint8_t, MappedAllocator<uint8_t>> freed(ids.size() + 1, 0);
  auto free_of = [&](uint64_t id, std::size_t thread, const char* how) -> uint64_t {
    const uint64_t n = number(id);
    if (!n && cut_off) {
      ++trace.unknown_frees;  // allocated in a buffer the signal never let out
      return 0;
    }
    if (!n) throw TraceError("object " + std::to_string(id) + " is " + how + " by thread " + std::to_string(thread) + " but never allocated");
    if (freed[n]) throw TraceError("object " + std::to_string(id) + " is freed twice (thread " + std::to_string(thread) + ")");
    freed[n] = 1;
    return n;
  };
  for (std::size_t t = 0; t < trace.threads.size(); ++t) {
    Bytes out;
    out.reserve(trace.threads[t].bytes.size());
    uint64_t previous_us = 0;
    for (EventCursor c = trace.threads[t].cursor();;) {
      Event e;
      if (!c.next(e)) break;
      if (is_alloc(e.op)) {
        e.id = e.id ? number(e.id) : 0;
      } else if (e.op == Op::Realloc) {
        if (e.old_id) {
          if (realloc_frees_old(e)) {
            e.old_id = free_of(e.old_id, t, "resized");
          } else if (const uint64_t n = number(e.old_id)) {
            e.old_id = n;  // a failed realloc: its block stays live
          } else if (cut_off) {
            e.old_id = 0;
          } else {
            throw TraceError("object " + std::to_string(e.old_id) + " is resized by thread " + std::to_string(t) + " but never allocated");
          }
        }
        if (!e.old_id) e.old_size = 0;  // a realloc of a block the trace does not hold: of NULL
        e.id = e.id ? number(e.id) : 0;
      } else if (is_free(e.op) && e.id) {
        e.id = free_of(e.id, t, "freed");
        if (!e.id) {  // cut off: the free of a block whose allocation never came out
          --trace.threads[t].events;
          --trace.events;
          continue;
        }
      }
      uint8_t b[kMaxEventBytes];
      const std::size_t n = put_event(b, e, e.time_us - previous_us);
      previous_us = e.time_us;
      out.insert(out.end(), b, b + n);
    }
    trace.threads[t].bytes.swap(out);
  }
  trace.max_id = ids.size();
}

std::vector<uint8_t> encode_stream(const Trace& trace) {
  std::vector<uint8_t> out;
  for (std::size_t k = 0; k < trace.phase_names.size(); ++k) {
    out.push_back(kTagPhase);
    append_varint(out, k + 1);
    append_varint(out, k < trace.phase_times_us.size() ? trace.phase_times_us[k] : 0);
    append_varint(out, trace.phase_names[k].size());
    out.insert(out.end(), trace.phase_names[k].begin(), trace.phase_names[k].end());
  }
  for (std::size_t t = 0; t < trace.threads.size(); ++t) {
    out.push_back(kTagChunk);
    append_varint(out, t);
    append_varint(out, trace.threads[t].bytes.size());
    out.insert(out.end(), trace.threads[t].bytes.begin(), trace.threads[t].bytes.end());
  }
  if (trace.ended) {
    out.push_back(kTagEnd);
    append_varint(out, trace.unknown_frees);
    append_varint(out, trace.lost_events);
  }
  return out;
}

namespace {
// zstd's allocation hooks over map_bytes; the mapping's length is kept in front of the block.
void* zstd_alloc(void*, size_t n) {
  try {
    auto* p = static_cast<std::size_t*>(map_bytes(n + 16));
    p[0] = n + 16;
    return p + 2;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void zstd_free(void*, void* block) {
  if (!block) return;
  auto* p = static_cast<std::size_t*>(block) - 2;
  unmap_bytes(p, p[0]);
}

// A file mapped read-only, so reading a trace takes nothing from the allocator either.
struct MappedFile {
  const uint8_t* bytes = nullptr;
  std::size_t length = 0;
  explicit MappedFile(const std::string& path) {
    // A fifo or a device would block the open or never end: the one check of a user's input file.
    if (std::string problem = units::input_file_problem(path); !problem.empty()) throw std::runtime_error(problem);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw std::runtime_error(path + ": not a regular file");
    }
    length = static_cast<std::size_t>(st.st_size);
    if (length) {
      void* p = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        throw std::runtime_error(path + ": cannot map: " + std::strerror(err));
      }
      bytes = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (bytes) ::munmap(const_cast<uint8_t*>(bytes), length);
  }
  std::size_t size() const { return length; }
  const uint8_t* data() const { return bytes; }
};
}  // namespace

Trace read_trace(const std::string& path) {
  const MappedFile file(path);
  Trace t;
  if (file.size() < kFileHeaderBytes || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    throw TraceError(path + ": not an allocmark trace (file offset 0: no AMTRACE header)");
  uint32_t version = get_u32(file.data() + 8);
  if (version != kFormatVersion)
    throw TraceError(path + ": trace format version " + std::to_string(version) + " (file offset 8); this allocmark reads version " +
                     std::to_string(kFormatVersion));
  uint64_t body = get_u64(file.data() + 16), header = get_u64(file.data() + 24);
  if (body > file.size() || header > file.size() || kFileHeaderBytes + body + header != file.size())
    throw TraceError(path + ": file offset 16: body of " + std::to_string(body) + " and header of " + std::to_string(header) +
                     " bytes do not fit a file of " + std::to_string(file.size()) + " bytes (cut off?)");
  const uint8_t* z = file.data() + kFileHeaderBytes;
  unsigned long long raw = ZSTD_getFrameContentSize(z, body);
  if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN)
    throw TraceError(path + ": file offset 32: the body is not a zstd frame");
  // What the frame claims is judged before anything is decompressed: a 32 KB zstd bomb declared
  // (and held) 1.8 GB.
  const uint64_t most = kMaxExpansion * body + (64 << 10);
  if (raw > most)
    throw TraceError(path + ": file offset 32: the zstd frame's content size " + std::to_string(raw) + " is more than " +
                     std::to_string(kMaxExpansion) + " times the body's " + std::to_string(body) +
                     " bytes: implausible for a trace (a damaged or hostile file)");
  // zstd's own context would come from malloc: in a worker, from the allocator under test.
  ZSTD_DCtx* dctx = ZSTD_createDCtx_advanced(ZSTD_customMem{zstd_alloc, zstd_free, nullptr});
  if (!dctx) throw std::bad_alloc();
  struct Free {
    ZSTD_DCtx* d;
    ~Free() { ZSTD_freeDCtx(d); }
  } free_dctx{dctx};
  // The window (zstd's own buffer) is capped: write_trace's frames use 4 MiB at most.
  ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 24);
  // Decoded while it decompresses, a window at a time: the stream is never held whole.
  Bytes window(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{z, body, 0};
  uint64_t produced = 0;
  const char* damage = nullptr;
  StreamParser parser;
  try {
    for (;;) {
      ZSTD_outBuffer out{window.data(), window.size(), 0};
      const std::size_t consumed = in.pos;
      const std::size_t left = ZSTD_decompressStream(dctx, &out, &in);
      if (ZSTD_isError(left)) {
        damage = ZSTD_getErrorName(left);
        break;
      }
      produced += out.pos;
      if (produced > raw) {
        damage = "longer than its declared size";
        break;
      }
      parser.feed(window.data(), out.pos);
      if (left == 0) break;
      if (out.pos == 0 && in.pos == consumed) {
        damage = "short";  // no progress is possible
        break;
      }
    }
    if (!damage && produced != raw) damage = "short";
    if (damage) throw TraceError("file offset 32: the body does not decompress (" + std::string(damage) + ")");
    t = parser.finish();
  } catch (const TraceError& e) {
    throw TraceError(path + ": " + e.what());
  }
  const char* h = reinterpret_cast<const char*>(file.data() + kFileHeaderBytes + body);
  try {
    t.header = nlohmann::json::parse(h, h + header);
  } catch (const nlohmann::json::exception& e) {
    throw TraceError(path + ": file offset " + std::to_string(kFileHeaderBytes + body) + ": the header is not JSON (" + e.what() + ")");
  }
  if (!t.header.is_object()) throw TraceError(path + ": file offset " + std::to_string(kFileHeaderBytes + body) + ": the header is not a JSON object");
  return t;
}

namespace {
// `stream` as a zstd frame of raw (stored) blocks: for a stream so repetitive that compressed it
// would expand more than readers allow (a program failing the same allocation millions of times).
std::size_t stored_frame(uint8_t* out, const std::vector<uint8_t>& stream) {
  constexpr std::size_t kBlock = 128 << 10;
  std::size_t n = 0;
  for (uint8_t b : {0x28, 0xB5, 0x2F, 0xFD, 0xC0 /* 8-byte content size, windowed */, 0x38 /* 128 KiB window */})
    out[n++] = b;
  put_u64(out + n, stream.size());
  n += 8;
  std::size_t at = 0;
  do {
    const std::size_t len = std::min(kBlock, stream.size() - at);
    const uint32_t head = (at + len == stream.size() ? 1u : 0u) | static_cast<uint32_t>(len) << 3;  // raw block
    for (int i = 0; i < 3; ++i) out[n++] = static_cast<uint8_t>(head >> (8 * i));
    if (len) std::memcpy(out + n, stream.data() + at, len);
    n += len;
    at += len;
  } while (at < stream.size());
  return n;
}
}  // namespace

std::string file_bytes(const Trace& trace) {
  std::vector<uint8_t> stream = encode_stream(trace);
  const std::size_t stored_bound = 14 + stream.size() + 3 * (stream.size() / (128 << 10) + 1);
  std::string out(kFileHeaderBytes + std::max(ZSTD_compressBound(stream.size()), stored_bound), '\0');
  auto* o = reinterpret_cast<uint8_t*>(out.data());
  std::size_t z = ZSTD_compress(o + kFileHeaderBytes, out.size() - kFileHeaderBytes, stream.data(), stream.size(), 9);
  if (ZSTD_isError(z)) throw std::runtime_error(std::string("compressing the trace failed: ") + ZSTD_getErrorName(z));
  // What read_trace takes: a body that expands at most kMaxExpansion times (64 KiB more).
  if (stream.size() > kMaxExpansion * z + (64 << 10)) z = stored_frame(o + kFileHeaderBytes, stream);
  std::string header = trace.header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::memcpy(o, kMagic, sizeof kMagic);
  put_u32(o + 8, kFormatVersion);
  put_u32(o + 12, 0);
  put_u64(o + 16, z);
  put_u64(o + 24, header.size());
  out.resize(kFileHeaderBytes + z);
  return out + header;
}

void write_trace(const std::string& path, const Trace& trace) {
  const std::string out = file_bytes(trace);
  std::string tmp = path + ".part";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(tmp + ": cannot create: " + std::strerror(errno));
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.flush();
    if (!f) {
      const int err = errno;
      ::unlink(tmp.c_str());
      throw std::runtime_error(tmp + ": write failed: " + std::strerror(err));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot rename the finished trace into place: " + std::strerror(err));
  }
}

}  // namespace allocmark::trace
