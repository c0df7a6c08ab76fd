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
  if (!q) return 0;
  time_us += dt;
  e.time_us = time_us;
  return static_cast<std::size_t>(q - p);
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

void StreamParser::feed(const uint8_t* data, std::size_t size) {
  // Whole chunks are parsed where they are; only a chunk cut by the end of `data` is kept.
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  if (!pending_.empty()) {
    pending_.insert(pending_.end(), data, end);
    p = pending_.data();
    end = p + pending_.size();
  }
  std::size_t done = 0;
  while (p + done < end) {
    std::size_t n = parse_chunk(p + done, end, consumed_ + done);
    if (!n) break;
    done += n;
  }
  consumed_ += done;
  Bytes rest(p + done, end);
  pending_.swap(rest);
}

// Parses one whole chunk at p (stream offset `base`); 0 when the chunk is not complete yet.
std::size_t StreamParser::parse_chunk(const uint8_t* p, const uint8_t* end, uint64_t base) {
  if (trace_.ended) throw TraceError(at(base) + ": data after the end of the trace");
  const uint8_t* q = p + 1;
  auto field = [&](uint64_t& v) -> bool {
    std::size_t n = get_varint(q, end, v);
    if (!n) {
      if (end - q >= static_cast<std::ptrdiff_t>(kMaxVarint)) throw TraceError(at(base + (q - p)) + ": malformed number");
      return false;
    }
    q += n;
    return true;
  };
  switch (*p) {
    case kTagChunk: {
      uint64_t thread = 0, length = 0;
      if (!field(thread) || !field(length)) return 0;
      if (thread > 1'000'000) throw TraceError(at(base) + ": thread number " + std::to_string(thread) + " is implausible");
      if (static_cast<uint64_t>(end - q) < length) return 0;
      if (trace_.threads.size() <= thread) {
        trace_.threads.resize(thread + 1);
        last_time_us_.resize(thread + 1, 0);
      }
      auto& t = trace_.threads[thread];
      // Times are deltas per thread across its chunks: decoding goes on from the thread's last time.
      uint64_t& time_us = last_time_us_[thread];
      const uint8_t* e_end = q + length;
      for (const uint8_t* r = q; r < e_end;) {
        Event e;
        std::size_t n = decode_event(r, e_end, e, time_us);
        if (!n) throw TraceError(at(base + (r - p)) + ": corrupt event (op byte " + std::to_string(*r) + ") of thread " +
                                 std::to_string(thread));
        if (e.op == Op::Phase && (e.epoch == 0 || e.epoch > 1'000'000))
          throw TraceError(at(base + (r - p)) + ": phase event with epoch " + std::to_string(e.epoch));
        if (e.id > trace_.max_id) trace_.max_id = e.id;
        r += n;
        ++t.events;
        ++trace_.events;
      }
      t.bytes.insert(t.bytes.end(), q, e_end);
      return static_cast<std::size_t>(e_end - p);
    }
    case kTagPhase: {
      uint64_t epoch = 0, time_us = 0, length = 0;
      if (!field(epoch) || !field(time_us) || !field(length)) return 0;
      if (length > 64) throw TraceError(at(base) + ": phase name of " + std::to_string(length) + " bytes (at most 64)");
      if (static_cast<uint64_t>(end - q) < length) return 0;
      if (epoch != trace_.phase_names.size() + 1)
        throw TraceError(at(base) + ": phase mark " + std::to_string(epoch) + " after " +
                         std::to_string(trace_.phase_names.size()) + " marks");
      trace_.phase_names.emplace_back(reinterpret_cast<const char*>(q), length);
      trace_.phase_times_us.push_back(time_us);
      return static_cast<std::size_t>(q + length - p);
    }
    case kTagImage: {
      uint64_t pid = 0;
      if (!field(pid)) return 0;
      // A new image of the traced process: what the previous one recorded is void.
      uint64_t images = trace_.images + 1;
      trace_ = Trace{};
      trace_.images = images;
      last_time_us_.clear();
      return static_cast<std::size_t>(q - p);
    }
    case kTagEnd: {
      uint64_t unknown = 0, lost = 0;
      if (!field(unknown) || !field(lost)) return 0;
      trace_.unknown_frees = unknown;
      trace_.lost_events = lost;
      trace_.ended = true;
      return static_cast<std::size_t>(q - p);
    }
    default:
      throw TraceError(at(base) + ": unknown chunk tag " + std::to_string(*p));
  }
}

Trace StreamParser::finish() {
  if (!pending_.empty())
    throw TraceError(at(consumed_) + ": the stream ends inside a chunk (" + std::to_string(pending_.size()) + " bytes)");
  for (const auto& t : trace_.threads)
    for (EventCursor c = t.cursor();;) {
      Event e;
      if (!c.next(e)) break;
      if (e.op == Op::Phase && e.epoch > trace_.phase_names.size())
        throw TraceError("a thread marks phase " + std::to_string(e.epoch) + " of " +
                         std::to_string(trace_.phase_names.size()) + " phase marks");
    }
  check_ids(trace_);
  return std::move(trace_);
}

