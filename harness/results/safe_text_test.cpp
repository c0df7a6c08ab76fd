#include "harness/results/safe_text.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace allocmark::results {
namespace {

TEST(SafeText, WellFormedUtf8IsKeptAsItIs) {
  const std::string text = "plain, \xC3\xA9t\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80";
  EXPECT_EQ(valid_utf8(text), text);
}

TEST(SafeText, EveryIllFormedSequenceBecomesOneReplacementCharacter) {
  EXPECT_EQ(valid_utf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(valid_utf8("cut \xE2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");  // a character cut at the end
  EXPECT_EQ(valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");           // overlong '/'
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80").find("\xF4"), std::string::npos);    // above U+10FFFF
}

TEST(SafeText, TheResultAlwaysSerialisesAsJson) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  nlohmann::json j = valid_utf8(every_byte + every_byte.substr(0, 200));
  EXPECT_NO_THROW((void)j.dump());
}

TEST(SafeText, TerminalTextShowsControlCharactersInsteadOfSendingThem) {
  EXPECT_EQ(terminal_text("glibc\x1b[2J"), "glibc\\x1b[2J");
  EXPECT_EQ(terminal_text("bell\x07 del\x7F"), "bell\\x07 del\\x7f");
  EXPECT_EQ(terminal_text("csi \xC2\x9B" "2J"), "csi \\x9b2J");
  EXPECT_EQ(terminal_text("two\nlines\tand a tab"), "two\nlines\tand a tab");
  EXPECT_EQ(terminal_line("two\nlines\tand a tab"), "two\\nlines\\tand a tab");
  EXPECT_EQ(terminal_text("\xC2\xA0nbsp stays"), "\xC2\xA0nbsp stays");
}

TEST(SafeText, MarkdownTextNeverRendersAsMarkup) {
  EXPECT_EQ(markdown_text("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_EQ(markdown_text("<img src=x onerror=\"a()\">"), "&lt;img src=x onerror=&quot;a()&quot;&gt;");
  EXPECT_EQ(markdown_text("a|b `c` *d* [e](f)"), "a\\|b \\`c\\` \\*d\\* \\[e\\](f)");
  EXPECT_EQ(markdown_text("line\nbreak"), "line break");
}

// A right-to-left override in a name reversed the rest of the line it was on (issue 41).
TEST(SafeText, BidirectionalControlsAreShownNotApplied) {
  EXPECT_EQ(terminal_line("glibc\xE2\x80\xAE" "coda"), "glibc\\u202ecoda");
  EXPECT_EQ(terminal_text("\xD8\x9C \xE2\x80\x8E \xE2\x80\x8F \xE2\x80\xAA \xE2\x80\xAC \xE2\x81\xA6 \xE2\x81\xA9"),
            "\\u061c \\u200e \\u200f \\u202a \\u202c \\u2066 \\u2069");
  EXPECT_EQ(markdown_text("a\xE2\x80\xAE" "b"), "a\\\\u202eb");
  // Their neighbours are text: an en dash (U+2013), a zero-width joiner (U+200D), U+2070.
  EXPECT_EQ(terminal_line("\xE2\x80\x93 \xE2\x80\x8D \xE2\x81\xB0"), "\xE2\x80\x93 \xE2\x80\x8D \xE2\x81\xB0");
  // Cut short at the end of the text: made valid first, never read past the end.
  EXPECT_EQ(terminal_line("x\xE2"), "x\xEF\xBF\xBD");
}

}  // namespace
}  // namespace allocmark::results
