// `allocmark plot DIR`: the charts of a results folder (docs/charts.md). The drawing is Python
// (plots/allocmark_plots.py, Debian's matplotlib under /usr/bin/python3) over summary.json and the
// timelines; this command checks the flags, writes summary.json from results.jsonl when a folder
// predates it, and runs the script, returning its exit code.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "harness/cli/common.h"
#include "harness/results/reporters/reporter.h"

#ifndef ALLOCMARK_DEFAULT_PLOTS_DIR
#define ALLOCMARK_DEFAULT_PLOTS_DIR "plots"
#endif

namespace allocmark::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";
const std::vector<std::string> kKinds{"peak_rss", "timeline", "throughput", "scaling", "variants", "contention"};

struct PlotOptions {
  std::string dir;
  std::string out;
  std::string format = "png";
  std::vector<std::string> only;
  std::string baseline;
  bool log = false;
};

// plots/ in the source tree, or $ALLOCMARK_PLOTS_DIR (as configs/ and $ALLOCMARK_CONFIG_DIR).
std::string plots_dir() {
  if (const char* dir = std::getenv("ALLOCMARK_PLOTS_DIR"); dir && *dir) return dir;
  return ALLOCMARK_DEFAULT_PLOTS_DIR;
}

}  // namespace

static int run_script(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("cannot start {}: {}", kPython, std::strerror(errno)));
  if (pid == 0) {
    ::execv(kPython, argv.data());
    std::fprintf(stderr, "allocmark: error: cannot run %s: %s\n", kPython, std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(fmt::format("waiting for {}: {}", kPython, std::strerror(errno)));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  std::cerr << "allocmark: error: the plotting script was killed by signal " << WTERMSIG(status) << "\n";
  return kExitCellsFailed;
}

int run_plots_script(const std::string& script_name, const std::vector<std::string>& args) {
  std::string script = (fs::path(plots_dir()) / script_name).string();
  if (!fs::is_regular_file(script))
    throw std::runtime_error(fmt::format("{} not found (set ALLOCMARK_PLOTS_DIR to the plots/ folder)", script));
  if (::access(kPython, X_OK) != 0)
    throw std::runtime_error(fmt::format("{} not found: install Debian's python3-matplotlib", kPython));
  std::vector<std::string> argv{kPython, script};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_script(argv);
}

void ensure_summaries(const std::string& dir) {
  if (!fs::is_regular_file(fs::path(dir) / "results.jsonl"))
    throw std::invalid_argument(fmt::format("{}: no results.jsonl (not a results folder)", dir));
  if (!fs::is_regular_file(fs::path(dir) / "summary.json")) {
    // A folder written before summary.json existed: the results model writes it now.
    std::cerr << "allocmark: " << dir << " has no summary.json; writing it from results.jsonl\n";
    results::write_summaries(dir);
  }
}

Subcommand add_plot_command(CLI::App& app) {
  auto opts = std::make_shared<PlotOptions>();
  auto* plot = app.add_subcommand("plot", "draw the charts of a results folder (docs/charts.md)");
  plot->add_option("dir", opts->dir, "results folder")->required();
  plot->add_option("--out", opts->out, "output folder (default DIR/charts)");
  plot->add_option("--format", opts->format, "png (default) or svg");
  plot->add_option("--only", opts->only, "chart kinds, comma-separated: peak_rss, timeline, throughput, scaling, "
                                         "variants, contention (default all)")
      ->allow_extra_args(false);
  plot->add_option("--baseline", opts->baseline, "allocator throughput is normalised to (default glibc if present, else the first)");
  plot->add_flag("--log", opts->log, "log scale for the normalised throughput");
  return {plot, [opts, plot] {
            if (opts->format != "png" && opts->format != "svg")
              throw std::invalid_argument(fmt::format("--format: unknown format '{}' (choose from png, svg)", opts->format));
            auto kinds = split_commas(opts->only, "--only");
            for (const auto& k : kinds)
              if (std::find(kKinds.begin(), kKinds.end(), k) == kKinds.end())
                throw std::invalid_argument(fmt::format(
                    "--only: unknown chart kind '{}' (choose from peak_rss, timeline, throughput, scaling, variants, contention)", k));
            if (plot->count("--baseline") && opts->baseline.empty())
              throw std::invalid_argument("--baseline: empty allocator name");
            ensure_summaries(opts->dir);
            std::vector<std::string> args{opts->dir, "--format", opts->format};
            if (!opts->out.empty()) args.insert(args.end(), {"--out", opts->out});
            if (!kinds.empty()) {
              std::string joined;
              for (const auto& k : kinds) joined += (joined.empty() ? "" : ",") + k;
              args.insert(args.end(), {"--only", joined});
            }
            if (!opts->baseline.empty()) args.insert(args.end(), {"--baseline", opts->baseline});
            if (opts->log) args.push_back("--log");
            return run_plots_script("allocmark_plots.py", args);
          }};
}

}  // namespace allocmark::cli
