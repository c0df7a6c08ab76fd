#include "harness/results/safe_text.h"

#include <cstdint>
#include <cstdio>

namespace allocmark::results {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed UTF-8 sequence at text[i], or 0 when there is none (RFC 3629).
std::size_t sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
  else if (b0 == 0xE0) n = 3, lo = 0xA0;           // no overlong forms
  else if (b0 >= 0xE1 && b0 <= 0xEC) n = 3;
  else if (b0 == 0xED) n = 3, hi = 0x9F;           // no surrogates
  else if (b0 >= 0xEE && b0 <= 0xEF) n = 3;
  else if (b0 == 0xF0) n = 4, lo = 0x90;
  else if (b0 >= 0xF1 && b0 <= 0xF3) n = 4;
  else if (b0 == 0xF4) n = 4, hi = 0x8F;           // nothing above U+10FFFF
  else return 0;
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

void append_hex(std::string& out, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", value & 0xFF);
  out += buf;
}

// The code point of a bidirectional formatting character (Unicode's Bidi_Control: ALM, LRM, RLM,
// the embeddings and overrides LRE..RLO with PDF, the isolates LRI..PDI) at text[i] of valid UTF-8,
// or 0. A right-to-left override in a name would otherwise reverse the rest of the line it is on.
unsigned bidi_control_at(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u; };
  if (byte(i) == 0xD8 && byte(i + 1) == 0x9C) return 0x061C;
  if (byte(i) != 0xE2) return 0;
  const unsigned cp = 0x2000 | ((byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F);
  const bool bidi = (byte(i + 1) == 0x80 || byte(i + 1) == 0x81) &&
                    (cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069));
  return bidi ? cp : 0;
}

// Shared by terminal_text and terminal_line: `keep_layout` leaves tab and newline alone.
std::string without_controls(std::string_view raw, bool keep_layout) {
  const std::string text = valid_utf8(raw);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t') {
      if (keep_layout) out += static_cast<char>(c);
      else out += c == '\n' ? "\\n" : "\\t";
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      append_hex(out, c);
      ++i;
    } else if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      append_hex(out, static_cast<unsigned char>(text[i + 1]));  // C1 controls U+0080..U+009F (CSI is one)
      i += 2;
    } else if (const unsigned cp = bidi_control_at(text, i)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
      i += cp == 0x061C ? 2 : 3;
    } else {
      out += static_cast<char>(c);
      ++i;
    }
  }
  return out;
}

}  // namespace

std::string valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {  // the common case: nothing to replace, no copy made twice
    const std::size_t n = sequence_length(text, i);
    if (n == 0) break;
    i += n;
  }
  if (i == text.size()) return std::string(text);
  std::string out(text.substr(0, i));
  while (i < text.size()) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string terminal_text(std::string_view text) { return without_controls(text, true); }

std::string terminal_line(std::string_view text) { return without_controls(text, false); }

std::string markdown_text(std::string_view raw) {
  std::string flat(raw);
  for (char& c : flat)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';  // a line break would end the table row or list item
  const std::string text = terminal_line(flat);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '|': case '`': case '*': case '_': case '[': case ']': case '\\': case '~':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace allocmark::results
