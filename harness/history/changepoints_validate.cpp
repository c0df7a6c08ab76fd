// The change-point validation of docs/validation.md ("Change points in a history (issue 44)"):
// histories of 100 commits built by resampling real repetitions of peak_rss_bytes from a results
// folder's results.jsonl, with steps and drifts planted at known commits, run through
// find_change_points many times. Run by hand (`cmake --build build --target changepoints_validate`):
//   changepoints_validate RESULTS.jsonl [--trials N] [--seed S]
// It prints the noise of the repetitions it read and one markdown table.
//
// The noise is each repetition's relative deviation from its cell's median, one cell per series:
// run-to-run noise as this machine really makes it, with its tails and modes (jemalloc's peak RSS
// here falls in two modes about 1% apart). Peak RSS repeats to hundredths of a percent within a
// mode, so the same deviations are also scaled up to the 1% spread the goal names, keeping
// their shape: to a relative standard deviation of 1% for every cell, and to a relative MAD of 1%
// for the cells with one mode (scaling a two-mode cell by its MAD would put its modes 10-25% apart).
#include "harness/history/changepoints.h"
#include "harness/record/cell.h"
#include "harness/record/record_keys.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using allocmark::history::ChangePoint;
using allocmark::history::SeriesPoint;

constexpr std::size_t kCommits = 100;
constexpr long kWithin = 5;  // the goal: found within 5 commits of where it was planted

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double relative_sd(const std::vector<double>& v) {
  double mean = 0, square = 0;
  for (double x : v) mean += x / double(v.size());
  for (double x : v) square += (x - mean) * (x - mean) / double(v.size());
  return std::sqrt(square) / mean;
}

double relative_mad(const std::vector<double>& v) {
  const double m = median(v);
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::fabs(x - m));
  return median(dev) / m;
}

// One cell's repetitions as deviations from their median; a series resamples one cell only, so
// it keeps that cell's shape (glibc's repetitions are near identical, jemalloc's have tails).
struct CellNoise {
  std::string cell;
  std::vector<double> residuals;
  double relative_mad, relative_sd;
  bool one_mode() const { return relative_sd < 3 * relative_mad; }  // normal: sd = 1.48 MAD
};
using Noise = std::vector<CellNoise>;

[[noreturn]] void bad_input(const std::string& message) {
  std::cerr << "changepoints_validate: " << message << "\n";
  std::exit(2);
}

Noise read_noise(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad_input("cannot read " + path);
  std::map<std::string, std::vector<double>> cells;
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    using allocmark::record::kRecordPeakRssBytes;
    if (record.is_discarded() || record.value(allocmark::record::kRecordStatus, "") != "ok" || !record.contains(kRecordPeakRssBytes))
      continue;
    // The cell as the record's codec reads it (leniently: a hand-written record may leave fields out).
    const allocmark::record::Cell c = allocmark::record::cell_of_record(record);
    const std::string cell = c.allocator.name + " " + c.workload + " t" + std::to_string(c.threads);
    cells[cell].push_back(record[kRecordPeakRssBytes].get<double>());
  }
  Noise noise;
  for (const auto& [cell, values] : cells) {
    if (values.size() < 5) continue;  // too few repetitions to say how they spread
    const double m = median(values);
    CellNoise c{cell, {}, relative_mad(values), relative_sd(values)};
    for (double v : values) c.residuals.push_back(v / m - 1);
    noise.push_back(std::move(c));
  }
  if (noise.empty()) bad_input(path + " has no cell with 5 or more ok repetitions of peak_rss_bytes");
  return noise;
}

// levels[i] times (1 + a resampled real deviation x scale), `reps` times per commit.
std::vector<SeriesPoint> make_series(const std::vector<double>& levels, const std::vector<double>& residuals,
                                     double scale, int reps, std::mt19937_64& random) {
  std::uniform_int_distribution<std::size_t> pick(0, residuals.size() - 1);
  std::vector<SeriesPoint> series;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    SeriesPoint point{std::to_string(i), {}};
    point.commit.insert(0, 1, 'c');  // not "c" + ...: GCC 12 warns falsely (-Wrestrict) at -O2
    for (int r = 0; r < reps; ++r) point.values.push_back(1e8 * levels[i] * (1 + scale * residuals[pick(random)]));
    series.push_back(std::move(point));
  }
  return series;
}

