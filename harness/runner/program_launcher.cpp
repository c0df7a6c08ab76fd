// Program cells (workload `program:NAME`, docs/programs.md): the user's command with the allocator
// and allocmark's companion preloaded (harness/program/preload_report.cpp), which makes the preload
// proof inside the program and reports on fd 3. A program cannot measure itself, so its phases are
// measured from here as it marks them on fd 4 (program_phases), and the last one closes at its exit.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>

#include "harness/matrix/program.h"
#include "harness/record/cell.h"
#include "harness/record/event_keys.h"
#include "harness/record/record_keys.h"
#include "harness/results/folder_layout.h"
#include "harness/runner/cell_launcher.h"
#include "harness/runner/environment.h"
#include "harness/runner/program_phases.h"
#include "harness/topology/topology.h"

namespace allocmark::runner {
namespace {

using nlohmann::json;
namespace event = record::event;
namespace event_key = record::event_key;

// A pid field of an event, -1 when absent or not a number.
pid_t event_pid(const json& ev) {
  auto it = ev.find(event_key::pid);
  return it != ev.end() && it->is_number_integer() ? it->get<pid_t>() : -1;
}

// A program cell's command line, environment, files and placement (see harness/program/preload_report.cpp).
Spawned spawn_program(const matrix::Cell& cell, const placement::Placement& where, const std::string& log_path,
                      const std::string& stdout_path) {
  matrix::ProgramDef def = matrix::program_from_params(cell.workload, cell.params);
  std::vector<std::string> argv = matrix::command_words(def.command, "program " + def.name);
  std::vector<std::string> env = worker_environment(cell.allocator);
  // The companion comes after the allocator, so the allocator serves malloc, the companion too.
  const std::string preload = cell.allocator.library.empty() ? ALLOCMARK_PRELOAD_REPORT_LIBRARY
                                                             : cell.allocator.library + " " + ALLOCMARK_PRELOAD_REPORT_LIBRARY;
  std::erase_if(env, [](const std::string& e) { return e.rfind("LD_PRELOAD=", 0) == 0; });
  env.push_back("LD_PRELOAD=" + preload);
  env.push_back("ALLOCMARK_REPORT_FD=3");
  env.push_back("ALLOCMARK_DRIVER_PID=" + std::to_string(::getpid()));  // the companion reports from its child only
  env.push_back(std::string(matrix::kPhaseFdVariable) + "=4");
  env.push_back("ALLOCMARK_EXPECT_LIBRARY=" + cell.allocator.library);
  env.push_back("ALLOCMARK_BACKEND=" + cell.allocator.backend);
  for (const auto& [k, v] : def.env) env.push_back(k + "=" + v);
  SpawnOptions options;
  options.stdout_path = stdout_path;
  options.cwd = def.cwd;
  options.stdin_path = def.input.empty() || def.cwd.empty() || def.input[0] == '/' ? def.input : def.cwd + "/" + def.input;
  options.phase_pipe = true;
  options.search_path = argv[0].find('/') == std::string::npos;
  if (where.spec.kind != placement::PinSpec::Kind::none) options.cpus = where.candidate_cpus;
  options.membind = where.membind;
  apply_thp_mode(cell.allocator, options);
  return spawn_process(argv, env, log_path, options);
}

// FNV-1a of a program's standard output: equal outputs under two allocators have equal sums.
json stdout_summary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {{record::kRecordStdoutBytes, nullptr}, {record::kRecordStdoutChecksum, nullptr}};
  uint64_t h = 1469598103934665603ULL, bytes = 0;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h = record::fnv1a64(buf, static_cast<std::size_t>(in.gcount()), h);
    bytes += static_cast<uint64_t>(in.gcount());
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return {{record::kRecordStdoutBytes, bytes}, {record::kRecordStdoutChecksum, hex}};
}

class ProgramLauncher : public CellLauncher {
 public:
  ProgramLauncher(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path)
      : cell_(cell), settings_(settings), log_path_(log_path), stdout_path_(results::layout::stdout_beside(log_path)) {}

  // A program's threads are its own: it runs on the CPUs the policy chooses from (a CPU list, the
  // nodes of --nodes with its memory bound there, else every allowed CPU of the nodes whose memory
  // is allowed), and the kernel places its threads among them.
  Spawned start() override {
    topology_ = topology::detect();
    placement_ = placement::plan_placement(topology_, placement::current_allowed(), settings_.pin, 1);
    spawned_ = spawn_program(cell_, placement_, log_path_, stdout_path_);
    return spawned_;
  }

