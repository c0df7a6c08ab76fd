#include "allocators/numap/options.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <type_traits>

#include "allocators/numap/os.h"

namespace numap {
namespace {

// A row's typed default as OptionInfo::def (kPath: 0; kChoice: the index).
template <class T>
constexpr long long default_number(T def) {
  if constexpr (std::is_pointer_v<T>) return 0;
  else return static_cast<long long>(def);
}

const OptionInfo kTable[] = {
#define NUMAP_OPTION_INFO(name, member, type, kind, def, min, max, choices, help) \
  {#name, OptKind::kind, default_number<type>(def), min, max, choices, help},
    NUMAP_OPTIONS(NUMAP_OPTION_INFO)
#undef NUMAP_OPTION_INFO
};
constexpr std::size_t kCount = sizeof kTable / sizeof kTable[0];

// words: a kChoice option's words, written after `expected` as "a|b".
[[noreturn]] void bad(const OptionInfo& info, const char* value, const char* expected,
                      const char* const* words = nullptr) {
  write_stderr("numap: NUMAP_");
  write_stderr(info.name);
  write_stderr("='");
  write_stderr(value);
  write_stderr("': ");
  write_stderr(expected);
  for (const char* const* w = words; w != nullptr && *w != nullptr; ++w) {
    if (w != words) write_stderr("|");
    write_stderr(*w);
  }
  write_stderr("\n");
  ::abort();
}

bool parse_int(const char* text, long long* out) {
  const char* p = text;
  bool neg = false;
  if (*p == '-') {
    neg = true;
    ++p;
  }
  if (*p < '0' || *p > '9') return false;
  long long v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (1ll << 55)) return false;
    v = v * 10 + (*p - '0');
  }
  if (*p != '\0') return false;
  *out = neg ? -v : v;
  return true;
}

// Parses and range-checks one option, aborting with a message on anything wrong.
long long read_one(const OptionInfo& info, const char* value) {
  long long v = 0;
  switch (info.kind) {
    case OptKind::kSize:
    case OptKind::kPowerOfTwo: {
      std::uint64_t s = 0;
      if (!parse_size(value, &s)) bad(info, value, "not a size (digits with an optional K, M, G or T suffix)");
      v = static_cast<long long>(s);
      break;
    }
    case OptKind::kInt:
      if (!parse_int(value, &v)) bad(info, value, "not an integer");
      break;
    case OptKind::kBool:
      if (strcmp(value, "1") == 0 || strcmp(value, "true") == 0) return 1;
      if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0) return 0;
      bad(info, value, "expected 0, 1, true or false");
    case OptKind::kChoice:
      for (long long i = 0; info.choices[i] != nullptr; ++i)
        if (strcmp(value, info.choices[i]) == 0) return i;
      bad(info, value, "expected one of ", info.choices);
    case OptKind::kPath:
      if (value[0] != '/') bad(info, value, "expected an absolute path");
      return 0;
  }
  if (v < info.min || v > info.max) bad(info, value, "out of range");
  if (info.kind == OptKind::kPowerOfTwo && (v & (v - 1)) != 0) bad(info, value, "not a power of two");
  return v;
}

// An option's field from its parsed number (`text`: the environment's string, for kPath).
template <class T>
void assign(T& field, long long v, const char* text) {
  if constexpr (std::is_pointer_v<T>) field = text;
  else if constexpr (std::is_same_v<T, bool>) field = v != 0;
  else field = static_cast<T>(v);
}

// The reverse, for printing: the number, and the text of string and choice options.
template <class T>
long long as_number(const T& field, const OptionInfo& info, const char** text) {
  if constexpr (std::is_pointer_v<T>) {
    *text = field;
    return 0;
  } else {
    const long long v = static_cast<long long>(field);
    if (info.kind == OptKind::kChoice) *text = info.choices[v];
    return v;
  }
}

}  // namespace

const OptionInfo* option_table(std::size_t* count) {
  *count = kCount;
  return kTable;
}

bool parse_size(const char* text, std::uint64_t* out) {
  const char* p = text;
  if (*p < '0' || *p > '9') return false;
  std::uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (1ull << 50)) return false;
    v = v * 10 + static_cast<std::uint64_t>(*p - '0');
  }
  int shift = 0;
  switch (*p) {
    case '\0': break;
    case 'k': case 'K': shift = 10; ++p; break;
    case 'm': case 'M': shift = 20; ++p; break;
    case 'g': case 'G': shift = 30; ++p; break;
    case 't': case 'T': shift = 40; ++p; break;
    default: return false;
  }
  if (*p == 'i' && shift != 0) ++p;  // "64Ki", "64KiB"
  if ((*p == 'b' || *p == 'B') && shift != 0) ++p;
  if (*p != '\0') return false;
  if (shift != 0 && v > (~0ull >> shift)) return false;
  *out = v << shift;
  return true;
}

Options options_from_env() {
  Options o;
  char name[64];
  for (std::size_t i = 0; i < kCount; ++i) {
    const OptionInfo& info = kTable[i];
    strcpy(name, "NUMAP_");
    strcat(name, info.name);
    const char* value = ::getenv(name);
    if (value == nullptr) continue;
    const long long v = read_one(info, value);
    std::size_t row = 0;
#define NUMAP_OPTION_ASSIGN(name, member, type, kind, def, min, max, choices, help) \
    if (row++ == i) assign(o.member, v, value);
    NUMAP_OPTIONS(NUMAP_OPTION_ASSIGN)
#undef NUMAP_OPTION_ASSIGN
  }
  // Unknown NUMAP_* names are typos that would otherwise be silently ignored.

  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "NUMAP_", 6) != 0) continue;
    const char* n = *e + 6;
    const char* eq = strchr(n, '=');
    std::size_t len = eq ? static_cast<std::size_t>(eq - n) : strlen(n);
    bool known = false;
    for (std::size_t i = 0; i < kCount; ++i)
      if (strlen(kTable[i].name) == len && strncmp(kTable[i].name, n, len) == 0) known = true;
    if (!known) {
      write_stderr("numap: unknown option ");
      write_stderr(*e);
      write_stderr(" (NUMAP_PRINT_OPTIONS=1 lists them)\n");
      ::abort();
    }
  }
  return o;
}

long long option_value(const Options& o, std::size_t index, const char** text) {
  *text = nullptr;
  std::size_t row = 0;
#define NUMAP_OPTION_VALUE(name, member, type, kind, def, min, max, choices, help) \
  if (row++ == index) return as_number(o.member, kTable[index], text);
  NUMAP_OPTIONS(NUMAP_OPTION_VALUE)
#undef NUMAP_OPTION_VALUE
  return 0;
}

void print_options(const Options& o) {
  for (std::size_t i = 0; i < kCount; ++i) {
    const char* text = nullptr;
    long long v = option_value(o, i, &text);
    write_stderr("numap: NUMAP_");
    write_stderr(kTable[i].name);
    write_stderr("=");
    if (text != nullptr) {
      write_stderr(text);
    } else if (v < 0) {
      write_stderr("-");
      write_stderr_u64(static_cast<std::uint64_t>(-v));
    } else {
      write_stderr_u64(static_cast<std::uint64_t>(v));
    }
    write_stderr("  # ");
    write_stderr(kTable[i].help);
    write_stderr("\n");
  }
}

}  // namespace numap
