// allocmark: the driver. Parses flags in one place, expands the matrix, runs each cell in a fresh
// worker process, and writes the results folder. It never runs a workload itself.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>

#include "allocators/backends.h"
#include "harness/matrix/config.h"
#include "harness/matrix/plan.h"
#include "harness/results/machine.h"
#include "harness/results/results_dir.h"
#include "harness/results/show.h"
#include "harness/runner/runner.h"
#include "workloads/workload.h"

namespace {

using nlohmann::json;
namespace mx = allocmark::matrix;
namespace rs = allocmark::results;
namespace rn = allocmark::runner;
namespace wl = allocmark::workloads;

constexpr int kExitOk = 0, kExitCellsFailed = 1, kExitUsage = 2, kExitInterrupted = 130;

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::string worker_path() {
  if (const char* w = std::getenv("ALLOCMARK_WORKER"); w && *w) return w;
  return self_dir() + "/allocmark-worker";
}

std::string clock_text(double seconds) {
  int s = static_cast<int>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

std::string param_type(wl::ParamType t) {
  switch (t) {
    case wl::ParamType::Int: return "int";
    case wl::ParamType::Float: return "float";
    case wl::ParamType::Bytes: return "bytes";
    case wl::ParamType::String: return "string";
  }
  return "?";
}

mx::MatrixFile load_variants() {
  return mx::load_matrix_file(mx::config_dir() + "/variants.toml", /*variants_only=*/true);
}

// Every backend with its library, version and whether a preload of it really takes.
json probe_backends() {
  json out = json::array();
  for (const auto& b : allocmark::allocators::backends()) {
    json entry{{"name", b.name}, {"summary", b.summary}, {"kind", "backend"}};
    if (b.name == "generic") {
      entry["available"] = true;
      entry["note"] = "name a library: [allocators.NAME] backend = \"generic\", library = \"/path/lib.so\"";
      out.push_back(entry);
      continue;
    }
    try {
      auto resolved = mx::resolve_allocator(b.name, {}, "list");
      json probe = rn::probe_allocator(resolved, worker_path());
      entry["library"] = resolved.library.empty() ? probe.value("library", "") : resolved.library;
      entry["available"] = !probe.contains("error");
      if (probe.contains("error")) entry["why_not"] = probe["error"];
      entry["version"] = probe.value("version", "");
    } catch (const mx::ConfigError& e) {
      entry["available"] = false;
      entry["why_not"] = e.what();
    }
    out.push_back(entry);
  }
  return out;
}

json list_json() {
  json out;
  auto variants = load_variants();
  out["allocators"] = probe_backends();
  for (const auto& [name, def] : variants.allocator_defs)
    out["allocators"].push_back({{"name", name}, {"kind", "variant"}, {"backend", def.backend}, {"env", def.env},
                                 {"library", def.library}, {"summary", def.description}});
  for (const auto& w : wl::registered_workloads()) {
    json entry{{"name", w.name}, {"summary", w.summary}, {"phases", w.phases}, {"diagnostic", w.diagnostic}};
    for (const auto& p : w.params)
      entry["params"].push_back({{"name", p.name}, {"type", param_type(p.type)}, {"quick", p.quick}, {"full", p.full}, {"help", p.help}});
    out["workloads"].push_back(entry);
  }
  return out;
}

int cmd_list(bool as_json) {
  json l = list_json();
  if (as_json) {
    std::cout << l.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "Allocators (backends, then variants from " << mx::config_dir() << "/variants.toml):\n";
  for (const auto& a : l["allocators"]) {
    if (a["kind"] == "backend") {
      std::string state = a.value("available", false)
                              ? fmt::format("{} {}", a.value("library", ""), a.value("version", ""))
                              : "unavailable: " + a.value("why_not", std::string());
      if (a["name"] == "generic") state = a.value("note", "");
      std::cout << fmt::format("  {:<20} {}\n  {:<20}   {}\n", a["name"].get<std::string>(), a.value("summary", ""), "", state);
    } else {
      std::string env;
      for (const auto& [k, v] : a["env"].items()) env += fmt::format("{}{}={}", env.empty() ? "" : " ", k, v.get<std::string>());
      if (!a.value("library", "").empty()) env += (env.empty() ? "" : " ") + std::string("library=") + a.value("library", "");
      std::cout << fmt::format("  {:<20} [{}] {}\n  {:<20}   {}\n", a["name"].get<std::string>(), a["backend"].get<std::string>(),
                               a.value("summary", ""), "", env);
    }
  }
  std::cout << "\nWorkloads (parameters: quick default / full default):\n";
  for (const auto& w : l["workloads"]) {
    std::cout << fmt::format("  {}{}: {}\n    phases: ", w["name"].get<std::string>(), w["diagnostic"].get<bool>() ? " (diagnostic)" : "",
                             w["summary"].get<std::string>());
    for (const auto& p : w["phases"]) std::cout << p.get<std::string>() << " ";
    std::cout << "\n";
    for (const auto& p : w["params"])
      std::cout << fmt::format("    {:<14} {:<7} {} / {}  {}\n", p["name"].get<std::string>(), p["type"].get<std::string>(),
                               p["quick"].get<std::string>(), p["full"].get<std::string>(), p["help"].get<std::string>());
  }
  return kExitOk;
}

void on_signal(int) { rn::g_interrupted = true; }

struct RunFlags {
  std::string matrix_path;
  std::vector<std::string> allocators, workloads, sets;
  std::vector<int> threads;
  std::optional<int> reps;
  std::optional<std::string> size;
  std::optional<double> timeout_s;
  std::optional<int> sample_ms;
  std::string out_dir;
  bool resume = false, dry_run = false, no_pin = false;
};

std::string default_out_dir() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "results/%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

int cmd_run(const RunFlags& f) {
  bool axis_flags = !f.allocators.empty() || !f.workloads.empty() || !f.threads.empty();
  std::optional<mx::MatrixFile> file;
  std::string matrix_path = f.matrix_path;
  if (matrix_path.empty() && !axis_flags) matrix_path = mx::config_dir() + "/quick.toml";
  if (!matrix_path.empty()) {
    if (::access(matrix_path.c_str(), R_OK) != 0) throw mx::ConfigError(matrix_path + ": cannot read the matrix file");
    file = mx::load_matrix_file(matrix_path);
  }
  mx::Overrides o;
  if (!f.allocators.empty()) o.allocators = f.allocators;
  if (!f.workloads.empty()) o.workloads = f.workloads;
  if (!f.threads.empty()) o.threads = f.threads;
  o.reps = f.reps;
  o.size = f.size;
  o.timeout_s = f.timeout_s;
  o.sample_ms = f.sample_ms;
  if (f.no_pin) o.pin_threads = false;
  o.sets = f.sets;
  mx::Plan plan = mx::build_plan(file, load_variants(), o);
  for (const auto& n : plan.notes) std::cerr << "allocmark: " << n << "\n";

  // Every allocator is preloaded once before anything runs: a library of a declared kind that is
  // not that allocator is a configuration error, not N failed cells.
  std::string worker = worker_path();
  if (::access(worker.c_str(), X_OK) != 0) throw std::runtime_error("worker not found: " + worker + " (set ALLOCMARK_WORKER)");
  json allocators_meta = json::array();
  for (const auto& a : plan.allocators) {
    json probe = rn::probe_allocator(a, worker);
    if (probe.contains("error") && a.backend != "generic")
      throw mx::ConfigError("allocator '" + a.name + "' (" + (a.library.empty() ? "C library" : a.library) +
                            "): " + probe["error"].get<std::string>());
    allocators_meta.push_back({{"name", a.name}, {"backend", a.backend}, {"library", a.library}, {"env", a.env},
                               {"served_by", probe.value("library", "")}, {"version", probe.value("version", "")},
                               {"options", probe.value("options", json::object())},
                               {"preload_check", probe.value("error", "ok")}});
  }

  if (f.dry_run) {
    std::cout << plan.cells.size() << " cells (" << plan.settings.size << " size, timeout " << plan.settings.timeout_s << " s):\n";
    for (const auto& c : plan.cells) std::cout << "  " << c.label() << "\n";
    return kExitOk;
  }

  rs::ResultsDir dir(f.out_dir.empty() ? default_out_dir() : f.out_dir, f.resume);
  json meta{{"allocmark", {{"version", ALLOCMARK_VERSION}, {"git_commit", ALLOCMARK_GIT_COMMIT}}},
            {"machine", rs::machine_info()},
            {"allocators", allocators_meta},
            {"backends", probe_backends()},
            {"matrix", plan.as_json()},
            {"matrix_file", matrix_path},
            {"started", std::time(nullptr)}};
  dir.write_meta(meta);

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  rn::RunnerOptions ro{worker, dir.log_dir(), plan.settings.timeout_s, plan.settings.sample_ms,
                       plan.settings.max_timeline_points, plan.settings.pin_threads, {}};
  const bool tty = ::isatty(2);
  std::size_t total = plan.cells.size(), skipped = 0, ran = 0, not_ok = 0;
  for (const auto& c : plan.cells) skipped += dir.done_keys().count(c.key());
  std::size_t todo = total - skipped;
  if (skipped) std::cerr << fmt::format("allocmark: resuming: {} of {} cells already recorded\n", skipped, total);
  auto t0 = std::chrono::steady_clock::now();
  std::size_t index = 0;
  const mx::Cell* current = nullptr;
  // One updating line on a terminal: the cell, time so far, and an estimate from the mean cell time.
  auto progress = [&] {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string eta = ran ? clock_text(std::max(0.0, elapsed / ran * (todo - ran))) : "--:--";
    std::cerr << fmt::format("\r\033[K[{}/{}] {}  elapsed {}  eta {}", index, total, current->label(), clock_text(elapsed), eta)
              << std::flush;
  };
  if (tty) ro.on_tick = progress;
  for (const auto& cell : plan.cells) {
    ++index;
    if (dir.done_keys().count(cell.key())) continue;
    current = &cell;
    if (tty) progress();
    rn::CellOutcome outcome = rn::run_cell(cell, ro, static_cast<int>(index));
    if (outcome.interrupted) break;
    dir.append(outcome.record);
    dir.write_summary_csv();
    ++ran;
    std::string status = outcome.record["status"];
    if (status != "ok") ++not_ok;
    if (!tty || status != "ok") {
      std::string error = outcome.record["error"].is_string() ? ": " + outcome.record["error"].get<std::string>() : "";
      std::cerr << fmt::format("{}[{}/{}] {}: {} ({:.1f} s){}\n", tty ? "\r\033[K" : "", index, total, cell.label(), status,
                               outcome.record.value("wall_s", 0.0), error);
    }
  }
  if (tty) std::cerr << "\r\033[K";
  if (rn::g_interrupted) {
    std::cerr << fmt::format("allocmark: interrupted; {} finished cells are in {}; `allocmark run ... --out {} --resume` completes it\n",
                             ran + skipped, dir.path(), dir.path());
    return kExitInterrupted;
  }
  try {
    std::cout << rs::render_table(rs::load_records(dir.path()));
  } catch (const rs::ResultsError&) {
  }
  std::cout << fmt::format("\n{} cells run, {} not ok; results in {}/ (results.jsonl, summary.csv, meta.json, logs/)\n", ran,
                           not_ok, dir.path());
  return not_ok ? kExitCellsFailed : kExitOk;
}

int cmd_show(const std::string& dir) {
  std::cout << rs::render_table(rs::load_records(dir));
  return kExitOk;
}

std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::size_t start = 0;
    while (start <= item.size()) {
      std::size_t comma = item.find(',', start);
      std::string part = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!part.empty()) out.push_back(part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allocmark: which memory allocator to run, and how to configure it, measured"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(ALLOCMARK_VERSION) + " (" + ALLOCMARK_GIT_COMMIT + ")");

  bool list_as_json = false;
  auto* list = app.add_subcommand("list", "backends and variants with availability; workloads with parameters");
  list->add_flag("--json", list_as_json, "machine-readable output");

  RunFlags rf;
  std::vector<std::string> allocators_raw, workloads_raw, threads_raw;
  auto* run = app.add_subcommand("run", "run a matrix: allocator x workload x threads x repetitions");
  run->add_option("matrix", rf.matrix_path, "matrix file (TOML); default configs/quick.toml when no axis flag is given");
  run->add_option("--allocators,-a", allocators_raw, "allocators or variants, comma separated (e.g. glibc,jemalloc:bg)");
  run->add_option("--workloads,-w", workloads_raw, "workloads, comma separated");
  run->add_option("--threads,-t", threads_raw, "thread counts, comma separated (default 1,2)");
  run->add_option("--reps,-r", rf.reps, "repetitions of every cell (default 3)")->check(CLI::PositiveNumber);
  run->add_option("--size", rf.size, "parameter preset: quick or full (default quick)")->check(CLI::IsMember({"quick", "full"}));
  run->add_option("--set", rf.sets, "override a workload parameter: workload.param=value (repeatable)");
  run->add_option("--out,-o", rf.out_dir, "results folder (default results/<date-time>)");
  run->add_option("--timeout", rf.timeout_s, "seconds before a cell is killed and recorded as timeout (default 300)")
      ->check(CLI::PositiveNumber);
  run->add_option("--sample-ms", rf.sample_ms, "RSS timeline sampling period in ms (default 10)")->check(CLI::PositiveNumber);
  run->add_flag("--no-pin", rf.no_pin, "do not pin worker threads to CPUs");
  run->add_flag("--resume", rf.resume, "complete an existing results folder: run only the cells it lacks");
  run->add_flag("--dry-run", rf.dry_run, "check the matrix and list its cells without running them");

  std::string show_dir;
  auto* show = app.add_subcommand("show", "summarise a results folder as a table");
  show->add_option("dir", show_dir, "results folder")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  try {
    if (*list) return cmd_list(list_as_json);
    if (*show) return cmd_show(show_dir);
    rf.allocators = split_commas(allocators_raw);
    rf.workloads = split_commas(workloads_raw);
    for (const auto& t : split_commas(threads_raw)) {
      try {
        std::size_t used = 0;
        int v = std::stoi(t, &used);
        if (used != t.size() || v < 1) throw std::invalid_argument(t);
        rf.threads.push_back(v);
      } catch (const std::exception&) {
        throw mx::ConfigError("--threads: '" + t + "' is not a positive integer");
      }
    }
    return cmd_run(rf);
  } catch (const std::exception& e) {
    // Configuration, results-folder and environment problems (a missing worker) alike: nothing
    // was run for them, which is what exit code 2 promises.
    std::cerr << "allocmark: error: " << e.what() << "\n";
    return kExitUsage;
  }
}
