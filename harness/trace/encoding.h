// The bytes of an allocation trace's record stream, declared once: the recording preload writes
// them (without allocating: everything here works on caller-owned buffers), `trace record`
// checks and compresses them, `trace show` and the replay workload read them (format.h).
//
// The stream is a sequence of chunks, each introduced by a tag byte:
//   'C' varint thread, varint length, then `length` bytes of events of that thread, in its order
//   'P' varint epoch, varint time, varint length, then the phase's name (the epoch-th mark, from 1;
//       time in microseconds since the recording started)
//   'I' varint pid: a new image of the traced process began (exec): everything before it is void
//   'E' varint unknown_frees, varint lost_events: the process ended normally; nothing follows
//   'X' varint length, then the path (at most kMaxExecPath bytes, cut there): the traced image is
//       about to exec it; an 'I' follows when the recorder loaded into the new image (only on the
//       recording pipe: trace files never hold it)
// Events (one op byte, then varints; dt is microseconds since the thread's previous event, for its
// first event since the recording started, so that every thread's events have one time base):
//   alloc ops (Op::Malloc .. Op::NewArrayAligned): dt, id, size, [align for aligned ops]
//   Op::Realloc: dt, old id, new id, size, old size (new id 0 with size > 0: it failed and the old
//       block is still live; old id 0: realloc of NULL, or of a block from before the recording)
//   free ops (Op::Free .. Op::DeleteArrayAligned): dt, id, size (the block's requested size)
//   Op::Phase: dt, epoch (the thread's first event after the epoch-th phase mark)
// Object ids are compact (not addresses): 1, 2, ... given out in blocks per thread, never reused;
// 0 is NULL (a failed allocation; realloc of NULL or to nothing). A free of a block the recorder
// never saw allocated (one from before it started) is not recorded, only counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace allocmark::trace {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr char kMagic[8] = {'A', 'M', 'T', 'R', 'A', 'C', 'E', '\0'};

enum class Op : uint8_t {
  Malloc = 1,
  Calloc,
  PosixMemalign,
  AlignedAlloc,
  Memalign,
  Valloc,
  Pvalloc,
  New,
  NewArray,
  NewAligned,
  NewArrayAligned,
  Realloc = 20,
  Free = 30,
  Delete,
  DeleteArray,
  DeleteSized,
  DeleteArraySized,
  DeleteAligned,
  DeleteArrayAligned,
  Phase = 50,
};

inline constexpr uint8_t kTagChunk = 'C', kTagPhase = 'P', kTagImage = 'I', kTagEnd = 'E', kTagExec = 'X';

// Plausibility limits, shared by the recorder and every reader (docs/traces.md):
// a trace holds at most this many phase marks (the recorder answers `error` to more): each phase
// is a record's row in every replay cell, and 20,000 of them made one results line 31 MB;
inline constexpr uint64_t kMaxPhaseMarks = 128;
inline constexpr uint64_t kMaxPhaseName = 64;
// a phase name is what the recorder accepts of a mark: 1 to kMaxPhaseName bytes, none of them a
// control character, a space, '"' or '\\' (a trace's names reach terminals and records);
constexpr bool valid_phase_name(const char* s, std::size_t n) {
  if (n == 0 || n > kMaxPhaseName) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c <= 0x20 || c == 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}
// a trace holds at most this many threads (the threads a program started over its life, numbered
// in the order they first called the allocator; the recorder records no more: their calls are
// counted as lost). A replay runs them all at once, and the threads axis stops at 1024;
inline constexpr uint64_t kMaxThreads = 4096;
// an event's time is less than a year (in microseconds) after the recording started;
inline constexpr uint64_t kMaxTimeUs = 366ull * 24 * 3600 * 1000000;
// an exec chunk names at most this many bytes of the path.
inline constexpr uint64_t kMaxExecPath = 256;

constexpr bool is_alloc(Op op) { return op >= Op::Malloc && op <= Op::NewArrayAligned; }
constexpr bool is_free(Op op) { return op >= Op::Free && op <= Op::DeleteArrayAligned; }
constexpr bool has_align(Op op) {
  return op == Op::PosixMemalign || op == Op::AlignedAlloc || op == Op::Memalign || op == Op::NewAligned ||
         op == Op::NewArrayAligned;
}
constexpr bool is_known(uint8_t b) {
  Op op = static_cast<Op>(b);
  return is_alloc(op) || is_free(op) || op == Op::Realloc || op == Op::Phase;
}

// The C or C++ function an op records, as `trace show` names it.
constexpr std::string_view op_name(Op op) {
  switch (op) {
    case Op::Malloc: return "malloc";
    case Op::Calloc: return "calloc";
    case Op::PosixMemalign: return "posix_memalign";
    case Op::AlignedAlloc: return "aligned_alloc";
    case Op::Memalign: return "memalign";
    case Op::Valloc: return "valloc";
    case Op::Pvalloc: return "pvalloc";
    case Op::New: return "operator new";
    case Op::NewArray: return "operator new[]";
    case Op::NewAligned: return "operator new (aligned)";
    case Op::NewArrayAligned: return "operator new[] (aligned)";
    case Op::Realloc: return "realloc";
    case Op::Free: return "free";
    case Op::Delete: return "operator delete";
    case Op::DeleteArray: return "operator delete[]";
    case Op::DeleteSized: return "operator delete (sized)";
    case Op::DeleteArraySized: return "operator delete[] (sized)";
    case Op::DeleteAligned: return "operator delete (aligned)";
    case Op::DeleteArrayAligned: return "operator delete[] (aligned)";
    case Op::Phase: return "phase";
  }
  return "?";
}

// LEB128: 7 bits a byte, low first; at most 10 bytes for 64 bits.
inline constexpr std::size_t kMaxVarint = 10;
inline std::size_t put_varint(uint8_t* out, uint64_t v) {
  std::size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<uint8_t>(v);
  return n;
}
// Reads one varint from [p, end); returns the bytes it took, 0 when it is cut off or longer than
// 10 bytes (a corrupt stream).
inline std::size_t get_varint(const uint8_t* p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (std::size_t n = 0; n < kMaxVarint && p + n < end; ++n) {
    v |= static_cast<uint64_t>(p[n] & 0x7f) << (7 * n);
    if (!(p[n] & 0x80)) return n + 1;
  }
  return 0;
}

// The largest event: op byte and five varints.
inline constexpr std::size_t kMaxEventBytes = 1 + 5 * kMaxVarint;

}  // namespace allocmark::trace
