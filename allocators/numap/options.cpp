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

void write_number(long long v) {
  if (v < 0) write_stderr("-");
  write_stderr_u64(v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v));
}

// Option i's value in o, as NUMAP_PRINT_OPTIONS and numap_option show it.
void write_value(const Options& o, std::size_t i) {
  const char* text = nullptr;
  const long long v = option_value(o, i, &text);
  if (text != nullptr) write_stderr(text);
  else write_number(v);
}

// What a row accepts, for its warning.
void write_expected(const OptionInfo& info) {
  switch (info.kind) {
    case OptKind::kSize:
    case OptKind::kPowerOfTwo:
    case OptKind::kInt:
      write_stderr(info.kind == OptKind::kInt    ? "expected an integer from "
                   : info.kind == OptKind::kSize ? "expected a size from "
                                                 : "expected a power of two from ");
      write_number(info.min);
      write_stderr(" to ");
      write_number(info.max);
      if (info.kind != OptKind::kInt) write_stderr(" bytes (digits, optional K, M, G or T suffix)");
      return;
    case OptKind::kBool:
      write_stderr("expected 0, 1, true or false");
      return;
    case OptKind::kChoice:
      write_stderr("expected one of ");
      for (const char* const* w = info.choices; *w != nullptr; ++w) {
        if (w != info.choices) write_stderr("|");
        write_stderr(*w);
      }
      return;
    case OptKind::kPath:
      write_stderr("expected an absolute path");
      return;
  }
}

// Every warning is one line, "numap: NUMAP_<name>='<value>': <problem>; <what numap does instead>",
// begun here (`len` bytes of name)...
void warning_begin(const char* name, std::size_t len, const char* value) {
  write_stderr("numap: NUMAP_");
  write_stderr(name, len);
  write_stderr("='");
  write_stderr(value);
  write_stderr("': ");
}

// ... and ended here with `instead` and then option `use`'s value in o (kCount: none), counted in
// o->warnings. Under NUMAP_STRICT=1 the line says so instead and the process aborts.
void warning_end(Options* o, const char* instead, std::size_t use) {
  if (o->strict) {
    write_stderr("; NUMAP_STRICT=1: aborting\n");
    ::abort();
  }
  write_stderr("; ");
  write_stderr(instead);
  if (use < kCount) write_value(*o, use);
  write_stderr("\n");
  ++o->warnings;
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

// Parses and range-checks one option's value: false when it is not what the row accepts.
bool read_one(const OptionInfo& info, const char* value, long long* out) {
  long long v = 0;
  switch (info.kind) {
    case OptKind::kSize:
    case OptKind::kPowerOfTwo: {
      std::uint64_t s = 0;
      if (!parse_size(value, &s)) return false;
      v = static_cast<long long>(s);
      break;
    }
    case OptKind::kInt:
      if (!parse_int(value, &v)) return false;
      break;
    case OptKind::kBool:
      if (strcmp(value, "1") == 0 || strcmp(value, "true") == 0) v = 1;
      else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0) v = 0;
      else return false;
      *out = v;
      return true;
    case OptKind::kChoice:
      for (long long i = 0; info.choices[i] != nullptr; ++i)
        if (strcmp(value, info.choices[i]) == 0) {
          *out = i;
          return true;
        }
      return false;
    case OptKind::kPath:
      *out = 0;
      return value[0] == '/';
  }
  if (v < info.min || v > info.max) return false;
  if (info.kind == OptKind::kPowerOfTwo && (v & (v - 1)) != 0) return false;
  *out = v;
  return true;
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

namespace {

// Reads row i from NUMAP_<NAME> into o; a value the row does not accept is one warning, and the
// default stays.
void read_row(Options& o, std::size_t i) {
  const OptionInfo& info = kTable[i];
  char name[64];
  strcpy(name, "NUMAP_");
  strcat(name, info.name);
  const char* value = ::getenv(name);
  if (value == nullptr) return;
  long long v = 0;
  if (!read_one(info, value, &v)) {
    warning_begin(info.name, strlen(info.name), value);
    write_expected(info);
    warning_end(&o, "using the default ", i);
    return;
  }
  std::size_t row = 0;
#define NUMAP_OPTION_ASSIGN(name, member, type, kind, def, min, max, choices, help) \
  if (row++ == i) assign(o.member, v, value);
  NUMAP_OPTIONS(NUMAP_OPTION_ASSIGN)
#undef NUMAP_OPTION_ASSIGN
}

}  // namespace

Options options_from_env() {
  Options o;
  // NUMAP_STRICT first: it decides what the other rows' problems do.
  constexpr std::size_t strict = static_cast<std::size_t>(OptionIndex::STRICT);
  read_row(o, strict);
  for (std::size_t i = 0; i < kCount; ++i)
    if (i != strict) read_row(o, i);
  // An unknown NUMAP_* name is most often a typo: said, never silently ignored, but a variable
  // left in a shell must not kill every program started from it.
  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "NUMAP_", 6) != 0) continue;
    const char* n = *e + 6;
    const char* eq = strchr(n, '=');
    std::size_t len = eq ? static_cast<std::size_t>(eq - n) : strlen(n);
    bool known = false;
    for (std::size_t i = 0; i < kCount; ++i)
      if (strlen(kTable[i].name) == len && strncmp(kTable[i].name, n, len) == 0) known = true;
    if (!known) {
      warning_begin(n, len, eq ? eq + 1 : "");
      write_stderr("not a numap option (NUMAP_PRINT_OPTIONS=1 lists them)");
      warning_end(&o, "ignored", kCount);
    }
  }
  return o;
}

void option_fallback(Options* o, OptionIndex option, const Options& asked, const char* problem) {
  const std::size_t i = static_cast<std::size_t>(option);
  write_stderr("numap: NUMAP_");
  write_stderr(kTable[i].name);
  write_stderr("=");
  write_value(asked, i);
  write_stderr(": ");
  write_stderr(problem);
  warning_end(o, "using ", i);
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
    write_stderr("numap: NUMAP_");
    write_stderr(kTable[i].name);
    write_stderr("=");
    write_value(o, i);
    write_stderr("  # ");
    write_stderr(kTable[i].help);
    write_stderr("\n");
  }
}

}  // namespace numap
