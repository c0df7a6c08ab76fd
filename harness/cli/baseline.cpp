// `allocmark baseline DIR -o FILE.json`: the gate's reference from a results folder.
#include <fmt/format.h>

#include <iostream>

#include "harness/cli/common.h"
#include "harness/gate/baseline.h"
#include "harness/results/model.h"
#include "harness/results/results_dir.h"

namespace allocmark::cli {

Subcommand add_baseline_command(CLI::App& app) {
  struct Flags {
    std::string dir, out;
    bool allow_running = false;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("baseline", "write a gate baseline from a results folder: every repetition's " +
                                                 results::metric_names(results::gated_metrics()));
  cmd->add_option("dir", f->dir, "the results folder")->required();
  cmd->add_option("-o,--out", f->out, fmt::format("the baseline file it writes (JSON, format {})", gate::kBaselineVersion))->required();
  cmd->add_flag("--allow-running", f->allow_running,
                "take the baseline of a folder a run is still writing (of the cells finished so far)");
  return {cmd, [f] {
            check_output_file(f->out, "-o", {f->dir});
            const bool running = results::folder_writer(f->dir).active;
            if (running && !f->allow_running)
              results::refuse_folder_being_written(f->dir, "a baseline of it would miss the rest (wait for the run to end, or "
                                                        "pass --allow-running for a baseline of the cells finished so far)");
            gate::RunSummary run = gate::summarize_run(f->dir);
            gate::check_baseline_source(run, f->dir);
            results::write_file_atomically(f->out, gate::baseline_json(run, f->dir).dump(1) + "\n");
            std::cerr << "allocmark: baseline of " << run.cells.size() << " cells and phases written to " << f->out << "\n";
            if (running)
              std::cerr << "allocmark: warning: a run is still writing " << f->dir
                        << ": the baseline holds only the cells finished so far\n";
            return kExitOk;
          }};
}

}  // namespace allocmark::cli
