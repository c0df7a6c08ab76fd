// `allocmark advise`: from a folder of one program's cells under several allocators, what to run it
// with, built on the recommendation (recommendation.h): the distinct backends at their defaults
// ranked first, on peak RSS, held RSS and wall time; a variant only where it beats its own backend
// beyond noise; then the choice against the default (glibc, what the program gets without a
// setting): another allocator only where it is better beyond the repetitions' noise and by at least
// kWorthChanging, else "keep the default"; and the exact setting that applies it.
#pragma once

#include <string>
#include <vector>

#include "harness/results/model.h"
#include "harness/results/recommendation.h"

namespace allocmark::results {

// A smaller difference is not worth changing an allocator for, however repeatable: it is within what
// the gate tolerates between two runs of the same code (docs/gate.md).
inline constexpr double kWorthChanging = 0.05;

struct Candidate {
  std::string allocator;   // the model's label
  std::string backend;
  std::string setting;     // what applies it: "LD_PRELOAD=... MALLOC_CONF=...", "" for plain glibc
  bool variant = false;    // has settings of its own (an environment) on top of its backend
  std::string base;        // a variant's plain backend among the candidates ("" if none ran)
  std::size_t ok = 0, cells = 0;  // repetitions recorded ok, of all recorded
  Spread peak_rss_bytes, end_rss_bytes, wall_s;  // over the ok repetitions (whole cell)
};

// A variant that beats its own backend beyond noise, on one figure.
struct VariantGain {
  std::string variant, backend, what;  // what: the figure ("held RSS (end)")
  double gain = 0;                     // the backend's median / the variant's - 1
};

struct Advice {
  std::string workload;
  std::vector<Candidate> candidates;  // every allocator, in recorded order
  std::vector<std::string> failed;    // allocators without an ok repetition, with why
  ScopeRecommendation scope;          // the recommendation's ranking of the program's cells
  std::vector<std::string> backends;  // the plain backends that ran ok, by peak RSS
  std::vector<VariantGain> variant_gains;
  std::vector<std::string> variants_without_gain;  // tried, beat nothing beyond noise
  std::string default_allocator;      // glibc when it ran, else the first backend
  std::string choice;                 // "" : keep the default
  std::string choice_figure;          // what the choice wins on ("held RSS (end)"), with its gain over the default
  double choice_gain = 0;             // the default's median / the choice's - 1
  std::vector<std::string> reasons;   // why the choice (or why nothing beats the default), each with its certainty
  bool any = false;                   // false: no allocator had an ok repetition
  const Candidate* candidate(const std::string& allocator) const;
};

Advice advise(const Model& model);

// The recommendation as advise prints it: the candidates' table, the backends' spread per figure,
// the variants worth their setting, the choice with its noise caveat and the setting to apply. Every
// line that compares says how sure it is.
std::vector<std::string> advice_lines(const Advice& advice);
std::string render_advice(const Advice& advice);

}  // namespace allocmark::results
