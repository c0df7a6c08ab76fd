// `allocmark run`: its flags, the plan they describe, and a run session (harness/runner/session.h)
// that checks every allocator library and runs the cells into a results folder.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>

#include "harness/cli/run.h"
#include "harness/cli/common.h"
#include "harness/matrix/plan.h"
#include "harness/runner/session.h"
#include "workloads/workload.h"

namespace allocmark::cli {
namespace {

namespace mx = allocmark::matrix;
namespace rn = allocmark::runner;

// The matrix file, in configs/, that a `run` with neither a matrix file nor an axis flag runs.
constexpr const char* kPlainMatrix = "quick.toml";

std::string plain_matrix_path() { return mx::config_dir() + "/" + kPlainMatrix; }

// How a help text shows a value.
std::string help_value(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::vector<int> parse_threads(const std::vector<std::string>& raw) {
  std::vector<int> out;
  for (const auto& t : split_commas(raw, "--threads")) {
    try {
      std::size_t used = 0;
      int v = std::stoi(t, &used);
      if (used != t.size() || v < 1) throw std::invalid_argument(t);
      out.push_back(v);
    } catch (const std::exception&) {
      throw mx::ConfigError("--threads: '" + t + "' is not a positive integer");
    }
  }
  return out;
}

// A run estimated longer than this asks first (or needs --yes, or [matrix] expect_hours).
constexpr double kAskAboveSeconds = 3600;
// More cells than this is no plausible matrix (reps 10000 over a few axes): refused outright.
constexpr std::size_t kMaxPlannedCells = 100000;

std::string duration_text(double seconds) {
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 5400) return fmt::format("{:.0f} min", seconds / 60);
  if (seconds < 48 * 3600) return fmt::format("{:.1f} h", seconds / 3600);
  return fmt::format("{:.1f} days", seconds / 86400);
}

// The plan's length by the catalogue's typical cell times (workloads::typical_cell_seconds).
struct RunEstimate {
  double seconds = 0;
  std::size_t unknown = 0;  // cells of programs, traces and diagnostics: no typical time
  std::string text;          // "80000 cells, about 12.5 days by ..."
};

RunEstimate estimate_run(const mx::Plan& plan) {
  RunEstimate e;
  for (const auto& c : plan.cells) {
    const double s = workloads::typical_cell_seconds(c.workload).at(plan.settings.size);
    if (s > 0) e.seconds += s;
    else ++e.unknown;
  }
  e.text = fmt::format("{} cells at size {}, about {} by the catalogue's typical cell times (docs/workloads.md)",
                       plan.cells.size(), plan.settings.size, duration_text(e.seconds));
  if (e.unknown) e.text += fmt::format(", {} of them (programs, traces, diagnostics) not counted", e.unknown);
  return e;
}

// Before a long matrix starts: goes on with --yes, with an estimate within the file's
// expect_hours, or when a person at a terminal says so; otherwise a ConfigError with the estimate.
void confirm_long_run(const mx::Plan& plan, const RunEstimate& e, bool yes) {
  if (plan.cells.size() > kMaxPlannedCells)
    throw mx::ConfigError(fmt::format("the matrix plans {} cells, more than the {} any run takes; fewer reps, "
                                      "allocators, workloads or threads",
                                      plan.cells.size(), kMaxPlannedCells));
  if (plan.expect_hours) {
    if (e.seconds <= *plan.expect_hours * 3600) {
      if (e.seconds > kAskAboveSeconds)
        std::cerr << fmt::format("allocmark: the matrix plans {}; starting (expect_hours = {:g})\n", e.text, *plan.expect_hours);
      return;
    }
    throw mx::ConfigError(fmt::format("{}: 'expect_hours' is {:g}, but the matrix plans {}; raise it, or shrink the matrix",
                                      plan.expect_hours_origin, *plan.expect_hours, e.text));
  }
  if (e.seconds <= kAskAboveSeconds) return;
  if (yes) {
    std::cerr << "allocmark: the matrix plans " << e.text << "; starting (--yes)\n";
    return;
  }
  if (::isatty(0) && ::isatty(2)) {
    std::cerr << "allocmark: the matrix plans " << e.text << ". Start it? [y/N] " << std::flush;
    std::string answer;
    std::getline(std::cin, answer);
    if (answer == "y" || answer == "Y" || answer == "yes") return;
    throw mx::ConfigError("not started");
  }
  throw mx::ConfigError("the matrix plans " + e.text + ": over an hour, and no one is at a terminal to say go on; add --yes, "
                        "or [matrix] expect_hours = HOURS to the matrix file, to start it unattended");
}

}  // namespace

mx::Plan make_run_plan(const RunFlags& f, std::string& matrix_path, std::optional<std::string> cells_machine_thp,
                       const std::string& cells_machine) {
  bool axis_flags = !f.allocators_raw.empty() || !f.workloads_raw.empty() || !f.threads_raw.empty() || !f.programs.empty();
  std::optional<mx::MatrixFile> file;
  matrix_path = f.matrix_path;
  if (matrix_path.empty() && !axis_flags) matrix_path = plain_matrix_path();
  if (!matrix_path.empty()) file = mx::load_matrix_file(matrix_path);
  mx::Overrides o;
  if (!f.allocators_raw.empty()) o.allocators = split_commas(f.allocators_raw, "--allocators");
  if (!f.workloads_raw.empty()) o.workloads = split_commas(f.workloads_raw, "--workloads");
  if (!f.threads_raw.empty()) o.threads = parse_threads(f.threads_raw);
  if (!f.thp_raw.empty()) o.thp = split_commas(f.thp_raw, "--thp");
  static_cast<mx::SettingChoices&>(o) = setting_choices(f.settings);
  if (f.no_pin && o.pin && *o.pin != "none") throw mx::ConfigError("--no-pin and --pin " + *o.pin + ": choose one (--no-pin is --pin none)");
  if (f.no_pin) o.pin = "none";
  o.sets = f.sets;
  o.programs = f.programs;
  o.cells_machine_thp = std::move(cells_machine_thp);
  o.cells_machine = cells_machine;
  // A release named NAME@VERSION and not built yet is built before the first cell (docs/versions.md).
  o.releases.build = !f.no_build && !f.dry_run;
  o.releases.progress = &std::cerr;
  o.releases.refusal = f.no_build ? ", or drop --no-build" : f.dry_run ? " (a run without --dry-run builds it first)" : "";
  return mx::build_plan(file, load_variants(), o);
}

std::string default_out_dir(const char* prefix) {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return std::string("results/") + prefix + buf;
}

int run_command(const RunFlags& f) {
  std::string matrix_path;
  mx::Plan plan = f.system_thp.empty() ? make_run_plan(f, matrix_path)
                                       : make_run_plan(f, matrix_path, f.system_thp, "this machine once --system-thp " + f.system_thp + " set it");
  for (const auto& n : plan.notes) std::cerr << "allocmark: " << n << "\n";
  const RunEstimate estimate = estimate_run(plan);
  if (!f.dry_run) confirm_long_run(plan, estimate, f.yes);
  rn::SessionOptions options;
  options.out_dir = f.out_dir.empty() && !f.out_given ? default_out_dir("") : f.out_dir;
  options.matrix_path = matrix_path;
  options.command = f.command_line;
  options.worker = worker_path();
  options.resume = f.resume;
  options.extend = f.extend;
  options.discard_corrupt = f.discard_corrupt;
  options.retry_failed = f.retry_failed;
  options.executor = rn::ExecutorChoice({f.executor, f.slurm_opts, f.cells_per_task, f.no_wait});
  options.system_thp = f.system_thp;
  rn::RunSession session(plan, std::move(options));

  if (f.dry_run) {
    std::cout << plan.cells.size() << " cells (" << plan.settings.size << " size, timeout " << plan.settings.timeout_s << " s):\n";
    std::cout << "estimate: " << estimate.text << "\n";
    for (const auto& c : plan.cells) std::cout << "  " << c.label() << "\n";
    return kExitOk;
  }

  if (f.resume && f.extend) throw mx::ConfigError("--resume and --extend: choose one (--extend also completes missing cells)");
  if (f.retry_failed && !f.resume && !f.extend) throw mx::ConfigError("--retry-failed: needs --resume or --extend");
  if (f.discard_corrupt && !f.resume && !f.extend) throw mx::ConfigError("--discard-corrupt-lines: needs --resume or --extend");
  rn::SessionOutcome outcome = session.run();
  std::cout << rn::session_summary(outcome, std::cerr, f.print_recommendation);
  if (outcome.returned_early) return kExitOk;
  if (outcome.report.interrupted) return kExitInterrupted;
  // The exit code tells the folder's state for this matrix, not only this invocation's cells.
  return outcome.report.not_ok_in_folder ? kExitCellsFailed : kExitOk;
}

void add_setting_flags(CLI::App* cmd, SettingTexts& texts, const std::vector<std::string>& keys, const mx::MatrixFile* plain) {
  const mx::Settings defaults;
  for (const auto& row : mx::setting_rows()) {
    if (!*row.flag || (!keys.empty() && std::find(keys.begin(), keys.end(), row.key) == keys.end())) continue;
    const std::string key = row.key;
    if (row.kind == mx::SettingKind::Bool) {  // the flag says the opposite of the default
      const std::string given = row.get(defaults).get<bool>() ? "false" : "true";
      cmd->add_flag_callback(row.flag, [&texts, key, given] { texts[key] = given; }, row.help);
      continue;
    }
    std::string help = row.help;
    if (row.kind != mx::SettingKind::Text) {
      // A matrix file's value wins over the table's default, and a plain `run` reads one.
      const nlohmann::json named = plain && (row.scope & mx::kMatrixKey) ? row.chosen(*plain) : nlohmann::json();
      help += " (default " + help_value(row.get(defaults));
      if (plain && (row.scope & mx::kMatrixKey)) help += std::string(", or the matrix file's ") + row.key;
      if (!named.is_null()) help += fmt::format("; configs/{}, which a plain `run` runs: {}", kPlainMatrix, help_value(named));
      help += ")";
    }
    cmd->add_option_function<std::string>(row.flag, [&texts, key](const std::string& text) { texts[key] = text; }, help);
  }
}

mx::SettingChoices setting_choices(const SettingTexts& texts) {
  mx::SettingChoices out;
  for (const auto& [key, text] : texts) {
    const mx::SettingRow& row = *mx::find_setting(key);
    row.choose(out, mx::setting_from_flag(row, text));
  }
  return out;
}

void add_run_flags(CLI::App* run_cmd, RunFlags& f) {
  // For the help's defaults only; a `run` that reads it says what is wrong with it.
  std::optional<mx::MatrixFile> plain;
  try {
    plain = mx::load_matrix_file(plain_matrix_path());
  } catch (const std::exception&) {
  }
  run_cmd->add_option("matrix", f.matrix_path,
                      fmt::format("matrix file (TOML); default configs/{} when no axis flag is given", kPlainMatrix));
  run_cmd->add_option("--allocators,-a", f.allocators_raw, "allocators or variants, comma separated (e.g. glibc,jemalloc:bg)");
  run_cmd->add_option("--workloads,-w", f.workloads_raw, "workloads, comma separated; " + std::string(mx::kProgramPrefix) + "NAME picks one of the matrix's programs");
  std::string plain_threads;
  if (plain && !plain->threads.empty()) plain_threads = fmt::format("; configs/{}, which a plain `run` runs: {}", kPlainMatrix,
                                                                    help_value(nlohmann::json(plain->threads)));
  run_cmd->add_option("--threads,-t", f.threads_raw,
                      "thread counts, comma separated (default 1,2, or the matrix file's threads" + plain_threads + ")");
  run_cmd->add_option("--thp", f.thp_raw,
                      "transparent huge page modes to cross every allocator with, comma separated (never: per cell, by "
                      "PR_SET_THP_DISABLE; madvise or always: only the machine's own mode; default: the machine's, no axis)");
  run_cmd->add_option("--system-thp", f.system_thp,
                      "set the WHOLE MACHINE's transparent huge page mode (/sys/kernel/mm/transparent_hugepage/enabled) "
                      "to always, madvise or never while the run lasts, put back however it ends (root; docs/usage.md)")
      ->check(CLI::IsMember({"always", "madvise", "never"}));
  run_cmd->add_option("--program", f.programs,
                      "run your own program as a cell's workload: NAME='COMMAND ARGS' (repeatable; docs/programs.md)");
  run_cmd->add_option("--set", f.sets, "override a workload parameter: workload.param=value (repeatable)");
  run_cmd->add_option("--out,-o", f.out_dir, "results folder (default results/<date-time>)")
      ->each([&f](const std::string&) { f.out_given = true; });
  add_setting_flags(run_cmd, f.settings, {}, plain ? &*plain : nullptr);
  run_cmd->add_flag("--no-pin", f.no_pin, "the same as --pin none");
  run_cmd->add_flag("--resume", f.resume, "complete an existing results folder of the same matrix: run only the cells it lacks");
  run_cmd->add_flag("--extend", f.extend, "add this matrix's cells to an existing results folder of another matrix (same machine)");
  run_cmd->add_flag("--retry-failed", f.retry_failed, "with --resume/--extend: also rerun cells recorded as failed, crashed or timeout");
  run_cmd->add_flag("--discard-corrupt-lines", f.discard_corrupt,
                    "with --resume/--extend: move invalid lines of results.jsonl to results.corrupt.jsonl instead of stopping");
  run_cmd->add_flag("--no-build", f.no_build,
                    "refuse an allocator release (NAME@VERSION) that is not built yet instead of building it from its "
                    "source first (allocmark build; docs/versions.md)");
  run_cmd->add_flag("--dry-run", f.dry_run, "check the matrix and list its cells and the estimate of its length without running them");
  run_cmd->add_flag("--yes", f.yes,
                    "start a matrix estimated over an hour without asking (elsewhere than at a terminal it is refused "
                    "without this or the matrix file's expect_hours)");
  run_cmd->add_option("--executor", f.executor, "where cells run: local (one after another on this host) or slurm (one sbatch job array)")
      ->check(CLI::IsMember({"local", "slurm"}));
  run_cmd->add_option("--slurm-opt", f.slurm_opts, "with --executor slurm: sbatch options, e.g. \"--partition=p --time=2:00:00 --exclusive\" (repeatable)");
  run_cmd->add_option("--cells-per-task", f.cells_per_task, "with --executor slurm: cells each array task runs, one after another (default 1)");
  run_cmd->add_flag("--no-wait", f.no_wait, "with --executor slurm: return after submitting the array (`allocmark status DIR` follows it)");
}

Subcommand add_run_command(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  auto* run_cmd = app.add_subcommand("run", "run a matrix: allocator x workload x threads x repetitions");
  add_run_flags(run_cmd, *f);
  return {run_cmd, [f] {
            f->command_line = command_line();
            return run_command(*f);
          }};
}

}  // namespace allocmark::cli
