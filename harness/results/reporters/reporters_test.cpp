#include "harness/results/reporters/reporter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace allocmark::results;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = std::string(ALLOCMARK_FIXTURES_DIR) + "/results-small";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Compares `actual` with the golden file byte for byte; ALLOCMARK_UPDATE_GOLDEN=1 rewrites it
// instead (then read the diff before committing: the golden files are checked by eye).
void expect_golden(const std::string& name, const std::string& actual) {
  std::string path = kFixture + "/golden/" + name;
  if (const char* update = std::getenv("ALLOCMARK_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    fs::create_directories(kFixture + "/golden");
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing; run with ALLOCMARK_UPDATE_GOLDEN=1 to create it";
  EXPECT_EQ(actual, read(path)) << "differs from " << path << " (ALLOCMARK_UPDATE_GOLDEN=1 rewrites it)";
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(Golden, ShowInEveryFormat) {
  Model model = Model::load({kFixture});
  ASSERT_TRUE(model.warnings().empty());
  expect_golden("show.table", render_report(model, "table"));
  expect_golden("show.csv", render_report(model, "csv"));
  expect_golden("show.json", render_report(model, "json"));
  expect_golden("show.md", render_report(model, "markdown"));
  expect_golden("show-by-allocator.table",
                render_report(model, "table", {{Dimension::allocator}, {Metric::peak_rss_bytes, Metric::wall_s}}));
}

TEST(Golden, SummaryFilesWrittenBesideTheResults) {
  std::string d = ::testing::TempDir() + "/reporters_test_summaries";
  fs::remove_all(d);
  fs::create_directories(d);
  fs::copy_file(kFixture + "/results.jsonl", d + "/results.jsonl");
  fs::copy_file(kFixture + "/meta.json", d + "/meta.json");
  write_summaries(d);
  expect_golden("summary.csv", read(d + "/summary.csv"));
  expect_golden("summary.json", read(d + "/summary.json"));
  for (const auto& e : fs::directory_iterator(d)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  // The documented shape: one row per cell and phase (a cell without phases has one).
  EXPECT_EQ(lines(read(d + "/summary.csv")).size(), 1u + 9 * 3 + 2);
  json summary = json::parse(read(d + "/summary.json"));
  EXPECT_EQ(summary["schema_version"], kSummarySchemaVersion);
  EXPECT_EQ(summary["groups"].size(), 9u + 2);
}

TEST(Reporters, TableMatchesTheLayoutShowHasAlwaysPrinted) {
  std::string table = render_report(Model::load({kFixture}), "table");
  auto rows = lines(table);
  ASSERT_GT(rows.size(), 2u);
  EXPECT_EQ(rows[0],
            "workload       thr allocator          phase                  peak RSS MiB        RSS-idle/live      "
            "              ops/s  status");
  EXPECT_EQ(rows.back(),
            "peak RSS: exact per phase (VmHWM after a clear_refs reset); RSS-idle/live: (peak RSS - idle baseline) / "
            "peak live requested bytes; median [min-max] over repetitions.");
  EXPECT_NE(table.find("                                                    ! exit code 7\n"), std::string::npos);
}

TEST(Reporters, WriteSummariesOfAFolderWithoutCellsWritesHeadersOnly) {
  std::string d = ::testing::TempDir() + "/reporters_test_empty";
  fs::remove_all(d);
  fs::create_directories(d);
  write_summaries(d);
  EXPECT_EQ(lines(read(d + "/summary.csv")).size(), 1u);
  json summary = json::parse(read(d + "/summary.json"));
  EXPECT_TRUE(summary["groups"].empty());
}

TEST(Reporters, UnknownFormatIsAnError) {
  EXPECT_EQ(make_reporter("xml"), nullptr);
  EXPECT_THROW(render_report(Model::load({kFixture}), "xml"), ResultsError);
  for (const auto& f : reporter_formats()) EXPECT_NE(make_reporter(f), nullptr) << f;
}

TEST(Reporters, CsvQuotesAndMarkdownEscapes) {
  json r = {{"key", "k"},          {"allocator", "a|b"}, {"workload", "w"}, {"threads", 1},
            {"status", "failed"}, {"error", "exit code 3: \"quoted\", with comma"}};
  Model m = Model::from_records({r});
  std::string csv = cells_csv(m);
  EXPECT_NE(csv.find(R"("exit code 3: ""quoted"", with comma")"), std::string::npos) << csv;
  std::string md = render_report(m, "markdown");
  EXPECT_NE(md.find("| a\\|b |"), std::string::npos) << md;
  std::string grouped = render_report(m, "csv");
  EXPECT_EQ(lines(grouped)[0].rfind("workload,threads,allocator,phase,cells,statuses,errors,peak_rss_bytes_n,", 0), 0u)
      << grouped;
}

// Text from records is shown as text: markdown (a pull-request comment) gets no markup, the
// terminal table no control sequence; CSV and JSON are data and keep it exactly.
TEST(Reporters, RecordTextIsNeverMarkupOrTerminalControl) {
  json r = {{"key", "k"},          {"allocator", "<img src=x onerror=alert(1)>"}, {"workload", "w\x1b[2J"}, {"threads", 1},
            {"status", "failed"}, {"error", "<script>x</script> \x1b[31mred"}};
  Model m = Model::from_records({r});
  std::string md = render_report(m, "markdown");
  for (const char* raw : {"<img", "<script", "\x1b"}) EXPECT_EQ(md.find(raw), std::string::npos) << raw << "\n" << md;
  EXPECT_NE(md.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos) << md;
  EXPECT_NE(md.find(R"(&lt;script&gt;x&lt;/script&gt; \\x1b\[31mred)"), std::string::npos) << md;
  std::string table = render_report(m, "table");
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_NE(table.find("w\\x1b[2J"), std::string::npos) << table;
  EXPECT_NE(cells_csv(m).find("w\x1b[2J"), std::string::npos);
  EXPECT_NE(render_report(m, "json").find(R"(w\u001b[2J)"), std::string::npos);
}
