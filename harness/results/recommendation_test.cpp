// The recommendation (which allocator leads each workload, by how much, how sure) and advise's
// choice built on it, over records made here.
#include <gtest/gtest.h>

#include <tuple>

#include "harness/results/advice.h"
#include "harness/results/recommendation.h"
#include "harness/results/reporters/text.h"

using namespace allocmark::results;
using nlohmann::json;

// Named after the file: its helpers and tests share a unity batch with other files (cmake/allocmark_build_speed.cmake).
namespace recommendation_test {
namespace {

json phase(const std::string& name, double peak_rss, double live, double ops, double wall = 1.0) {
  return {{"name", name}, {"peak_rss_bytes", peak_rss}, {"end_rss_bytes", peak_rss}, {"peak_live_bytes", live},
          {"ops", ops}, {"wall_s", wall}};
}

json cell(const std::string& allocator, int rep, json phases, const std::string& workload = "w", const std::string& status = "ok",
          json env = json::object(), const std::string& preload = "") {
  return {{"key", allocator + "/" + workload + "/t1/r" + std::to_string(rep)},
          {"allocator", allocator}, {"backend", allocator.substr(0, allocator.find(':'))}, {"workload", workload},
          {"threads", 1}, {"rep", rep}, {"status", status}, {"error", status == "ok" ? json() : json("exit code 7")},
          {"idle_rss_bytes", 0}, {"env", env}, {"preload", preload},
          {"phases", status == "ok" ? std::move(phases) : json::array()}};
}

json one_phase(const std::string& allocator, int rep, double peak_rss, double ops_per_s, const std::string& status = "ok") {
  return cell(allocator, rep, json::array({phase("run", peak_rss, 100, ops_per_s)}), "w", status);
}

// A copy: callers pass the recommendation as a temporary.
Ranking headline(const Recommendation& r, Figure f) {
  const Ranking* found = r.scopes.at(0).find(f);
  if (!found) throw std::runtime_error("no such headline figure");
  return *found;
}

}  // namespace

TEST(Recommendation, LeaderMarginAndSeparation) {
  // a: peak 100-120, 1000 ops/s; b: peak 200-220, 3000 ops/s. a leads on memory, b on time.
  std::vector<json> records;
  for (int rep = 0; rep < 3; ++rep) {
    records.push_back(one_phase("a", rep, 100 + 10 * rep, 1000 + rep));
    records.push_back(one_phase("b", rep, 200 + 10 * rep, 3000 + rep));
  }
  const Recommendation rec = recommend(Model::from_records(records));
  ASSERT_EQ(rec.scopes.size(), 1u);
  EXPECT_EQ(rec.scopes[0].repetitions, 3u);
  const Ranking& rss = headline(rec, Figure::peak_rss);
  EXPECT_EQ(rss.standings[0].allocator, "a");
  EXPECT_EQ(rss.standings[1].allocator, "b");
  EXPECT_DOUBLE_EQ(rss.margin(), 210.0 / 110.0 - 1);
  EXPECT_EQ(rss.certainty, Certainty::clear);
  const Ranking& time = headline(rec, Figure::time);
  EXPECT_EQ(time.standings[0].allocator, "b");
  EXPECT_NEAR(time.standings[1].relative, 3001.0 / 1001.0, 1e-9);
  EXPECT_EQ(time.certainty, Certainty::clear);
}

TEST(Recommendation, SaysWhenTheRssAboveTheLeaderIsMostlyHugePages) {
  constexpr double MiB = 1024.0 * 1024.0;
  // a: 100 MiB, no huge page. b: 160 MiB, 100 MiB of them huge pages. c: 150 MiB in small pages.
  // d: 101 MiB with huge pages: within one huge page of the leader, nothing to say.
  std::vector<json> records;
  for (int rep = 1; rep <= 3; ++rep)
    for (auto [allocator, rss, huge] : std::vector<std::tuple<std::string, double, double>>{
             {"a", 100, 0}, {"b", 160, 100}, {"c", 150, 0}, {"d", 101, 50}}) {
      json ph = phase("run", rss * MiB + rep, 10 * MiB, 1000);
      ph["anon_huge_bytes"] = huge * MiB;
      records.push_back(cell(allocator, rep, json::array({ph})));
    }
  const Recommendation rec = recommend(Model::from_records(records));
  for (Figure f : {Figure::peak_rss, Figure::held_rss}) {
    const Ranking r = headline(rec, f);
    ASSERT_EQ(r.mostly_huge_pages.size(), 1u);
    EXPECT_EQ(r.mostly_huge_pages[0].allocator, "b");
    EXPECT_NEAR(r.mostly_huge_pages[0].rss_above, 60 * MiB, 1);
    EXPECT_NEAR(r.mostly_huge_pages[0].huge_above, 100 * MiB, 1);
    EXPECT_EQ(text::huge_pages_text(r), "mostly huge pages: b is +60.0 MiB and holds 100.0 MiB more in huge pages");
  }
  EXPECT_NE(text::recommendation_text(rec, "DIR").find("mostly huge pages: b is +60.0 MiB"), std::string::npos);
  // Records without huge-page readings (older folders) say nothing.
  std::vector<json> old;
  for (int rep = 1; rep <= 3; ++rep) old.push_back(one_phase("a", rep, 100 * MiB, 1)), old.push_back(one_phase("b", rep, 200 * MiB, 1));
  EXPECT_TRUE(headline(recommend(Model::from_records(old)), Figure::peak_rss).mostly_huge_pages.empty());
}

TEST(Recommendation, OverlappingRangesAreNoiseFailedCellsDoNotCountOneRepetitionIsSaid) {
  // a: 100 and 140 (median 120); b: 115 and 135 (median 125): a leads, but its worst beats none of b.
  std::vector<json> records{one_phase("a", 0, 100, 1), one_phase("a", 1, 140, 1), one_phase("b", 0, 115, 1),
                            one_phase("b", 1, 135, 1), one_phase("c", 0, 1, 1, "failed")};
  const Ranking& rss = headline(recommend(Model::from_records(records)), Figure::peak_rss);
  ASSERT_EQ(rss.standings.size(), 2u);  // c failed: no figure
  EXPECT_EQ(rss.standings[0].allocator, "a");
  EXPECT_DOUBLE_EQ(rss.margin(), 125.0 / 120.0 - 1);
  EXPECT_EQ(rss.certainty, Certainty::within_noise);

  EXPECT_EQ(headline(recommend(Model::from_records({one_phase("a", 0, 100, 1)})), Figure::peak_rss).certainty, Certainty::alone);
  const Ranking& once =
      headline(recommend(Model::from_records({one_phase("a", 0, 100, 1), one_phase("b", 0, 200, 1)})), Figure::peak_rss);
  EXPECT_EQ(once.certainty, Certainty::one_repetition);
  EXPECT_DOUBLE_EQ(once.margin(), 1.0);
}

TEST(Recommendation, TimeLeavesOutIdlePhasesAndIsTheGeomeanOfThePhasesThatWork) {
  // Phase p: a twice b's rate; phase q: b four times a's; an idle phase of 10 s neither can change.
  std::vector<json> records;
  for (int rep = 0; rep < 2; ++rep) {
    records.push_back(cell("a", rep, json::array({phase("p", 100, 50, 2000), phase("q", 100, 50, 1000), phase("idle", 100, 50, 0, 10)})));
    records.push_back(cell("b", rep, json::array({phase("p", 100, 50, 1000), phase("q", 100, 50, 4000), phase("idle", 100, 50, 0, 10)})));
  }
  const Recommendation rec = recommend(Model::from_records(records));
  const ScopeRecommendation& s = rec.scopes[0];
  ASSERT_EQ(s.details.size(), 2u);  // p and q; not idle
  EXPECT_EQ(s.details[0].what, "p");
  EXPECT_EQ(s.details[0].standings[0].allocator, "a");
  EXPECT_EQ(s.details[1].standings[0].allocator, "b");
  const Ranking& time = headline(rec, Figure::time);
  EXPECT_EQ(time.what, "time (geomean of 2 phases' ops/s)");
  // a: sqrt(1 * 4) = 2 times the best's time; b: sqrt(2 * 1) = 1.41.
  EXPECT_EQ(time.standings[0].allocator, "b");
  EXPECT_NEAR(time.standings[0].spread.median, std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(time.standings[1].spread.median, 2.0, 1e-9);
}

TEST(Recommendation, TimeLeavesOutPhasesTooShortToTime) {
  // Phase p: one second, a twice b's rate (ops over wall). Phase s: under 10 ms for both, b ten times a's rate (a
  // few hundred µs is the machine's timer, not the allocator): ranked on its own, left out of the
  // headline, which says so. Phase t: 5 ms under a but 20 ms under b: timed (b really is slower).
  std::vector<json> records;
  for (int rep = 0; rep < 2; ++rep) {
    records.push_back(cell("a", rep, json::array({phase("p", 100, 50, 2000, 1.0), phase("s", 100, 50, 100, 0.001)})));
    records.push_back(cell("b", rep, json::array({phase("p", 100, 50, 1000, 1.0), phase("s", 100, 50, 1000, 0.0001)})));
  }
  Recommendation rec = recommend(Model::from_records(records));
  ASSERT_EQ(rec.scopes[0].details.size(), 2u);  // p and s, each ranked
  EXPECT_EQ(rec.scopes[0].details[1].standings[0].allocator, "b");
  const Ranking& time = headline(rec, Figure::time);
  EXPECT_EQ(time.what, "time (geomean of 1 phase's ops/s; 1 under 10 ms left out)");
  EXPECT_EQ(time.standings[0].allocator, "a");
  EXPECT_NEAR(time.standings[1].spread.median, 2.0, 1e-9);  // b: p alone

  records.clear();
  for (int rep = 0; rep < 2; ++rep) {
    records.push_back(cell("a", rep, json::array({phase("p", 100, 50, 2000, 1.0), phase("t", 100, 50, 1000, 0.005)})));
    records.push_back(cell("b", rep, json::array({phase("p", 100, 50, 1000, 2.0), phase("t", 100, 50, 250, 0.020)})));
  }
  rec = recommend(Model::from_records(records));
  EXPECT_EQ(headline(rec, Figure::time).what, "time (geomean of 2 phases' ops/s)");
}

TEST(Recommendation, TimeLeavesOutPhasesWhoseRateTheWorkloadFixes) {
  // rocksdb's q phases run for q_seconds beside rate-limited writers (its ops_per_s_not_a_speed):
  // b's 10x there must not make it the time leader; a is faster where the rate is a speed.
  std::vector<json> records;
  for (int rep = 0; rep < 3; ++rep)
    for (auto [allocator, load, query] : {std::tuple{"a", 2000.0, 100.0}, std::tuple{"b", 1000.0, 1000.0}})
      records.push_back(cell(allocator, rep,
                             json::array({phase("l.x", 100, 50, load + rep), phase("q100", 100, 50, query + rep)}), "rocksdb"));
  const Recommendation rec = recommend(Model::from_records(records));
  const Ranking time = headline(rec, Figure::time);
  EXPECT_EQ(time.what, "time (geomean of 1 phase's ops/s)");
  EXPECT_EQ(time.standings[0].allocator, "a");
  ASSERT_EQ(rec.scopes[0].details.size(), 1u);
  EXPECT_EQ(rec.scopes[0].details[0].what, "l.x");
}

TEST(Recommendation, RssPerLiveUnderTheFloorIsShownButNotRanked) {
  // Live bytes above the RSS: the workload never touched what it asked for.
  std::vector<json> records{one_phase("a", 0, 75, 1), one_phase("b", 0, 90, 1)};
  const Ranking& r = headline(recommend(Model::from_records(records)), Figure::rss_over_live);
  EXPECT_NE(r.not_ranked.find("under the floor of 1.0"), std::string::npos) << r.not_ranked;
  EXPECT_EQ(r.leader(), nullptr);
}

TEST(Recommendation, PercallIsRankedOnEachBenchmarksNsPerOp) {
  auto pc = [](const std::string& allocator, int rep, double small, double big) {
    json p = phase("malloc_free", 10, 0, 1e6);
    p["workload_metrics"] = {{"ns_per_op", {{"malloc_free_16", small}, {"malloc_free_4096", big}}}};
    return cell(allocator, rep, json::array({p}), "percall");
  };
  std::vector<json> records{pc("a", 0, 10, 100), pc("a", 1, 11, 101), pc("b", 0, 20, 50), pc("b", 1, 21, 51)};
  const Recommendation rec = recommend(Model::from_records(records));
  const ScopeRecommendation& s = rec.scopes[0];
  ASSERT_EQ(s.details.size(), 2u);
  EXPECT_EQ(s.details[0].figure, Figure::benchmark_ns_per_op);
  EXPECT_EQ(s.details[0].what, "malloc_free_16");
  EXPECT_EQ(s.details[0].standings[0].allocator, "a");
  EXPECT_EQ(s.details[1].standings[0].allocator, "b");
  EXPECT_EQ(headline(rec, Figure::time).what, "time (geomean of 2 benchmarks' ns/op)");
}

TEST(Recommendation, AcrossTheRunCountsWinsAndSaysHowSure) {
  std::vector<json> records;
  for (int rep = 0; rep < 2; ++rep)
    for (const char* w : {"w1", "w2"}) {
      records.push_back(cell("a", rep, json::array({phase("p", 100 + rep, 50, 10)}), w));
      records.push_back(cell("b", rep, json::array({phase("p", 150 + rep, 50, 10)}), w));
    }
  const Recommendation rec = recommend(Model::from_records(records));
  ASSERT_EQ(rec.scopes.size(), 2u);
  ASSERT_FALSE(rec.across.empty());
  const AcrossRanking& peak = rec.across[0];
  EXPECT_EQ(peak.figure, Figure::peak_rss);
  EXPECT_EQ(peak.standings[0].allocator, "a");
  EXPECT_EQ(peak.standings[0].best, 2u);
  EXPECT_EQ(peak.standings[0].clearly_best, 2u);
  EXPECT_EQ(peak.certainty, Certainty::clear);
  const std::string text = text::recommendation_text(rec, "DIR");
  EXPECT_NE(text.find("w1, 1 thread, 2 repetitions"), std::string::npos) << text;
  EXPECT_NE(text.find("peak RSS"), std::string::npos);
  EXPECT_NE(text.find("clear, by 50%"), std::string::npos) << text;
  EXPECT_NE(text.find("allocmark show DIR"), std::string::npos);

  // b clearly better on a third workload: each wins somewhere, which is not noise.
  for (int rep = 0; rep < 2; ++rep) {
    records.push_back(cell("a", rep, json::array({phase("p", 300 + rep, 50, 10)}), "w3"));
    records.push_back(cell("b", rep, json::array({phase("p", 100 + rep, 50, 10)}), "w3"));
  }
  const Recommendation mixed = recommend(Model::from_records(records));
  EXPECT_EQ(mixed.across[0].certainty, Certainty::mixed);
  EXPECT_NE(text::recommendation_text(mixed, "DIR").find("mixed: each clearly ahead somewhere"), std::string::npos);
}

namespace {

json program(const std::string& allocator, int rep, double peak_mib, double wall, json env = json::object(),
             const std::string& preload = "") {
  json p = phase("run", peak_mib * 1024 * 1024, 0, 0, wall);
  p.erase("peak_live_bytes");
  return cell(allocator, rep, json::array({p}), "program:tool", "ok", std::move(env), preload);
}

}  // namespace

TEST(Advice, ABackendBetterBeyondNoiseIsChosenWithItsSetting) {
  std::vector<json> records;
  for (int rep = 0; rep < 3; ++rep) {
    records.push_back(program("glibc", rep, 190 + rep, 1.0 + 0.01 * rep));
    records.push_back(program("jemalloc", rep, 150 + rep, 1.0 + 0.01 * rep, json::object(), "/lib/libjemalloc.so.2"));
    // Its own backend's figures: the variant beats nobody.
    records.push_back(program("jemalloc:bg", rep, 150 + rep, 1.0 + 0.01 * rep, {{"MALLOC_CONF", "background_thread:true"}},
                              "/lib/libjemalloc.so.2"));
  }
  const Advice a = advise(Model::from_records(records));
  EXPECT_EQ(a.backends, (std::vector<std::string>{"jemalloc", "glibc"}));
  EXPECT_EQ(a.default_allocator, "glibc");
  EXPECT_EQ(a.choice, "jemalloc");
  EXPECT_TRUE(a.variant_gains.empty());
  EXPECT_EQ(a.variants_without_gain, std::vector<std::string>{"jemalloc:bg"});
  const std::string text = render_advice(a);
  EXPECT_NE(text.find("setting: LD_PRELOAD=/lib/libjemalloc.so.2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("glibc 191.0 MiB +26.5% (clear)"), std::string::npos) << text;
  // The choice names what it wins on: 151 MiB against 191, 20.9% lower.
  EXPECT_NE(text.find("=> use jemalloc: peak RSS 20.9% lower than the default glibc's"), std::string::npos) << text;
}

TEST(Advice, NothingSeparableKeepsTheDefaultAndAWinningVariantIsNamedWithItsEnvironment) {
  std::vector<json> records;
  for (int rep = 0; rep < 3; ++rep) {
    // Overlapping ranges: noise.
    records.push_back(program("glibc", rep, 100 + 2 * rep, 1.0));
    records.push_back(program("jemalloc", rep, 101 + 2 * rep, 1.0, json::object(), "/lib/libjemalloc.so.2"));
  }
  Advice a = advise(Model::from_records(records));
  EXPECT_EQ(a.choice, "");
  const std::string text = render_advice(a);
  EXPECT_NE(text.find("=> keep the default (glibc)"), std::string::npos) << text;
  EXPECT_NE(text.find("setting: none"), std::string::npos) << text;

  // A glibc variant clearly below glibc: chosen, with the tunable it needs and no preload.
  for (int rep = 0; rep < 3; ++rep)
    records.push_back(program("glibc:trim", rep, 60 + rep, 1.0, {{"GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072"}}));
  a = advise(Model::from_records(records));
  EXPECT_EQ(a.choice, "glibc:trim");
  ASSERT_EQ(a.variant_gains.size(), 2u);  // peak and held RSS
  EXPECT_EQ(a.variant_gains[0].backend, "glibc");
  EXPECT_NE(render_advice(a).find("setting: GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072\n"), std::string::npos);
}

TEST(Advice, OneRepetitionSeparatesNothing) {
  const Advice a = advise(Model::from_records({program("glibc", 0, 200, 1), program("jemalloc", 0, 100, 1, json::object(), "/j.so")}));
  EXPECT_EQ(a.choice, "");
  EXPECT_NE(render_advice(a).find("one repetition each"), std::string::npos);
}

}  // namespace recommendation_test