struct Tally {
  int trials = 0, found = 0;
  long location_error_sum = 0, location_error_max = 0;
  int others = 0;           // change points away from any planted change
  int inside = 0;           // change points at the planted change (a drift may get several)
  int covered = 0;          // steps: the nearest change point's 95% interval holds the planted size
  double reported_sum = 0;  // drifts: the steps found inside, compounded
};

struct Scenario {
  std::string name;
  double step = 0;                 // a step's size, or a drift's per commit
  std::size_t drift_commits = 0;   // 0: a step
  std::size_t at = 0;              // a step at this commit (0: anywhere in 15-85), e.g. 95: 5 commits after it
};

// Where the change is planted: a step anywhere between commits 15 and 85, a drift from commit 30.
std::vector<double> plant(const Scenario& s, std::size_t& from, std::size_t& to, std::mt19937_64& random) {
  std::vector<double> levels(kCommits, 1.0);
  if (s.step == 0) return levels;
  if (s.drift_commits == 0) {
    from = to = s.at ? s.at : std::uniform_int_distribution<std::size_t>(15, 85)(random);
    for (std::size_t i = from; i < kCommits; ++i) levels[i] = 1 + s.step;
    return levels;
  }
  from = 30;
  to = from + s.drift_commits;
  for (std::size_t i = from; i < kCommits; ++i) levels[i] = 1 + s.step * double(std::min(i + 1 - from, s.drift_commits));
  return levels;
}

void count(const Scenario& s, const std::vector<ChangePoint>& points, std::size_t from, std::size_t to, Tally& t) {
  ++t.trials;
  long best = -1;
  double compounded = 1;
  bool holds = false;
  for (const auto& cp : points) {
    const long i = long(cp.index);
    const long error = i < long(from) ? long(from) - i : (i > long(to) ? i - long(to) : 0);
    if (s.step == 0 || error > kWithin) { ++t.others; continue; }
    compounded *= 1 + cp.relative_step;
    ++t.inside;
    if (best < 0 || error < best) {
      best = error;
      holds = cp.ci_low <= s.step && s.step <= cp.ci_high;
    }
  }
  if (best < 0) return;
  ++t.found;
  t.covered += holds && s.drift_commits == 0;
  t.location_error_sum += best;
  t.location_error_max = std::max(t.location_error_max, best);
  t.reported_sum += compounded - 1;
}

// How a row's series are made: the cells' own deviations, or scaled to a relative spread.
struct NoiseSet {
  const char* name;
  enum { kReal, kSd, kMad } measure;
  double spread;
  int reps;
  // The comparison behind changepoints.cpp's choice of per-commit medians: a shift shared by one
  // commit's repetitions (relative sd; a commit built or measured on another day moves them all),
  // and the statistic run on every repetition as its own point, repetitions permuted one by one.
  double commit_shift = 0;
  bool every_repetition = false;
};

// Each repetition its own point, min_segment spanning the same commits; indices back in commits.
std::vector<ChangePoint> per_repetition(const std::vector<SeriesPoint>& series, int reps,
                                        allocmark::history::ChangePointOptions options) {
  std::vector<SeriesPoint> points;
  for (const auto& commit : series)
    for (double v : commit.values) points.push_back({commit.commit, {v}});
  options.min_segment *= std::size_t(reps);
  auto found = allocmark::history::find_change_points(points, options);
  for (auto& cp : found) cp.index = (cp.index + std::size_t(reps) / 2) / std::size_t(reps);
  return found;
}

void shift_commits(std::vector<SeriesPoint>& series, double shift, std::mt19937_64& random) {
  std::normal_distribution<double> normal(0.0, shift);
  for (auto& commit : series) {
    const double factor = 1 + normal(random);
    for (double& v : commit.values) v *= factor;
  }
}

