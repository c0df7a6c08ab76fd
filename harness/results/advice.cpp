#include "harness/results/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

namespace allocmark::results {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The figures advise compares, each a spread of the candidate's and how it is written.
struct AdviceFigure {
  const char* what;
  Spread Candidate::*spread;
  std::string (*format)(double);
};
std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / kMiB); }
std::string secs(double s) { return s < 1 ? fmt::format("{:.3f} s", s) : fmt::format("{:.2f} s", s); }
const AdviceFigure kFigures[] = {{"peak RSS", &Candidate::peak_rss_bytes, mib},
                                 {"held RSS (end)", &Candidate::end_rss_bytes, mib},
                                 {"wall time", &Candidate::wall_s, secs}};

// How much lower a's median is than b's, as a fraction of a's ("b needs 22% more").
double gain(const Spread& a, const Spread& b) { return a.median > 0 ? b.median / a.median - 1 : 0.0; }

// a is better than b on this figure beyond noise and by enough to be worth a change.
bool beats(const Candidate& a, const Candidate& b, const AdviceFigure& f) {
  return separation(a.*f.spread, b.*f.spread, true) == Certainty::clear && gain(a.*f.spread, b.*f.spread) >= kWorthChanging;
}

// "+22% (clear)", "-3.1% (within noise)": b against a, with how sure.
std::string against(const Candidate& a, const Candidate& b, const AdviceFigure& f) {
  const Spread &sa = a.*f.spread, &sb = b.*f.spread;
  const double pct = sa.median > 0 ? 100 * (sb.median / sa.median - 1) : 0;
  Certainty c = pct >= 0 ? separation(sa, sb, true) : separation(sb, sa, true);
  return fmt::format("{:+.1f}% ({})", pct, certainty_name(c));
}