void check_ids(const Trace& trace) {
  // 1: allocated, 2: freed (or resized away).
  std::vector<uint8_t, MappedAllocator<uint8_t>> state(trace.max_id + 1, 0);
  auto allocated = [&](uint64_t id, std::size_t thread) {
    if (!id) return;
    if (state[id] & 1) throw TraceError("object " + std::to_string(id) + " is allocated twice (thread " + std::to_string(thread) + ")");
    state[id] |= 1;
  };
  for (std::size_t t = 0; t < trace.threads.size(); ++t)
    for (EventCursor c = trace.threads[t].cursor();;) {
      Event e;
      if (!c.next(e)) break;
      if (is_alloc(e.op) || e.op == Op::Realloc) allocated(e.id, t);
    }
  auto freed = [&](uint64_t id, std::size_t thread) {
    if (!id) return;
    if (!(state[id] & 1))
      throw TraceError("object " + std::to_string(id) + " is freed by thread " + std::to_string(thread) + " but never allocated");
    if (state[id] & 2) throw TraceError("object " + std::to_string(id) + " is freed twice (thread " + std::to_string(thread) + ")");
    state[id] |= 2;
  };
  for (std::size_t t = 0; t < trace.threads.size(); ++t)
    for (EventCursor c = trace.threads[t].cursor();;) {
      Event e;
      if (!c.next(e)) break;
      if (is_free(e.op)) freed(e.id, t);
      if (realloc_frees_old(e)) freed(e.old_id, t);
    }
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
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN || raw > (1ull << 40))
    throw TraceError(path + ": file offset 32: the body is not a zstd frame");
  // zstd's own context would come from malloc: in a worker, from the allocator under test.
  ZSTD_DCtx* dctx = ZSTD_createDCtx_advanced(ZSTD_customMem{zstd_alloc, zstd_free, nullptr});
  if (!dctx) throw std::bad_alloc();
  // The frame's declared size is not trusted for the buffer: one damaged byte there made a 22 KB
  // trace claim gigabytes, which were zeroed (12-15 s) before zstd found the damage. The buffer
  // grows with what zstd really produces, up to the declared size, which must then be met.
  Bytes stream(std::min<unsigned long long>(raw, 4 * body + (64 << 10)));
  ZSTD_inBuffer in{z, body, 0};
  std::size_t produced = 0;
  const char* damage = nullptr;
  for (;;) {
    if (produced == stream.size() && stream.size() < raw) stream.resize(std::min<unsigned long long>(raw, 2 * stream.size()));
    ZSTD_outBuffer out{stream.data(), stream.size(), produced};
    const std::size_t consumed = in.pos;
    const std::size_t left = ZSTD_decompressStream(dctx, &out, &in);
    if (ZSTD_isError(left)) damage = ZSTD_getErrorName(left);
    else if (left != 0 && out.pos == produced && in.pos == consumed)
      damage = out.pos == raw ? "longer than its declared size" : "short";  // no progress is possible
    produced = out.pos;
    if (left == 0 || damage) break;
  }
  ZSTD_freeDCtx(dctx);
  if (!damage && produced != raw) damage = "short";
  if (damage) throw TraceError(path + ": file offset 32: the body does not decompress (" + std::string(damage) + ")");
  Trace t;
  try {
    StreamParser parser;
    parser.feed(stream.data(), stream.size());
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

void write_trace(const std::string& path, const Trace& trace) {
  std::vector<uint8_t> stream = encode_stream(trace);
  std::vector<uint8_t> out(kFileHeaderBytes + ZSTD_compressBound(stream.size()));
  std::size_t z = ZSTD_compress(out.data() + kFileHeaderBytes, out.size() - kFileHeaderBytes, stream.data(), stream.size(), 9);
  if (ZSTD_isError(z)) throw std::runtime_error(path + ": compressing the trace failed: " + ZSTD_getErrorName(z));
  out.resize(kFileHeaderBytes + z);
  std::string header = trace.header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put_u32(out.data() + 8, kFormatVersion);
  put_u32(out.data() + 12, 0);
  put_u64(out.data() + 16, z);
  put_u64(out.data() + 24, header.size());
  out.insert(out.end(), header.begin(), header.end());
  std::string tmp = path + ".part";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(tmp + ": cannot create: " + std::strerror(errno));
    f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
    f.flush();
    if (!f) throw std::runtime_error(tmp + ": write failed: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot rename the finished trace into place: " + std::strerror(err));
  }
}

}  // namespace allocmark::trace