  void began(int64_t start_ns) override {
    std::vector<int> node_ids;
    for (const auto& n : topology_.nodes) node_ids.push_back(n.id);
    phases_.emplace(spawned_.pid, start_ns, std::move(node_ids));
  }

  void take_event(const json& event, RecordBuilder& builder) override {
    if (event_pid(event) != spawned_.pid) return;  // not the measured process: an orphan of the program, reparented to the driver
    if (event.value(event_key::event, "") == record::event::program_exit)
      exit_event_ = event;  // closes the last phase once the program has gone
    else
      builder.on_event(event);  // a later image's start (the program exec'd) replaces an earlier one's
  }

  void take_phase_marks(const char* data, std::size_t n, int64_t edge_ns, RecordBuilder& builder) override {
    for (const auto& ev : phases_->feed(data, n, edge_ns)) builder.on_event(ev);
    // Answered after the edge was measured. A program that never reads the answers loses nothing
    // but exactness; one that closed its end gets none (MSG_NOSIGNAL: no SIGPIPE, just EPIPE).
    std::string answers = phases_->take_answers();
    if (!answers.empty()) (void)!::send(spawned_.phase_fd, answers.data(), answers.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void exited() override { phases_->program_ended(); }

  void complete(RecordBuilder& builder, const ProcessEnd& end, const Timeline& timeline) override {
    builder.on_event(phases_->finish(exit_event_, end.usage, end.exit_ns,
                                     timeline.max_rss_between((phases_->current_begin_ns() - end.start_ns) / 1e6,
                                                              (end.exit_ns - end.start_ns) / 1e6)));
    const bool exit_zero = WIFEXITED(end.wait_status) && WEXITSTATUS(end.wait_status) == 0;
    if (exit_zero && !builder.saw_start())
      builder.on_event({{event_key::event, event::error},
                        {event_key::error, "no preload proof: the program never loaded allocmark's companion library (statically "
                                  "linked, set-uid, or it replaced its environment), so which allocator served it is unknown"}});
    else if (exit_zero && !exit_event_.is_object())
      builder.on_event({{event_key::event, event::error},
                        {event_key::error, "no preload proof: the companion library reported at the start of process " +
                                      std::to_string(spawned_.pid) + ", but not at its exit: its final image did not load it "
                                      "(an exec without LD_PRELOAD), closed descriptor 3, or ended by the exit_group "
                                      "system call rather than exit() or _exit(), so which allocator served it is unknown"}});
    else if (builder.saw_start() && !end.timed_out && !end.interrupted)
      builder.on_event({{event_key::event, event::done},
                        {event_key::alloc_stats, exit_event_.is_object() ? exit_event_.value(event_key::alloc_stats, json::object()) : json::object()},
                        {event_key::contention, exit_event_.is_object() ? exit_event_.value(event_key::contention, json()) : json()}});
    json extra = stdout_summary(stdout_path_);
    extra[record::kRecordExitCode] = WIFEXITED(end.wait_status) ? json(WEXITSTATUS(end.wait_status)) : json(nullptr);
    extra[record::kRecordExitSignal] = WIFSIGNALED(end.wait_status) ? json(WTERMSIG(end.wait_status)) : json(nullptr);
    extra[record::kRecordPhaseMarkErrors] = phases_->bad_lines();
    extra[record::kRecordStdout] = stdout_path_;
    extra[record::kRecordOutlivedBy] = end.outlived_by;
    json where = placement::to_json(placement_);
    const bool pinned = placement_.spec.kind != placement::PinSpec::Kind::none;
    where["program_cpus"] = pinned ? json(topology::format_list(placement_.candidate_cpus)) : json(nullptr);
    where["thread_cpus"] = where["thread_nodes"] = nullptr;  // the program's threads are placed by the kernel
    where["allowed"] = placement::to_json(placement::current_allowed());
    extra[record::kRecordPlacement] = where;
    extra[record::kRecordPinnedCpus] = nullptr;
    builder.annotate(extra);
  }

 private:
  const matrix::Cell& cell_;
  const CellSettings& settings_;
  const std::string log_path_;
  const std::string stdout_path_;
  topology::Topology topology_;
  placement::Placement placement_;
  Spawned spawned_;
  std::optional<ProgramPhases> phases_;
  json exit_event_;  // the companion's program_exit from the measured process's final image
};

}  // namespace

std::unique_ptr<CellLauncher> program_launcher(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path) {
  return std::make_unique<ProgramLauncher>(cell, settings, log_path);
}

}  // namespace allocmark::runner
