// `allocmark advise -- COMMAND ARGS`: runs the command as a program cell under every installed
// allocator and the standard variants (through `run`), then says which allocator gives the lowest
// peak RSS, which the shortest wall time, and which the best trade-off, with margins and spreads.
#include <filesystem>
#include <iostream>

#include "harness/matrix/plan.h"
#include "harness/cli/common.h"
#include "harness/cli/run.h"
#include "harness/matrix/config.h"
#include "harness/matrix/program.h"
#include "harness/results/advice.h"

namespace allocmark::cli {
namespace {

// The backends' plain configurations plus the variants a production service would try first
// (configs/variants.toml): glibc with fewer arenas and trimming, jemalloc's background purging,
// tcmalloc's release, mimalloc's eager commit. Backends that are not installed are skipped.
const std::vector<std::string> kStandardAllocators{"glibc",      "glibc:arena2",     "glibc:trim",
                                                   "jemalloc",   "jemalloc:bg",      "tcmalloc",
                                                   "tcmalloc:release", "mimalloc",   "mimalloc:eager", "numap"};

struct AdviseFlags {
  std::vector<std::string> command, allocators;
  int reps = 3;
  std::string out_dir;
  std::optional<double> timeout_s;
};

std::string program_name(const std::string& exe) {
  std::string name = std::filesystem::path(exe).filename().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return name.empty() ? "program" : name;
}

int advise(const AdviseFlags& a) {
  if (a.command.empty()) throw matrix::ConfigError("advise: no command given (allocmark advise -- COMMAND ARGS)");
  RunFlags f;
  f.programs = {program_name(a.command[0]) + "=" + matrix::join_command_words(a.command)};
  if (!a.allocators.empty()) {
    f.allocators_raw = a.allocators;
  } else {
    const matrix::MatrixFile variants = load_variants();
    for (const auto& name : kStandardAllocators) {
      try {
        matrix::resolve_allocator(name, variants.allocator_defs, "advise");
        f.allocators_raw.push_back(name);
      } catch (const matrix::ConfigError&) {
        // not installed here: compared among the others
      }
    }
  }
  f.reps = a.reps;
  f.timeout_s = a.timeout_s;
  f.out_dir = a.out_dir.empty() ? default_out_dir("advise-") : a.out_dir;
  f.out_given = true;
  f.command_line = command_line();
  int code = run_command(f);
  if (code != kExitOk && code != kExitCellsFailed) return code;
  results::Advice advice = results::advise(results::Model::load({f.out_dir}));
  std::cout << "\n" << results::render_advice(advice);
  return advice.any ? kExitOk : kExitCellsFailed;
}

}  // namespace

Subcommand add_advise_command(CLI::App& app) {
  auto a = std::make_shared<AdviseFlags>();
  auto* cmd = app.add_subcommand("advise", "run your program under every installed allocator and variant, then recommend one");
  cmd->add_option("--reps,-r", a->reps, "repetitions per allocator (default 3)")->check(CLI::Range(1, matrix::kMaxReps));
  cmd->add_option("--allocators,-a", a->allocators, "allocators or variants to compare, comma separated (default: the standard set)");
  cmd->add_option("--out,-o", a->out_dir, "results folder (default results/advise-<date-time>)");
  cmd->add_option("--timeout", a->timeout_s, "seconds before a run is killed and recorded as timeout (default 300)");
  cmd->add_option("command", a->command, "the program and its arguments, after --")->required();
  return {cmd, [a] { return advise(*a); }};
}

}  // namespace allocmark::cli
