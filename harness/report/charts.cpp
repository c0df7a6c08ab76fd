#include "harness/report/charts.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "harness/os/spawn.h"
#include "harness/results/folder.h"
#include "harness/results/folder_layout.h"
#include "harness/results/reporters/reporter.h"
#include "harness/results/safe_text.h"

#ifndef ALLOCMARK_DEFAULT_PLOTS_DIR
#define ALLOCMARK_DEFAULT_PLOTS_DIR "plots"
#endif

namespace allocmark::report {

namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";
constexpr std::string_view kSkipped = "allocmark_plots: skipped ";
constexpr std::string_view kError = "allocmark_plots: error: ";

std::string script_path() { return (fs::path(plots_dir()) / "allocmark_plots.py").string(); }

std::vector<std::string> script_args(const ChartRequest& r) {
  std::vector<std::string> args{kPython, script_path(), r.dir, "--format", r.format};
  if (!r.out.empty()) args.insert(args.end(), {"--out", r.out});
  if (!r.only.empty()) {
    std::string joined;
    for (const auto& k : r.only) joined += (joined.empty() ? "" : ",") + k;
    args.insert(args.end(), {"--only", joined});
  }
  if (!r.baseline.empty()) args.insert(args.end(), {"--baseline", r.baseline});
  if (r.log) args.push_back("--log");
  if (!r.describe.empty()) args.insert(args.end(), {"--describe", r.describe});
  return args;
}

// Output files for the child's stdout and stderr; none: inherit ours.
struct Redirect {
  std::string out, err;
};

int run_script(const std::vector<std::string>& args, const std::optional<Redirect>& redirect) {
  os::SpawnOptions o;
  o.argv = args;
  o.fail_in_child = true;
  o.exec_failure = fmt::format("error: cannot run {}", kPython);
  int out = -1, err = -1;
  auto close_both = [&] {
    for (int fd : {out, err})
      if (fd >= 0) ::close(fd);
  };
  if (redirect) {
    out = ::open(redirect->out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    err = ::open(redirect->err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0 || err < 0) {
      const int why = errno;
      close_both();
      std::fprintf(stderr, "allocmark: error: cannot capture the plotting script's output: %s\n", std::strerror(why));
      return 127;
    }
    o.fds = {{out, 1}, {err, 2}};
  }
  std::cout.flush();
  const os::SpawnResult child = os::spawn(o);
  close_both();
  if (child.pid < 0) throw std::runtime_error(fmt::format("cannot start {}: {}", kPython, std::strerror(child.error_number)));
  int status = 0;
  if (!os::wait_for(child.pid, status))
    throw std::runtime_error(fmt::format("waiting for {}: {}", kPython, std::strerror(errno)));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  std::cerr << "allocmark: error: the plotting script was killed by signal " << WTERMSIG(status) << "\n";
  return 1;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace

std::string plots_dir() {
  if (const char* dir = std::getenv("ALLOCMARK_PLOTS_DIR"); dir && *dir) return dir;
  return ALLOCMARK_DEFAULT_PLOTS_DIR;
}

void ensure_summaries(const std::string& dir) {
  namespace lay = results::layout;
  results::check_readable_file(lay::path_in(dir, lay::kResults));
  if (!fs::is_regular_file(lay::path_in(dir, lay::kResults)))
    throw std::invalid_argument(fmt::format("{}: no {} (not a results folder)", dir, lay::kResults));
  // The charts draw what results.jsonl holds now, as `show` and `report` read it: a folder without
  // a finished cell is the same error here, and summaries written before results.jsonl last changed
  // (a folder from before summary.json, results edited or emptied since) are written again first.
  const results::Model model = results::Model::load({dir});
  const results::SummaryFiles now = results::render_summaries(model);
  if (results::read_summaries(dir) == now) return;
  std::cerr << fmt::format("allocmark: {}'s {}, {} or {} is missing or was written before {} last changed; writing them "
                           "from it\n",
                           results::terminal_line(dir), lay::kSummaryJson, lay::kSummaryCsv, lay::kTimelines, lay::kResults);
  try {
    results::write_summaries(dir, now);
  } catch (const results::ResultsError& e) {
    // Drawn from the old ones, the charts would not show what results.jsonl holds.
    throw results::ResultsError(fmt::format("{}; the charts are drawn from these files, so copy the folder somewhere "
                                            "writable and draw the copy",
                                            e.what()));
  }
}

namespace {

void check_script(const std::string& script) {
  if (!fs::is_regular_file(script))
    throw std::runtime_error(fmt::format("{} not found (set ALLOCMARK_PLOTS_DIR to the plots/ folder)", script));
  if (::access(kPython, X_OK) != 0)
    throw std::runtime_error(fmt::format("{} not found: install Debian's python3-matplotlib", kPython));
}

}  // namespace

void prepare_charts(const ChartRequest& request) {
  ensure_summaries(request.dir);
  check_script(script_path());
}

int run_plots_script(const std::string& script_name, const std::vector<std::string>& args) {
  const std::string script = (fs::path(plots_dir()) / script_name).string();
  check_script(script);
  std::vector<std::string> argv{kPython, script};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_script(argv, std::nullopt);
}

int draw_charts(const ChartRequest& request) { return run_script(script_args(request), std::nullopt); }

namespace {

DrawnCharts run_captured(const std::vector<std::string>& argv, const std::string& out) {
  fs::create_directories(out);
  Redirect redirect{(fs::path(out) / ".stdout").string(), (fs::path(out) / ".stderr").string()};
  DrawnCharts drawn;
  drawn.exit_code = run_script(argv, redirect);
  drawn.files = lines_of(redirect.out);
  for (const auto& line : lines_of(redirect.err)) {
    if (line.rfind(kSkipped, 0) == 0) drawn.skipped.push_back(line.substr(kSkipped.size()));
    else if (line.rfind(kError, 0) == 0) drawn.errors.push_back(line.substr(kError.size()));
  }
  if (drawn.exit_code != 0)
    for (const auto& line : lines_of(redirect.err)) std::cerr << line << "\n";  // the traceback, for the user
  return drawn;
}

}  // namespace

DrawnCharts draw_charts_captured(const ChartRequest& request) {
  if (request.out.empty()) throw std::logic_error("draw_charts_captured needs an output folder");
  return run_captured(script_args(request), request.out);
}

DrawnCharts run_plots_script_captured(const std::string& script_name, const std::vector<std::string>& args,
                                      const std::string& out) {
  const std::string script = (fs::path(plots_dir()) / script_name).string();
  check_script(script);
  std::vector<std::string> argv{kPython, script};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_captured(argv, out);
}

TemporaryFolder::TemporaryFolder() {
  std::string pattern = (fs::temp_directory_path() / "allocmark-report-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary folder in " + fs::temp_directory_path().string());
  path_ = pattern;
}

TemporaryFolder::~TemporaryFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace allocmark::report
