// allocmark: the driver's entry point. Each subcommand lives in its own file (list.cpp, run.cpp,
// show.cpp, cell.cpp, plot.cpp, report.cpp, compare.cpp, status.cpp, merge.cpp, lab.cpp, build.cpp, ...) and registers its flags here; this file only dispatches and maps errors to
// exit codes. The driver never runs a workload itself.
#include <signal.h>

#include <iostream>

#include "harness/cli/common.h"
#include "harness/cli/history.h"
#include "harness/runner/matrix_runner.h"

using namespace allocmark::cli;

int main(int argc, char** argv) {
  // A write to a pipe or socket whose reader has gone (a program's closed phase socket, a closed
  // `| head`) fails with EPIPE where it happens instead of killing the driver and its run.
  // Processes it starts get the default back (runner/process.cpp).
  ::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"allocmark: which memory allocator to run, and how to configure it, measured"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(ALLOCMARK_VERSION) + " (" + ALLOCMARK_GIT_COMMIT + ")");

  std::vector<Subcommand> commands{add_list_command(app), add_run_command(app), add_show_command(app),
                                   add_cell_command(app), add_baseline_command(app), add_gate_command(app),
                                   add_plot_command(app), add_report_command(app), add_compare_command(app),
                                   add_status_command(app), add_merge_command(app), add_advise_command(app),
                                   add_lab_command(app),

                                   add_topology_command(app), add_trace_command(app), add_build_command(app),
                                   add_history_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
    return kExitUsage;
  } catch (const allocmark::runner::RunStopped& e) {
    // Cells may have been recorded before this: say how many and where, never "nothing was run".
    std::cerr << "allocmark: error: " << e.what() << "\n";
    if (e.recorded())
      std::cerr << "allocmark: " << e.recorded() << " finished cells are recorded in " << e.dir()
                << "; fix the cause, then `allocmark run ... --out " << e.dir() << " --resume`\n";
    else
      std::cerr << "allocmark: no cell was recorded\n";
    return kExitStopped;
  } catch (const std::exception& e) {
    // Configuration, input and environment problems found before any cell ran.
    std::cerr << "allocmark: error: " << e.what() << "\n";
    return kExitUsage;
  }
}
