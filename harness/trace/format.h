// Allocation trace files: checked parsing of the record stream (encoding.h), and the file around
// it. A trace file is
//   32 bytes: kMagic, u32 format version, u32 0, u64 body length, u64 header length (little endian)
//   the body: one zstd frame holding the record stream (one 'C' chunk per thread, the 'P' chunks,
//             an 'E' chunk)
//   the header: JSON (program, arguments, machine, threads, counts; docs/traces.md)
// Everything read is checked: a file that is not a trace, a newer version, a cut-off or corrupt
// body, an event that does not parse, an implausible value (encoding.h's limits), an id allocated
// twice or freed without being allocated are refused with TraceError naming the byte offset (in
// the file, or in the decompressed stream) and the field.
//
// What reading costs is bounded by the file's size, whatever the file says: the body is decoded
// while it decompresses (never held whole), it may expand at most kMaxExpansion times, zstd's
// window is capped, and every table is sized by what the trace holds: threads, object ids and
// phases are renumbered densely (thread 999999 alone is thread 0; ids 1..objects), so a trace of
// N bytes costs O(N) memory and time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/trace/encoding.h"

namespace allocmark::trace {

// How many times its compressed size a body may decompress to (the recorder's traces: about 6;
// a 32 KB zstd bomb claimed 1.8 GB). 64 KiB more are always allowed, for tiny traces.
inline constexpr uint64_t kMaxExpansion = 64;

class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One decoded event; `time_us` is absolute (microseconds since the recording started).
struct Event {
  Op op{};
  uint64_t time_us = 0;
  uint64_t id = 0;        // alloc: the new block; free: the freed block; realloc: the new block
  uint64_t old_id = 0;    // realloc: the block it resized (0: realloc of NULL)
  uint64_t size = 0;      // requested bytes (free: the freed block's)
  uint64_t old_size = 0;  // realloc: the old block's requested bytes
  uint64_t align = 0;     // aligned ops
  uint64_t epoch = 0;     // Op::Phase
};

// Whether a realloc event ended its old block: a failed realloc(p, n > 0) (new id 0) leaves p
// live, as the C library does; realloc(p, 0) returning NULL freed it.
inline bool realloc_frees_old(const Event& e) { return e.op == Op::Realloc && e.old_id && (e.id || e.size == 0); }

// Walks one thread's events. The bytes were checked when the trace was read, so next() only
// decodes; on bytes that were not checked it stops at the first malformed event (ok() false).
class EventCursor {
 public:
  EventCursor(const uint8_t* begin, const uint8_t* end) : p_(begin), end_(end) {}
  bool next(Event& e);
  bool ok() const { return ok_; }
  const uint8_t* position() const { return p_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  uint64_t time_us_ = 0;
  bool ok_ = true;
};

// Memory straight from the kernel (mmap), for a trace's bytes and the buffers that read it: a
// worker loads and holds the trace it replays without the allocator under test, whose free lists
// would otherwise keep the loading's garbage in the cell's idle baseline and peaks.
void* map_bytes(std::size_t bytes);  // throws std::bad_alloc
void unmap_bytes(void* p, std::size_t bytes);
template <class T>
struct MappedAllocator {
  using value_type = T;
  MappedAllocator() = default;
  template <class U>
  MappedAllocator(const MappedAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(map_bytes(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) { unmap_bytes(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const MappedAllocator<U>&) const { return true; }
};
using Bytes = std::vector<uint8_t, MappedAllocator<uint8_t>>;

struct ThreadEvents {
  ThreadEvents() = default;
  ThreadEvents(const std::vector<uint8_t>& b, uint64_t n) : bytes(b.begin(), b.end()), events(n) {}
  Bytes bytes;  // the thread's events in its order (encoding.h)
  uint64_t events = 0;
  EventCursor cursor() const { return EventCursor(bytes.data(), bytes.data() + bytes.size()); }
};

struct Trace {
  nlohmann::json header = nlohmann::json::object();
  std::vector<std::string> phase_names;  // [k - 1]: the k-th phase mark's name
  std::vector<uint64_t> phase_times_us;  // [k - 1]: when it was made
  std::vector<ThreadEvents> threads;     // in the order of the recorder's thread numbers, densely
  uint64_t max_id = 0;                   // once read: ids are 1..max_id, each allocated once
  uint64_t events = 0;
  uint64_t unknown_frees = 0, lost_events = 0;
  bool ended = false;  // the stream's 'E' chunk was seen: the process ended by exit or _exit
  uint64_t images = 0;  // 'I' chunks seen while recording (exec); the trace is the last image's
  // The recording pipe only: the program exec'd this path last and the recorder never began in it
  // (statically linked, set-uid, LD_PRELOAD cleared); empty when every image was recorded.
  std::string unrecorded_exec;
};

// Reads a record stream as it arrives (the recording pipe) or as a body decompresses, event by
// event (an incomplete chunk is never held whole: at most one event's bytes wait for the next
// feed); throws TraceError naming the stream offset and the field of what does not parse.
class StreamParser {
 public:
  void feed(const uint8_t* data, std::size_t size);
  // The stream ended here: a chunk cut off in the middle is an error, unless `cut_off` (the
  // recording of a program a signal ended: its writer may have been stopped inside a chunk), when
  // the chunk's complete events are kept; then the trace read so far, threads in the order of
  // their numbers and ids renumbered (renumber_ids).
  Trace finish(bool cut_off = false);
  uint64_t offset() const { return consumed_ + pending_.size(); }

 private:
  std::size_t parse_units(const uint8_t* p, const uint8_t* end, uint64_t base);
  std::size_t parse_chunk(const uint8_t* p, const uint8_t* end, uint64_t base);
  std::size_t parse_event(const uint8_t* p, const uint8_t* end, uint64_t base);
  // One chunk of each tag, its tag byte already read (parse_chunk's cases); 0 when not all here.
  struct ChunkHead;
  std::size_t thread_chunk(ChunkHead& h);
  std::size_t phase_mark(ChunkHead& h);
  std::size_t new_image(ChunkHead& h);
  std::size_t exec_chunk(ChunkHead& h);
  std::size_t end_chunk(ChunkHead& h);
  Trace trace_;
  std::vector<uint64_t> thread_number_;  // per slot of trace_.threads: the number the stream gave it
  std::vector<uint64_t> last_time_us_;   // per slot: the time of its last event parsed
  std::unordered_map<uint64_t, std::size_t> slot_of_;  // thread number -> slot
  std::size_t chunk_slot_ = 0;  // the 'C' chunk being read: its thread's slot, and its bytes not read yet
  uint64_t chunk_left_ = 0;
  Bytes pending_;           // an incomplete unit (a chunk's head, an event) waiting for more bytes
  uint64_t consumed_ = 0;   // stream bytes parsed before pending_
};

// Every freed or resized id was allocated, and none twice (TraceError otherwise: the replay relies
// on it, a free waits for its allocation); then the ids are renumbered 1..objects in their order,
// so tables indexed by id are sized by what the trace holds (an id of 2^31 is not 2^31 entries).
// `cut_off` (a recording a signal ended): a block freed or resized whose allocation never came out
// of its thread's buffer is counted as an unknown free (the free left out, the realloc one of NULL).
void renumber_ids(Trace& trace, bool cut_off = false);

// The record stream of `trace` in its canonical form (what write_trace compresses).
std::vector<uint8_t> encode_stream(const Trace& trace);

Trace read_trace(const std::string& path);  // throws TraceError (format) or std::runtime_error (I/O)
// The file's bytes for `trace` (its header as given); `trace record` writes them with
// results::write_file_atomically.
std::string file_bytes(const Trace& trace);
// Writes file_bytes(trace) to `path` atomically (a temporary file, then rename; no .part is left
// when the write fails). For tests and tools without a results folder.
void write_trace(const std::string& path, const Trace& trace);

}  // namespace allocmark::trace
