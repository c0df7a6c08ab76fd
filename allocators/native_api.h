// Worker-side access to an allocator's own API.
//
// Every entry point is found with dlsym(RTLD_DEFAULT, ...) at call time, never linked: the worker
// must run unchanged under whichever allocator LD_PRELOAD put in front, and a symbol the loaded
// library does not export means "not exposed" (an empty JSON object / false), never a crash.
// None of these functions may be called inside a measured phase: they allocate.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace allocmark::allocators {

struct NativeApi {
  std::string_view backend;  // "glibc", "jemalloc", "tcmalloc", "mimalloc"
  // The allocator's own size counters (allocated, active, resident, mapped, ...), flat keys -> numbers.
  nlohmann::json (*read_stats)();
  // Lock contention the allocator itself counts: {"num_ops", "num_wait", "total_wait_ns", "mutexes": {name: {...}}}
  // or an empty object where it counts nothing.
  nlohmann::json (*read_contention)();
  // Effective values of the options a variant may set (e.g. opt.background_thread), so a run can
  // prove that the environment reached the allocator.
  nlohmann::json (*read_options)();
  // Returns free memory to the OS the way the allocator's API offers; false where it has none.
  bool (*purge)();
  // The allocator's own idea of its version ("5.3.0-0-g..."), "" where not exposed.
  std::string (*version)();
  // Why the allocator refused a request of `asked` bytes (0: size not known), when it knows (numap:
  // its capacity, NUMAP_CAPACITY): the text in buf[0..n) and its length, 0 when it has no reason to
  // give. Called right after the refusal, so it must not allocate; null where the allocator says nothing.
  std::size_t (*explain_refusal)(char* buf, std::size_t n, std::size_t asked);
};

// The API table for a backend name; throws std::out_of_range for an unknown backend.
const NativeApi& native_api(std::string_view backend);

}  // namespace allocmark::allocators
