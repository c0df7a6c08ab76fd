// The HTML writer: escaping, encoding, tables and collapsed blocks.
#include <gtest/gtest.h>

#include "harness/report/html.h"
#include "harness/report/versions_report.h"

using namespace allocmark::report;

TEST(Html, EscapesMarkupAndQuotes) {
  EXPECT_EQ(html::escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
}

TEST(Html, Base64OfEveryPaddingLength) {
  EXPECT_EQ(html::base64(""), "");
  EXPECT_EQ(html::base64("f"), "Zg==");
  EXPECT_EQ(html::base64("fo"), "Zm8=");
  EXPECT_EQ(html::base64("foo"), "Zm9v");
  EXPECT_EQ(html::base64(std::string("\xff\x00\x10", 3)), "/wAQ");
  EXPECT_EQ(html::data_uri("image/png", "foob"), "data:image/png;base64,Zm9vYg==");
}

TEST(Html, DocumentEscapesTextAndEmbedsTheSortScriptOnlyWhenNeeded) {
  html::Document plain("t<1>");
  plain.paragraph("<script>alert(1)</script>");
  std::string page = plain.str();
  EXPECT_NE(page.find("<title>t&lt;1&gt;</title>"), std::string::npos);
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<script>"), std::string::npos);

  html::Document sorted("t");
  sorted.table({"x", {{"a"}, {"b", true}}, {{{"r1"}, {"2", 2.0, "[1-3]"}}}, true});
  page = sorted.str();
  EXPECT_NE(page.find("<table id=\"x\" class=\"sortable\">"), std::string::npos);
  EXPECT_NE(page.find("data-sort=\"2\""), std::string::npos);
  EXPECT_NE(page.find("<script>"), std::string::npos);
}

TEST(Html, ALongTextIsCutWithTheWholeInItsTooltip) {
  const std::string name = "<" + std::string(3 * html::kLongText, 'x');
  EXPECT_EQ(html::text_html("short <b>"), "short &lt;b&gt;");
  const std::string shown = html::text_html(name);
  EXPECT_EQ(shown.rfind("<span class=\"unbroken\" title=\"&lt;" + std::string(3 * html::kLongText, 'x') + "\">&lt;xxx", 0), 0u);
  EXPECT_NE(shown.find("x&hellip;</span>"), std::string::npos);
  EXPECT_LT(shown.size(), 4 * html::kLongText + 100);
  // Never cut inside a character: the shown part stays valid UTF-8.
  const std::string wide = std::string(html::kLongText - 1, 'a') + "\xc3\xa9" + "tail";
  const std::string cut = html::text_html(wide);
  EXPECT_NE(cut.find(">" + std::string(html::kLongText - 1, 'a') + "&hellip;"), std::string::npos);
}

TEST(Html, RecordTextShowsControlsAndBreaksOnlyOverlongWords) {
  EXPECT_EQ(html::text_html("glibc\x1b[2J"), "glibc\\x1b[2J");
  EXPECT_EQ(html::text_html("an ordinary name with words"), "an ordinary name with words");
  const std::string word(html::kLongWord + 1, 'a');
  EXPECT_EQ(html::text_html("x " + word), "<span class=\"unbroken\">x " + word + "</span>");
}

TEST(Html, AnIdUsedTwiceIsRefused) {
  html::Document doc("t");
  doc.heading(2, "Phases", "phases");
  EXPECT_THROW(doc.table({"phases", {{"a"}}, {}, false}), std::logic_error);
}

TEST(Html, CollapsedBlocksAndTablesThatScrollInsideTheirBox) {
  html::Document doc("t");
  doc.open_details("Every <phase>", "phases");
  doc.table({"x", {{"a"}}, {{{"1"}}}, false, "answer"});
  doc.close_details();
  const std::string page = doc.str();
  EXPECT_NE(page.find("<details id=\"phases\"><summary>Every &lt;phase&gt;</summary>"), std::string::npos);
  EXPECT_NE(page.find("<div class=\"table-box\"><table id=\"x\" class=\"answer\">"), std::string::npos);
  EXPECT_NE(page.find("</table></div>\n</details>"), std::string::npos);
}

// The report's lines of releases: version order by number (5.9 before 5.10), one line per variant,
// the thp axis' mark kept apart from a version, unversioned names and single releases in none.
TEST(VersionSeries, OrdersByVersionNumberPerVariant) {
  const std::vector<VersionSeries> series = version_series({{"jemalloc@5.10.0", "jemalloc"},
                                                            {"jemalloc", "jemalloc"},
                                                            {"jemalloc@5.9.0", "jemalloc"},
                                                            {"jemalloc@4.4.0", "jemalloc"},
                                                            {"jemalloc@5.2.1:bg", "jemalloc"},
                                                            {"jemalloc@thp=never", "jemalloc"},
                                                            {"mimalloc@3.4.3@thp=never", "mimalloc"},
                                                            {"mimalloc@2.0.9@thp=never", "mimalloc"},
                                                            {"glibc", "glibc"}});
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].variant, "jemalloc");
  EXPECT_EQ(series[0].versions, (std::vector<std::string>{"4.4.0", "5.9.0", "5.10.0"}));
  EXPECT_EQ(series[0].allocators, (std::vector<std::string>{"jemalloc@4.4.0", "jemalloc@5.9.0", "jemalloc@5.10.0"}));
  EXPECT_EQ(series[1].variant, "mimalloc@thp=never");
  EXPECT_EQ(series[1].versions, (std::vector<std::string>{"2.0.9", "3.4.3"}));
}
