// glibc ptmalloc: mallinfo2 counters, arena count from malloc_info, malloc_trim.
#include "allocators/dlsym.h"
#include "allocators/native_backends.h"

#include <gnu/libc-version.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace allocmark::allocators {
namespace {

// Number of `<heap nr=...>` elements malloc_info writes: one per arena (main arena included).
std::optional<std::size_t> count_arenas() {
  auto* info = find_symbol<decltype(malloc_info)>("malloc_info");
  if (info == nullptr) return std::nullopt;
  char* buf = nullptr;
  std::size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  if (out == nullptr) return std::nullopt;
  const int rc = info(0, out);
  std::fclose(out);  // sets buf/len
  std::optional<std::size_t> arenas;
  if (rc == 0 && buf != nullptr) {
    const std::string_view xml(buf, len);
    constexpr std::string_view kHeap = "<heap nr=";
    std::size_t n = 0;
    for (auto pos = xml.find(kHeap); pos != std::string_view::npos; pos = xml.find(kHeap, pos + 1)) ++n;
    arenas = n;
  }
  std::free(buf);
  return arenas;
}

nlohmann::json read_stats() {
  nlohmann::json s = nlohmann::json::object();
  if (auto* mi2 = find_symbol<decltype(mallinfo2)>("mallinfo2")) {
    const struct mallinfo2 m = mi2();
    s["arena"] = m.arena;
    s["ordblks"] = m.ordblks;
    s["hblks"] = m.hblks;
    s["hblkhd"] = m.hblkhd;
    s["uordblks"] = m.uordblks;  // bytes in use
    s["fordblks"] = m.fordblks;
    s["keepcost"] = m.keepcost;
  }
  if (auto n = count_arenas()) s["arenas"] = *n;
  return s;
}

// glibc counts no lock contention.
nlohmann::json read_contention() { return nlohmann::json::object(); }

nlohmann::json env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// glibc offers no query for its tunables (glibc.malloc.arena_max, ...), so report what the
// environment asked for next to the arena count actually observed.
nlohmann::json read_options() {
  nlohmann::json o = nlohmann::json::object();
  if (auto n = count_arenas()) o["arena_count"] = *n;
  o["MALLOC_ARENA_MAX"] = env_or_null("MALLOC_ARENA_MAX");
  o["MALLOC_TRIM_THRESHOLD_"] = env_or_null("MALLOC_TRIM_THRESHOLD_");
  o["GLIBC_TUNABLES"] = env_or_null("GLIBC_TUNABLES");
  return o;
}

bool purge() {
  auto* trim = find_symbol<decltype(malloc_trim)>("malloc_trim");
  if (trim == nullptr) return false;
  trim(0);  // its return value only says whether anything was released
  return true;
}

std::string version() {
  auto* v = find_symbol<decltype(gnu_get_libc_version)>("gnu_get_libc_version");
  const char* s = v != nullptr ? v() : nullptr;
  return s != nullptr ? s : "";
}

}  // namespace

// The numbers the tunables read (_dl_strtoul): decimal, 0x hex or 0 octal, nothing after.
constexpr const char* kUnsigned = "0[xX][0-9a-fA-F]+|[0-9]+";
constexpr const char* kUnsignedText = "an unsigned integer (decimal, or 0x hex)";

constexpr NativeApi kGlibcApi{"glibc", &read_stats, &read_contention, &read_options, &purge, &version};

const Backend kGlibcBackend{
    "glibc", "the C library's ptmalloc2 (per-thread arenas)", {}, "", "libc6",
    // mallopt's environment aliases (malloc/arena.c, malloc/malloc.c), mtrace, and the tunables.
    {"MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_CHECK_", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_",
     "MALLOC_PERTURB_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TRACE", "GLIBC_TUNABLES"},
    {},
    &kGlibcApi,
    {},
    // glibc prints nothing for a value it cannot read: the tunables (elf/dl-tunables.c) drop a
    // number _dl_strtoul cannot read whole, and GLIBC_TUNABLES an item without '='.
    "",
    {{"MALLOC_ARENA_MAX", kUnsigned, kUnsignedText},
     {"MALLOC_ARENA_TEST", kUnsigned, kUnsignedText},
     {"MALLOC_MMAP_MAX_", kUnsigned, kUnsignedText},
     {"MALLOC_MMAP_THRESHOLD_", kUnsigned, kUnsignedText},
     {"MALLOC_TOP_PAD_", kUnsigned, kUnsignedText},
     {"MALLOC_TRIM_THRESHOLD_", kUnsigned, kUnsignedText},
     {"MALLOC_PERTURB_", kUnsigned, kUnsignedText},
     {"MALLOC_CHECK_", "[0-3]", "0, 1, 2 or 3"},
     {"GLIBC_TUNABLES", "[A-Za-z0-9_.]+=[^:=]*(:[A-Za-z0-9_.]+=[^:=]*)*", "NAME=VALUE items separated by ':' (glibc.malloc.arena_max=2)"}}};

}  // namespace allocmark::allocators
