// `allocmark baseline DIR -o FILE.json`: the gate's reference from a results folder.
#include <fstream>
#include <iostream>

#include "harness/cli/common.h"
#include "harness/gate/baseline.h"

namespace allocmark::cli {

Subcommand add_baseline_command(CLI::App& app) {
  struct Flags {
    std::string dir, out;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("baseline", "write a gate baseline (every repetition's peak RSS, RSS/live, end RSS, ops/s) from a results folder");
  cmd->add_option("dir", f->dir, "results folder")->required();
  cmd->add_option("-o,--out", f->out, "baseline file to write (JSON)")->required();
  return {cmd, [f] {
            gate::RunSummary run = gate::summarize_run(f->dir);
            std::string text = gate::baseline_json(run, f->dir).dump(1) + "\n";
            std::string tmp = f->out + ".tmp";
            std::ofstream out(tmp);
            out << text;
            out.close();
            if (!out || std::rename(tmp.c_str(), f->out.c_str()) != 0) throw std::runtime_error("cannot write " + f->out);
            std::cerr << "allocmark: baseline of " << run.cells.size() << " cells and phases written to " << f->out << "\n";
            return kExitOk;
          }};
}

}  // namespace allocmark::cli
