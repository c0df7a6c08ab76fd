// The per-backend tables; each is defined in <backend>/native.cpp (internal to allocators/).
#pragma once

#include "allocators/backends.h"

#include <sys/sysinfo.h>

#include <cstdint>
#include <string>

namespace allocmark::allocators {

// The entries of a NativeApi for what an allocator does not offer (releases built from source
// whose builds export no statistics, no purge or no version call): "not exposed", never zeros.
inline nlohmann::json no_figures() { return nlohmann::json::object(); }
inline bool no_purge() { return false; }
inline std::string no_version() { return ""; }  // the release's build.json says it (`release`)

// An allocator's figure as a measurement, or, where it cannot be one, `null` and `<name>_absent`
// with the reason (the records' convention: latency_absent, nodes_absent), never a number: a count
// the allocator keeps signed and hands out unsigned comes out near 1.8e19 when its own accounting
// went negative (mimalloc 2.2.7's committed bytes, issue 43), and no process holds more bytes than
// the machine's RAM and swap. `who` names the library in the reason ("mimalloc 2.2.7").
inline void put_absent(nlohmann::json& stats, const std::string& name, const std::string& reason) {
  stats[name] = nullptr;
  stats[name + "_absent"] = reason;
}
inline void put_figure(nlohmann::json& stats, const std::string& name, std::uint64_t value, bool bytes,
                       const std::string& who) {
  struct sysinfo machine {};
  const std::uint64_t memory =
      ::sysinfo(&machine) == 0 ? (std::uint64_t{machine.totalram} + machine.totalswap) * machine.mem_unit : 0;
  if (static_cast<std::int64_t>(value) < 0) {
    put_absent(stats, name, who + " reported " + std::to_string(static_cast<std::int64_t>(value)) +
                                " (a negative count read as unsigned): not a measurement");
  } else if (bytes && memory != 0 && value > memory) {
    put_absent(stats, name, who + " reported " + std::to_string(value) + " bytes, more than the machine's RAM and swap (" +
                                std::to_string(memory) + "): not a measurement");
  } else {
    stats[name] = value;
  }
}

extern const Backend kGlibcBackend;
extern const Backend kJemallocBackend;
extern const Backend kTcmallocBackend;
extern const Backend kMimallocBackend;
extern const Backend kNumapBackend;
extern const Backend kSnmallocBackend;
extern const Backend kRpmallocBackend;

}  // namespace allocmark::allocators