// Trial k resamples the k-th usable cell in turn (a cell whose repetitions are all equal has no
// shape to scale and keeps its own; one with two modes is not scaled by its MAD).
Tally run_trials(const Scenario& s, const Noise& all, const NoiseSet& set, int trials, std::uint64_t seed) {
  Noise noise;
  for (const auto& c : all)
    if (set.measure != NoiseSet::kMad || c.one_mode()) noise.push_back(c);
  const int reps = set.reps;
  std::mt19937_64 random(seed);
  Tally tally;
  for (int k = 0; k < trials; ++k) {
    std::size_t from = 0, to = 0;
    const auto levels = plant(s, from, to, random);
    const CellNoise& cell = noise[std::size_t(k) % noise.size()];
    const double measured = set.measure == NoiseSet::kSd ? cell.relative_sd : cell.relative_mad;
    const double scale = set.measure != NoiseSet::kReal && measured > 0 ? set.spread / measured : 1.0;
    auto series = make_series(levels, cell.residuals, scale, reps, random);
    if (set.commit_shift > 0) shift_commits(series, set.commit_shift, random);
    allocmark::history::ChangePointOptions options;
    options.seed = seed + std::uint64_t(k);
    count(s, set.every_repetition ? per_repetition(series, reps, options)
                                  : allocmark::history::find_change_points(series, options), from, to, tally);
  }
  return tally;
}

void print_row(const std::string& noise, int reps, const Scenario& s, const Tally& t) {
  const double per_100 = 100.0 * t.others / (double(t.trials) * (double(kCommits) / 100));
  std::printf("| %s | %d | %s | ", noise.c_str(), reps, s.name.c_str());
  if (s.step == 0) {
    std::printf("- | - | - | - | - | %.2f |\n", per_100);
    return;
  }
  const double mean_error = t.found ? double(t.location_error_sum) / t.found : 0;
  std::printf("%d/%d (%.1f%%) | %.2f / %ld | %.2f | %+.1f%% | %s | %.2f |\n", t.found, t.trials, 100.0 * t.found / t.trials,
              mean_error, t.location_error_max, t.found ? double(t.inside) / t.found : 0.0,
              t.found ? 100 * t.reported_sum / t.found : 0.0,
              s.drift_commits ? "-" : (std::to_string(t.found ? 100 * t.covered / t.found : 0) + "%").c_str(), per_100);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) bad_input("usage: changepoints_validate RESULTS.jsonl [--trials N] [--seed S]");
  int trials = 200;
  std::uint64_t seed = 1;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 == argc) bad_input(flag + " needs a value");
    if (flag == "--trials") trials = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else bad_input("unknown option " + flag);
  }
  const Noise noise = read_noise(argv[1]);
  for (const auto& c : noise)
    std::printf("repetitions of %s: %zu, relative MAD %.4f%%, relative sd %.4f%%%s\n", c.cell.c_str(),
                c.residuals.size(), 100 * c.relative_mad, 100 * c.relative_sd, c.one_mode() ? "" : " (two modes)");
  const std::vector<Scenario> scenarios = {{"clean", 0, 0},          {"+2% step", 0.02, 0}, {"+3% step", 0.03, 0},
                                           {"+5% step", 0.05, 0},    {"+10% step", 0.10, 0},
                                           {"drift +0.5%/commit x 20", 0.005, 20}, {"drift +0.1%/commit x 50", 0.001, 50},
                                           {"+3% step at commit 95 (5 after it)", 0.03, 0, 95},
                                           {"+3% step at commit 97 (3 after it)", 0.03, 0, 97}};
  std::printf("\n| noise | reps | planted | found within %ld commits | location error mean / max | changes there | reported (compounded) | 95%% CI holds the step | other changes per 100 commits |\n", kWithin);
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  const NoiseSet sets[] = {{"real", NoiseSet::kReal, 0, 5},
                           {"real, scaled to 1% sd", NoiseSet::kSd, 0.01, 5},
                           {"real, scaled to 1% sd", NoiseSet::kSd, 0.01, 3},
                           {"real one-mode cells, scaled to 1% MAD", NoiseSet::kMad, 0.01, 5}};
  for (const auto& set : sets)
    for (const auto& s : scenarios) print_row(set.name, set.reps, s, run_trials(s, noise, set, trials, seed));
  // The choice of medians, on the clean series and the goal's step only (every repetition costs
  // (commits x reps)^2 per split).
  const NoiseSet choice[] = {
      {"1% sd, every repetition a point", NoiseSet::kSd, 0.01, 5, 0, true},
      {"1% sd + 0.5% sd per commit, medians", NoiseSet::kSd, 0.01, 5, 0.005, false},
      {"1% sd + 0.5% sd per commit, every repetition a point", NoiseSet::kSd, 0.01, 5, 0.005, true}};
  for (const auto& set : choice)
    for (std::size_t i : {0, 2}) print_row(set.name, set.reps, scenarios[i], run_trials(scenarios[i], noise, set, trials, seed));
  return 0;
}
