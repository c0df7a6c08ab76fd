// Text that came from outside allocmark (a program's stderr, a log tail, a phase mark, an
// environment value, a field of a results folder someone else produced) made safe for where it
// goes: JSON (valid UTF-8 only), a terminal (no control sequences) or markdown that a code host
// renders as HTML (no markup). Each writer applies the one that fits its medium; the text stored in
// a record is only ever made valid UTF-8, never otherwise altered.
#pragma once

#include <string>
#include <string_view>

namespace allocmark::results {

// `text` with every byte sequence that is not well-formed UTF-8 (a stray byte, a character cut in
// the middle, an overlong form, a surrogate) replaced by U+FFFD. Well-formed text is returned as is.
std::string valid_utf8(std::string_view text);

// For a terminal: valid UTF-8 with control characters (C0 but tab and newline, DEL, C1) shown as
// \xHH, so a record cannot move the cursor, clear the screen or retitle the window, and the
// bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069)
// shown as \uHHHH, so a right-to-left override in a name cannot reverse the rest of its line.
std::string terminal_text(std::string_view text);

// For one line of output (a table cell, a progress line): terminal_text with newlines and tabs
// shown as \n and \t too.
std::string terminal_line(std::string_view text);

// For GitHub-flavoured markdown, inline (a table cell or a list item): line breaks as spaces and
// terminal_line's rules, then
// HTML's special characters as entities (&amp; &lt; &gt; &quot;) and markdown's as backslash
// escapes (| ` * _ [ ] \ ~), so a record's text renders as the text it is, never as markup.
std::string markdown_text(std::string_view text);

}  // namespace allocmark::results
