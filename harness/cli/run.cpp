// `allocmark run`: its flags, the plan they describe, and a run session (harness/runner/session.h)
// that checks every allocator library and runs the cells into a results folder.
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <iostream>
#include <memory>
#include <optional>

#include "harness/cli/run.h"
#include "harness/cli/common.h"
#include "harness/matrix/plan.h"
#include "harness/runner/session.h"

namespace allocmark::cli {
namespace {

namespace mx = allocmark::matrix;
namespace rn = allocmark::runner;

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

// Checked here rather than by CLI11 so that "-1" and "1.5" get the same message as the file key.
int parse_latency_every(const std::string& text) {
  try {
    std::size_t used = 0;
    long v = std::stol(text, &used);
    if (used == text.size() && v >= 0 && v <= mx::kMaxLatencyEvery) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw mx::ConfigError("--latency-every: '" + text + "' is not an integer in 0.." + std::to_string(mx::kMaxLatencyEvery) +
                        " (time one allocation call in N; 0 turns timing off)");
}

}  // namespace

mx::Plan make_run_plan(const RunFlags& f, std::string& matrix_path) {
  bool axis_flags = !f.allocators_raw.empty() || !f.workloads_raw.empty() || !f.threads_raw.empty() || !f.programs.empty();
  std::optional<mx::MatrixFile> file;
  matrix_path = f.matrix_path;
  if (matrix_path.empty() && !axis_flags) matrix_path = mx::config_dir() + "/quick.toml";
  if (!matrix_path.empty()) {
    struct stat st {};
    if (::stat(matrix_path.c_str(), &st) != 0 || ::access(matrix_path.c_str(), R_OK) != 0)
      throw mx::ConfigError(matrix_path + ": cannot read the matrix file");
    if (!S_ISREG(st.st_mode)) throw mx::ConfigError(matrix_path + ": is not a file (expected a matrix .toml file)");
    file = mx::load_matrix_file(matrix_path);
  }
  mx::Overrides o;
  if (!f.allocators_raw.empty()) o.allocators = split_commas(f.allocators_raw, "--allocators");
  if (!f.workloads_raw.empty()) o.workloads = split_commas(f.workloads_raw, "--workloads");
  if (!f.threads_raw.empty()) o.threads = parse_threads(f.threads_raw);
  o.reps = f.reps;
  o.size = f.size;
  o.timeout_s = f.timeout_s;
  o.sample_ms = f.sample_ms;
  if (f.latency_every) o.latency_every = parse_latency_every(*f.latency_every);
  if (f.no_node_figures) o.node_figures = false;
  if (f.no_pin && f.pin && *f.pin != "none") throw mx::ConfigError("--no-pin and --pin " + *f.pin + ": choose one (--no-pin is --pin none)");
  o.pin = f.no_pin ? std::optional<std::string>("none") : f.pin;
  o.nodes = f.nodes;
  o.sets = f.sets;
  o.programs = f.programs;
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
  mx::Plan plan = make_run_plan(f, matrix_path);
  for (const auto& n : plan.notes) std::cerr << "allocmark: " << n << "\n";
  rn::SessionOptions options;
  options.out_dir = f.out_dir.empty() && !f.out_given ? default_out_dir("") : f.out_dir;
  options.matrix_path = matrix_path;
  options.command = f.command_line;
  options.worker = worker_path();
  options.resume = f.resume;
  options.extend = f.extend;
  options.discard_corrupt = f.discard_corrupt;
  options.retry_failed = f.retry_failed;
  options.keep_data = f.keep_data;
  options.executor = rn::ExecutorChoice({f.executor, f.slurm_opts, f.cells_per_task, f.no_wait});
  rn::RunSession session(plan, std::move(options));

  if (f.dry_run) {
    std::cout << plan.cells.size() << " cells (" << plan.settings.size << " size, timeout " << plan.settings.timeout_s << " s):\n";
    for (const auto& c : plan.cells) std::cout << "  " << c.label() << "\n";
    return kExitOk;
  }

  if (f.resume && f.extend) throw mx::ConfigError("--resume and --extend: choose one (--extend also completes missing cells)");
  if (f.retry_failed && !f.resume && !f.extend) throw mx::ConfigError("--retry-failed: needs --resume or --extend");
  if (f.discard_corrupt && !f.resume && !f.extend) throw mx::ConfigError("--discard-corrupt-lines: needs --resume or --extend");
  rn::SessionOutcome outcome = session.run();
  std::cout << rn::session_summary(outcome, std::cerr);
  if (outcome.returned_early) return kExitOk;
  if (outcome.report.interrupted) return kExitInterrupted;
  // The exit code tells the folder's state for this matrix, not only this invocation's cells.
  return outcome.report.not_ok_in_folder ? kExitCellsFailed : kExitOk;
}

void add_run_flags(CLI::App* run_cmd, RunFlags& f) {
  run_cmd->add_option("matrix", f.matrix_path, "matrix file (TOML); default configs/quick.toml when no axis flag is given");
  run_cmd->add_option("--allocators,-a", f.allocators_raw, "allocators or variants, comma separated (e.g. glibc,jemalloc:bg)");
  run_cmd->add_option("--workloads,-w", f.workloads_raw, "workloads, comma separated");
  run_cmd->add_option("--threads,-t", f.threads_raw, "thread counts, comma separated (default 1,2)");
  run_cmd->add_option("--reps,-r", f.reps, "repetitions of every cell (default 3)");
  run_cmd->add_option("--size", f.size, "parameter preset: quick or full (default quick)")->check(CLI::IsMember({"quick", "full"}));
  run_cmd->add_option("--program", f.programs,
                      "run your own program as a cell's workload: NAME='COMMAND ARGS' (repeatable; docs/programs.md)");
  run_cmd->add_option("--set", f.sets, "override a workload parameter: workload.param=value (repeatable)");
  run_cmd->add_option("--out,-o", f.out_dir, "results folder (default results/<date-time>)")
      ->each([&f](const std::string&) { f.out_given = true; });
  run_cmd->add_option("--timeout", f.timeout_s, "seconds before a cell is killed and recorded as timeout (default 300)");
  run_cmd->add_option("--sample-ms", f.sample_ms, "RSS timeline sampling period in ms (default 10)");
  run_cmd->add_option("--latency-every", f.latency_every,
                      "time one allocation call in N per thread for the latency percentiles (default 64; 0: off)");
  run_cmd->add_flag("--no-node-figures", f.no_node_figures,
                    "skip the per-node figures after each phase (numa_maps, move_pages: tens of ms per phase on "
                    "large processes, in the gap before the next phase); phases[].nodes is then null");
  run_cmd->add_option("--pin", f.pin,
                      "where worker threads run: none, compact (default: fill a node's CPUs, then the next), scatter "
                      "(round-robin over nodes) or a CPU list such as 0,2-3; within the CPUs and memory nodes this process may use");
  run_cmd->add_option("--nodes", f.nodes, "only these NUMA nodes' CPUs, and bind the workers' memory to them (e.g. 0-1)");
  run_cmd->add_flag("--no-pin", f.no_pin, "the same as --pin none");
  run_cmd->add_flag("--keep-data", f.keep_data, "keep each cell's on-disk data (DIR/data/, e.g. rocksdb's database) after the cell");
  run_cmd->add_flag("--resume", f.resume, "complete an existing results folder of the same matrix: run only the cells it lacks");
  run_cmd->add_flag("--extend", f.extend, "add this matrix's cells to an existing results folder of another matrix (same machine)");
  run_cmd->add_flag("--retry-failed", f.retry_failed, "with --resume/--extend: also rerun cells recorded as failed, crashed or timeout");
  run_cmd->add_flag("--discard-corrupt-lines", f.discard_corrupt,
                    "with --resume/--extend: move invalid lines of results.jsonl to results.corrupt.jsonl instead of stopping");
  run_cmd->add_flag("--dry-run", f.dry_run, "check the matrix and list its cells without running them");
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