std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/=+@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The environment that runs a program as this cell ran: the preloaded library (none for glibc) and
// the variant's settings, as recorded.
std::string setting_of(const CellIdentity& id) {
  std::vector<std::string> words;
  if (!id.preload.empty()) words.push_back("LD_PRELOAD=" + shell_word(id.preload));
  if (id.env.is_object())
    for (const auto& [k, v] : id.env.items()) words.push_back(k + "=" + shell_word(v.is_string() ? v.get<std::string>() : v.dump()));
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace

const Candidate* Advice::candidate(const std::string& allocator) const {
  for (const auto& c : candidates)
    if (c.allocator == allocator) return &c;
  return nullptr;
}

namespace {

using WhyFailed = std::map<std::string, std::string>;  // allocator -> why it has no figures

// One candidate per allocator, its cells counted; `why` gets each one's first failure.
void gather_candidates(const Model& model, Advice& out, WhyFailed& why) {
  std::map<std::string, std::size_t> index;
  for (const auto& cell : model.cells()) {
    const CellIdentity& id = model.identity(cell);
    out.workload = id.workload;
    auto [it, fresh] = index.try_emplace(id.allocator, out.candidates.size());
    if (fresh) out.candidates.push_back(Candidate{id.allocator, id.backend, setting_of(id), id.env.is_object() && !id.env.empty()});
    Candidate& c = out.candidates[it->second];
    ++c.cells;
    if (cell.ok() && !cell.phases.empty()) ++c.ok;
    else if (!why.count(id.allocator)) why[id.allocator] = cell.status + (cell.error ? ": " + *cell.error : "");
  }
}

// The figures are the recommendation's: a program's time headline is its wall time.
void take_figures(Advice& out, WhyFailed& why) {
  const std::pair<Figure, Spread Candidate::*> from[] = {
      {Figure::peak_rss, &Candidate::peak_rss_bytes}, {Figure::held_rss, &Candidate::end_rss_bytes}, {Figure::time, &Candidate::wall_s}};
  for (auto& c : out.candidates) {
    bool complete = c.ok > 0;
    for (const auto& [figure, member] : from) {
      const Ranking* r = out.scope.find(figure);
      const Standing* st = nullptr;
      if (r)
        for (const auto& s : r->standings)
          if (s.allocator == c.allocator) st = &s;
      if (st) c.*member = st->spread;
      else complete = false;
    }
    if (!complete) {
      if (!why.count(c.allocator)) why[c.allocator] = "no peak RSS, end RSS or wall time recorded";
      c.ok = 0;
      out.failed.push_back(c.allocator + " (" + why[c.allocator] + ")");
      continue;
    }
    out.any = true;
  }
}

// The ok candidates that are no variant, by peak RSS; each ok variant learns its base backend.
std::vector<const Candidate*> plain_backends(Advice& out) {
  std::vector<const Candidate*> plain;
  for (auto& c : out.candidates) {
    if (!c.ok) continue;
    if (c.variant) {
      for (const auto& b : out.candidates)
        if (!b.variant && b.ok && b.backend == c.backend) c.base = b.allocator;
    } else {
      plain.push_back(&c);
    }
  }
  std::stable_sort(plain.begin(), plain.end(),
                   [](const Candidate* a, const Candidate* b) { return a->peak_rss_bytes.median < b->peak_rss_bytes.median; });
  for (const Candidate* c : plain) out.backends.push_back(c->allocator);
  return plain;
}

// Variants compete only where they beat their own backend: another backend's lead is not theirs.
std::vector<const Candidate*> options_of(Advice& out, const std::vector<const Candidate*>& plain) {
  std::vector<const Candidate*> options(plain.begin(), plain.end());
  for (const auto& c : out.candidates) {
    if (!c.ok || !c.variant) continue;
    const Candidate* base = out.candidate(c.base);
    bool any_gain = false;
    for (const auto& f : kFigures)
      if (base && beats(c, *base, f)) {
        out.variant_gains.push_back({c.allocator, base->allocator, f.what, gain(c.*f.spread, base->*f.spread)});
        any_gain = true;
      }
    if (any_gain || !base) options.push_back(&c);
    else out.variants_without_gain.push_back(c.allocator);
  }
  return options;
}

const Candidate* default_of(const std::vector<const Candidate*>& plain, const std::vector<const Candidate*>& options) {
  const Candidate* dflt = nullptr;
  for (const Candidate* c : plain)
    if (c->backend == "glibc") dflt = c;
  if (!dflt) dflt = plain.empty() ? options[0] : plain[0];
  return dflt;
}

// The first figure on which some option beats the default without being worse on another.
void choose(Advice& out, const std::vector<const Candidate*>& options, const Candidate* dflt) {
  for (const auto& f : kFigures) {
    const Candidate* best = nullptr;
    for (const Candidate* c : options) {
      if (c == dflt || !beats(*c, *dflt, f)) continue;
      bool worse = false;
      for (const auto& other : kFigures) worse = worse || beats(*dflt, *c, other);
      if (worse) continue;
      if (!best || (c->*f.spread).median < (best->*f.spread).median) best = c;
    }
    if (!best) continue;
    out.choice = best->allocator;
    out.choice_figure = f.what;
    out.choice_gain = gain(best->*f.spread, dflt->*f.spread);
    for (const auto& g : kFigures)
      out.reasons.push_back(fmt::format("{} {} against {}'s {}: {}", g.what, g.format((best->*g.spread).median), dflt->allocator,
                                        g.format((dflt->*g.spread).median), against(*dflt, *best, g)));
    return;
  }
}

// The closest contender on each figure, to show what "nothing separable" rests on.
void explain_no_choice(Advice& out, const std::vector<const Candidate*>& options, const Candidate* dflt) {
  for (const auto& f : kFigures) {
    const Candidate* best = nullptr;
    for (const Candidate* c : options)
      if (c != dflt && (!best || (c->*f.spread).median < (best->*f.spread).median)) best = c;
    if (best)
      out.reasons.push_back(fmt::format("{}: the best other, {}, is at {} against {}'s {}", f.what, best->allocator,
                                        against(*dflt, *best, f), dflt->allocator, f.format((dflt->*f.spread).median)));
  }
}

}  // namespace

Advice advise(const Model& model) {
  Advice out;
  const Recommendation rec = recommend(model);
  if (!rec.scopes.empty()) out.scope = rec.scopes[0];
  WhyFailed why;
  gather_candidates(model, out, why);
  take_figures(out, why);
  if (!out.any) return out;
  const std::vector<const Candidate*> plain = plain_backends(out);
  const std::vector<const Candidate*> options = options_of(out, plain);
  const Candidate* dflt = default_of(plain, options);
  out.default_allocator = dflt->allocator;
  choose(out, options, dflt);
  if (out.choice.empty()) explain_no_choice(out, options, dflt);
  return out;
}

std::vector<std::string> advice_lines(const Advice& a) {
  std::vector<std::string> lines;
  if (!a.any) return lines;
  std::size_t reps = 0;
  for (const auto& c : a.candidates) reps = std::max(reps, c.ok);
  if (reps < 2)
    lines.push_back("one repetition each: no spread to judge by, so no difference is separable from noise (--reps 3 gives one)");
  // The backends' real spread, each against the best on the figure.
  for (const auto& f : kFigures) {
    std::vector<const Candidate*> ranked;
    for (const auto& name : a.backends) ranked.push_back(a.candidate(name));
    std::stable_sort(ranked.begin(), ranked.end(),
                     [&](const Candidate* x, const Candidate* y) { return (x->*f.spread).median < (y->*f.spread).median; });
    if (ranked.empty()) continue;
    std::string line = fmt::format("backends by {}: {} {}", f.what, ranked[0]->allocator, f.format((ranked[0]->*f.spread).median));
    for (std::size_t i = 1; i < ranked.size(); ++i)
      line += fmt::format(", {} {} {}", ranked[i]->allocator, f.format((ranked[i]->*f.spread).median), against(*ranked[0], *ranked[i], f));
    lines.push_back(line);
  }
  for (const auto& g : a.variant_gains)
    lines.push_back(fmt::format("variant {} beats {} on {}: {:.1f}% less (clear: its repetitions are all better)", g.variant,
                                g.backend, g.what, 100 * g.gain / (1 + g.gain)));
  if (!a.variants_without_gain.empty()) {
    std::string tried;
    for (const auto& v : a.variants_without_gain) tried += (tried.empty() ? "" : ", ") + v;
    lines.push_back(fmt::format("no gain beyond noise and {:.0f}% over its own backend: {}", 100 * kWorthChanging, tried));
  }
  const Candidate* choice = a.choice.empty() ? a.candidate(a.default_allocator) : a.candidate(a.choice);
  if (a.choice.empty()) {
    lines.push_back(fmt::format("=> keep the default ({}): no allocator or variant is better by {:.0f}% beyond the repetitions' noise",
                                a.default_allocator, 100 * kWorthChanging));
  } else {
    // The figure it wins on first: a choice made on held RSS may cost a little peak RSS or time,
    // which the lines below it state.
    lines.push_back(fmt::format("=> use {}: {} {:.1f}% lower than the default {}'s, beyond the repetitions' noise; "
                                "no figure worse by {:.0f}% beyond noise",
                                a.choice, a.choice_figure, 100 * a.choice_gain / (1 + a.choice_gain), a.default_allocator,
                                100 * kWorthChanging));
  }
  for (const auto& r : a.reasons) lines.push_back("   " + r);
  lines.push_back(choice->setting.empty() ? fmt::format("setting: none ({} is what the program gets without LD_PRELOAD)", choice->allocator)
                                          : "setting: " + choice->setting);
  return lines;
}

std::string render_advice(const Advice& a) {
  std::string out = fmt::format("{}: {} allocators, medians over ok repetitions [min-max]\n\n", a.workload, a.candidates.size());
  out += fmt::format("  {:<18} {:>6}  {:>26}  {:>26}  {:>24}\n", "allocator", "ok", "peak RSS MiB", "held RSS MiB", "wall s");
  auto spread = [](const Spread& s, double scale, const char* f) {
    return fmt::format(fmt::runtime(f), s.median / scale, s.min / scale, s.max / scale);
  };
  for (const auto& c : a.candidates) {
    if (!c.ok) {
      out += fmt::format("  {:<18} {:>6}  {:>26}  {:>26}  {:>24}\n", c.allocator, fmt::format("0/{}", c.cells), "-", "-", "-");
      continue;
    }
    out += fmt::format("  {:<18} {:>6}  {:>26}  {:>26}  {:>24}\n", c.allocator, fmt::format("{}/{}", c.ok, c.cells),
                       spread(c.peak_rss_bytes, kMiB, "{:.1f} [{:.1f}-{:.1f}]"), spread(c.end_rss_bytes, kMiB, "{:.1f} [{:.1f}-{:.1f}]"),
                       spread(c.wall_s, 1, "{:.3f} [{:.3f}-{:.3f}]"));
  }
  if (!a.any) return out + "\nno allocator ran the program successfully: no recommendation\n";
  out += "\nrecommendation (clear: every repetition better; within noise: the ranges overlap):\n";
  for (const auto& l : advice_lines(a)) out += "  " + l + "\n";
  if (!a.failed.empty()) {
    out += "\nnot ok under:";
    for (const auto& f : a.failed) out += "\n  " + f;
    out += "\n";
  }
  return out;
}

}  // namespace allocmark::results
