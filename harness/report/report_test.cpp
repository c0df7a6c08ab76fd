// The HTML writer's escaping and encoding, and the verdict over model groups built from records.
#include <gtest/gtest.h>

#include "harness/report/html.h"
#include "harness/report/verdict.h"

using namespace allocmark::report;
namespace rs = allocmark::results;
using nlohmann::json;

namespace {

json phase(double peak_rss, double live, double ops_per_s) {
  return {{"name", "run"}, {"peak_rss_bytes", peak_rss}, {"peak_live_bytes", live},
          {"ops", ops_per_s}, {"wall_s", 1.0}, {"ops_per_s", ops_per_s}};
}

json cell(const std::string& allocator, int rep, double peak_rss, double ops_per_s, const std::string& status = "ok") {
  return {{"key", allocator + "/w/t1/r" + std::to_string(rep)},
          {"allocator", allocator}, {"backend", allocator}, {"workload", "w"}, {"threads", 1}, {"rep", rep},
          {"status", status}, {"error", status == "ok" ? json() : json("exit code 7")},
          {"idle_rss_bytes", 0}, {"phases", status == "ok" ? json::array({phase(peak_rss, 100, ops_per_s)}) : json::array()}};
}

const Verdict& verdict_for(const std::vector<Verdict>& all, rs::Metric m) {
  for (const auto& v : all)
    if (v.metric == m) return v;
  throw std::runtime_error("no verdict");
}

std::vector<Verdict> verdicts_of(const std::vector<json>& records) {
  return verdicts(rs::Model::from_records(records).group(
      {rs::Dimension::workload, rs::Dimension::threads, rs::Dimension::allocator}));
}

}  // namespace

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

TEST(Verdict, LeaderRunnerUpLeadAndSeparation) {
  // a: peak 100-120, 1000 ops/s; b: peak 200-220, 3000 ops/s. a leads on memory, b on throughput.
  std::vector<json> records;
  for (int rep = 0; rep < 3; ++rep) {
    records.push_back(cell("a", rep, 100 + 10 * rep, 1000 + rep));
    records.push_back(cell("b", rep, 200 + 10 * rep, 3000 + rep));
  }
  auto all = verdicts_of(records);
  ASSERT_EQ(all.size(), verdict_metrics().size());
  const Verdict& rss = verdict_for(all, rs::Metric::peak_rss_bytes);
  EXPECT_EQ(rss.leader->allocator, "a");
  EXPECT_EQ(rss.runner_up->allocator, "b");
  EXPECT_DOUBLE_EQ(*rss.lead, 210.0 / 110.0);
  EXPECT_EQ(rss.noise, Noise::separated);
  const Verdict& ops = verdict_for(all, rs::Metric::ops_per_s);
  EXPECT_EQ(ops.leader->allocator, "b");
  EXPECT_DOUBLE_EQ(*ops.lead, 3001.0 / 1001.0);
  EXPECT_EQ(ops.leader->spread.n, 3u);
}

TEST(Verdict, OverlappingRangesAreNoiseAndFailedCellsDoNotCount) {
  // a: 100 and 140 (median 120); b: 115 and 135 (median 125): a leads, but its worst beats none of b.
  std::vector<json> records{cell("a", 0, 100, 1), cell("a", 1, 140, 1), cell("b", 0, 115, 1), cell("b", 1, 135, 1),
                            cell("c", 0, 1, 1, "failed")};
  const Verdict& rss = verdict_for(verdicts_of(records), rs::Metric::peak_rss_bytes);
  EXPECT_EQ(rss.contenders, 2u);  // c failed: no figure
  EXPECT_EQ(rss.leader->allocator, "a");
  EXPECT_DOUBLE_EQ(*rss.lead, 125.0 / 120.0);
  EXPECT_EQ(rss.noise, Noise::overlapping);
}

TEST(Verdict, OneAllocatorOrOneRepetitionIsSaidSo) {
  auto single = verdicts_of({cell("a", 0, 100, 1)});
  EXPECT_EQ(verdict_for(single, rs::Metric::peak_rss_bytes).noise, Noise::no_contest);
  EXPECT_FALSE(verdict_for(single, rs::Metric::peak_rss_bytes).runner_up);
  auto once = verdicts_of({cell("a", 0, 100, 1), cell("b", 0, 200, 1)});
  EXPECT_EQ(verdict_for(once, rs::Metric::peak_rss_bytes).noise, Noise::one_repetition);
  EXPECT_DOUBLE_EQ(*verdict_for(once, rs::Metric::peak_rss_bytes).lead, 2.0);
}
