// `allocmark trace record --out FILE [--phases] [--allocator NAME] -- COMMAND ARGS`: records every
// allocation call of a program into a trace file (harness/runner/trace_recording.h), and
// `allocmark trace show FILE [--json]`: the program's allocation pattern from it (harness/trace/
// summary.h). A trace is replayed under any allocator by the replay workload (docs/traces.md).
#include <fmt/format.h>

#include <iostream>

#include "harness/cli/common.h"
#include "harness/results/safe_text.h"
#include "harness/runner/trace_recording.h"
#include "harness/trace/header_keys.h"
#include "harness/trace/summary.h"
#include "units/input_file.h"

namespace allocmark::cli {

Subcommand add_trace_command(CLI::App& app) {
  struct Args {
    std::string out, allocator = "glibc", file;
    bool phases = false, as_json = false;
    std::vector<std::string> command;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("trace", "record a program's allocation calls into a trace file, or show what one holds");
  cmd->require_subcommand(1);
  auto* record = cmd->add_subcommand("record", "run a program with every allocation call recorded (replay it with --workloads replay)");
  record->add_option("--out,-o", a->out, "the trace file to write")->required();
  record->add_flag("--phases", a->phases, "give the program a phase descriptor (ALLOCMARK_PHASE_FD) and keep its phase marks");
  record->add_option("--allocator,-a", a->allocator, "the allocator serving the program while it is recorded (default glibc)");
  record->add_option("command", a->command, "the program and its arguments, after --")->required();
  auto* show = cmd->add_subcommand("show", "what a trace holds: calls, sizes, lifetimes, threads, peak live bytes per phase");
  show->add_option("file", a->file, "a trace file (allocmark trace record)")->required();
  show->add_flag("--json", a->as_json, "print the summary as JSON");
  return {cmd, [a, record]() -> int {
            if (record->parsed()) {
              // Before the program starts: a recording that cannot be written is lost at its end.
              check_output_file(a->out, "--out");
              const matrix::MatrixFile variants = load_variants();
              runner::TraceRecording r;
              r.command = a->command;
              r.allocator = matrix::resolve_allocator(a->allocator, variants.allocator_defs, "trace record --allocator");
              r.phases = a->phases;
              r.out = a->out;
              runner::RecordedTrace got;
              try {
                got = runner::record_trace(r);
              } catch (const runner::TraceWriteError& e) {
                std::cerr << "allocmark: error: " << e.what() << "\n";
                return kExitStopped;
              }
              // The program's own failure first; else 1 when the trace is missing or incomplete.
              const int program_status = got.exit_signal ? 128 + got.exit_signal : got.exit_code;
              const int incomplete = program_status ? program_status : kExitCellsFailed;
              if (!got.lost.empty()) {
                std::cerr << "allocmark: error: " << results::terminal_line(got.lost) << "\n";  // names the program's image
                return incomplete;
              }
              const auto& t = got.trace;
              std::cerr << fmt::format("allocmark: recorded {} events of {} thread(s), {} blocks allocated, into {}\n", t.events,
                                       t.threads.size(), t.header.value(trace::header_key::objects, uint64_t{0}), a->out);
              if (!t.ended) {
                std::cerr << "allocmark: " << (program_status ? "warning" : "error")
                          << ": the program did not end by exit or _exit"
                          << (got.exit_signal ? fmt::format(" (signal {})", got.exit_signal)
                                              : fmt::format(" (or it closed descriptor {}, the recording's)", runner::record_fd()))
                          << ": the trace is cut off where it stopped\n";
                return incomplete;
              }
              if (t.lost_events) {
                std::cerr << fmt::format(
                    "allocmark: error: {} allocation calls were not recorded (the recorder ran out of memory, a thread came "
                    "after the {} a trace holds, or a thread's lock was held when the program ended): the trace is incomplete and a replay of it differs from the "
                    "program (its header's lost_events says how many)\n",
                    t.lost_events, trace::kMaxThreads);
                return incomplete;
              }
              return program_status;
            }
            units::check_input_file(a->file, "trace show");
            const trace::Trace t = trace::read_trace(a->file);
            const nlohmann::json s = trace::summarize(t);
            // A trace's texts (its header's program, its phase names) are the file's: JSON with
            // what is not UTF-8 replaced, a terminal without control sequences.
            if (a->as_json)
              std::cout << s.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
            else
              std::cout << results::terminal_text(trace::summary_text(s));
            return kExitOk;
          }};
}

}  // namespace allocmark::cli
