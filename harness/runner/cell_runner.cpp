#include "harness/runner/cell_runner.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sys/resource.h>
#include <stdexcept>

#include "harness/metrics/proc.h"
#include "harness/results/folder_layout.h"
#include "harness/runner/environment.h"
#include "harness/runner/events.h"
#include "harness/runner/process.h"
#include "harness/runner/record.h"
#include "harness/runner/timeline.h"
#include "harness/runner/program_phases.h"
#include "harness/matrix/program.h"
#include "harness/topology/topology.h"

namespace allocmark::runner {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// After the worker exited, what is still in the pipe belongs to the cell (a final `done`, the tail
// of a large burst). Everything it started has been ended (end_leftovers), so EOF comes at once
// unless a process outside its tree holds the pipe (one it passed the descriptor to): the wait is
// bounded for that case, and it is never part of the cell's time.
constexpr auto kDrainLimit = std::chrono::seconds(5);

// A pid field of an event, -1 when absent or not a number.
pid_t event_pid(const json& ev) {
  auto it = ev.find("pid");
  return it != ev.end() && it->is_number_integer() ? it->get<pid_t>() : -1;
}

// The data root (DIR/data) as an entry of the folder above it (the results folder), so that the
// root and every cell folder in it are reached without following links: a link planted there
// never sends a worker's data, or its removal, outside the results folder.
struct DataRoot {
  results::Folder above;
  std::string name;
};
DataRoot locate_data_root(const std::string& data_root) {
  std::filesystem::path root = std::filesystem::path(data_root).lexically_normal();
  if (root.filename().empty()) root = root.parent_path();
  const std::string above = root.parent_path().empty() ? "." : root.parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(above, ec);
  return {results::Folder(above), root.filename().string()};
}

}  // namespace

std::string cell_data_dir(const CellSettings& settings, const std::string& log_path) {
  if (settings.data_root.empty()) return "";
  return settings.data_root + "/" + results::layout::data_folder_name(log_path);
}

json worker_spec(const matrix::Cell& cell, const CellSettings& settings, const std::string& data_dir) {
  json spec = matrix::settings_json(settings, matrix::kWorker);
  spec.update({{"allocator", cell.allocator.name}, {"backend", cell.allocator.backend},
               {"library", cell.allocator.library}, {"workload", cell.workload},
               {"threads", cell.threads},           {"rep", cell.rep},
               {"params", cell.params},             {"driver_pid", ::getpid()},
               {"data_dir", data_dir}});
  return spec;
}

namespace {

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
  return spawn_process(argv, env, log_path, options);
}

// FNV-1a of a program's standard output: equal outputs under two allocators have equal sums.
json stdout_summary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {{"stdout_bytes", nullptr}, {"stdout_checksum", nullptr}};
  uint64_t h = 1469598103934665603ULL, bytes = 0;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    h = matrix::fnv1a64(buf, static_cast<std::size_t>(in.gcount()), h);
    bytes += static_cast<uint64_t>(in.gcount());
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return {{"stdout_bytes", bytes}, {"stdout_checksum", hex}};
}

}  // namespace

CellOutcome run_cell(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path,
                     const CellHooks& hooks) {
  const bool program = matrix::is_program(cell.workload);
  const std::string data_dir = program ? "" : cell_data_dir(settings, log_path);
  if (!data_dir.empty()) {
    try {
      DataRoot root = locate_data_root(settings.data_root);
      root.above.sub(root.name, /*create=*/true);
    } catch (const results::ResultsError& e) {
      throw std::runtime_error(std::string("cannot create the data folder: ") + e.what());
    }
  }
  std::string stdout_path;
  if (program) {
    stdout_path = results::layout::stdout_beside(log_path);
  }
  // A program's threads are its own: it runs on the CPUs the policy chooses from (a CPU list, the
  // nodes of --nodes with its memory bound there, else every allowed CPU of the nodes whose memory
  // is allowed), and the kernel places its threads among them.
  const topology::Topology topo = program ? topology::detect() : topology::Topology{};
  placement::Placement program_placement;
  if (program) program_placement = placement::plan_placement(topo, placement::current_allowed(), settings.pin, 1);
  become_subreaper();
  Spawned w = program ? spawn_program(cell, program_placement, log_path, stdout_path)
                      : spawn_worker(settings.worker_path, {"--cell", worker_spec(cell, settings, data_dir).dump()},
                                     worker_environment(cell.allocator), log_path);
  const int64_t start_ns = monotonic_ns();
  const auto deadline = Clock::now() + std::chrono::duration<double>(settings.timeout_s);
  RecordBuilder builder(cell, log_path, start_ns);
  EventStream stream;
  Timeline timeline(settings.max_timeline_points);
  std::optional<ProgramPhases> phases;
  if (program) {
    std::vector<int> node_ids;
    for (const auto& n : topo.nodes) node_ids.push_back(n.id);
    phases.emplace(w.pid, start_ns, std::move(node_ids));
  }
  json exit_event;  // the companion's program_exit from the measured process's final image
  int64_t exit_ns = 0;
  std::size_t outlived_by = 0;
  rusage usage{};
  WorkerEnd end;
  end.timeout_s = settings.timeout_s;
  bool interrupted = false, exited = false, pipe_open = true, phase_open = w.phase_fd >= 0;
  std::optional<Clock::time_point> drain_until;
  auto next_sample = Clock::now();
  auto next_tick = Clock::now() + std::chrono::seconds(1);
  char buf[65536];
  auto on_report = [&](const char* data, std::size_t n) {
    for (const auto& ev : stream.feed(data, n)) {
      if (!program) {
        builder.on_event(ev);
      } else if (event_pid(ev) != w.pid) {
        continue;  // not the measured process: an orphan of the program, reparented to the driver
      } else if (ev.value("event", "") == "program_exit") {
        exit_event = ev;  // closes the last phase once the program has gone
      } else {
        builder.on_event(ev);  // a later image's start (the program exec'd) replaces an earlier one's
      }
    }
  };
  auto on_phase_marks = [&](const char* data, std::size_t n) {
    // Marks still unread when the program exited were written before: their edges are its exit.
    for (const auto& ev : phases->feed(data, n, exited ? exit_ns : monotonic_ns())) builder.on_event(ev);
    // Answered after the edge was measured. A program that never reads the answers loses nothing
    // but exactness; one that closed its end gets none (MSG_NOSIGNAL: no SIGPIPE, just EPIPE).
    std::string answers = phases->take_answers();
    if (!answers.empty()) (void)!::send(w.phase_fd, answers.data(), answers.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  };


  // Runs until the worker has exited and its report pipe reached end of file (or the drain limit).
  while (!exited || pipe_open || phase_open) {
    auto now = Clock::now();
    if (!exited) {
      if (!end.timed_out && now >= deadline) {
        end.timed_out = true;
        kill_group(w.pid);
      }
      if (!interrupted && hooks.stop_requested && hooks.stop_requested()) {
        interrupted = true;
        kill_group(w.pid);
      }
      if (hooks.on_tick && now >= next_tick) {
        hooks.on_tick();
        next_tick = now + std::chrono::seconds(1);
      }
      if (now >= next_sample) {
        uint64_t rss = 0;
        if (metrics::read_statm_rss(w.pid, rss)) timeline.add((monotonic_ns() - start_ns) / 1e6, rss);
        next_sample += std::chrono::milliseconds(settings.sample_ms);
        if (next_sample < now) next_sample = now + std::chrono::milliseconds(settings.sample_ms);
      }
    } else if (drain_until && now >= *drain_until) {
      break;
    }
    int wait_ms = exited ? 50
                         : std::clamp(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                          next_sample - Clock::now()).count()),
                                      0, settings.sample_ms);
    if (pipe_open || phase_open) {
      // The report pipe and a program's phase pipe, each read as it has data.
      pollfd pfds[2] = {{pipe_open ? w.report_fd : -1, POLLIN, 0}, {phase_open ? w.phase_fd : -1, POLLIN, 0}};
      if (::poll(pfds, 2, wait_ms) > 0) {
        for (int i = 0; i < 2; ++i) {
          if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t n = ::read(pfds[i].fd, buf, sizeof buf);
          if (n > 0) {
            if (i == 0)
              on_report(buf, static_cast<std::size_t>(n));
            else
              on_phase_marks(buf, static_cast<std::size_t>(n));
          } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            (i == 0 ? pipe_open : phase_open) = false;
          }
        }
      }
    } else if (!exited) {
      ::usleep(static_cast<useconds_t>(std::max(wait_ms, 1)) * 1000);
    }
    if (!exited && ::wait4(w.pid, &end.wait_status, WNOHANG, &usage) == w.pid) {
      exited = true;
      exit_ns = monotonic_ns();
      if (phases) phases->program_ended();
      // The cell ends with its process: what it started (in its group, or reparented to the
      // driver after leaving it) ends now, and no longer holds the pipes open.
      outlived_by = end_leftovers(w.pid);
      drain_until = Clock::now() + kDrainLimit;
    }
  }
  ::close(w.report_fd);
  if (w.phase_fd >= 0) ::close(w.phase_fd);
  if (program) {
    builder.on_event(phases->finish(exit_event, usage, exit_ns,
                                    timeline.max_rss_between((phases->current_begin_ns() - start_ns) / 1e6, (exit_ns - start_ns) / 1e6)));
    const bool exit_zero = WIFEXITED(end.wait_status) && WEXITSTATUS(end.wait_status) == 0;
    if (exit_zero && !builder.saw_start())
      builder.on_event({{"event", "error"},
                        {"error", "no preload proof: the program never loaded allocmark's companion library (statically "
                                  "linked, set-uid, or it replaced its environment), so which allocator served it is unknown"}});
    else if (exit_zero && !exit_event.is_object())
      builder.on_event({{"event", "error"},
                        {"error", "no preload proof: the companion library reported at the start of process " +
                                      std::to_string(w.pid) + ", but not at its exit: its final image did not load it "
                                      "(an exec without LD_PRELOAD), closed descriptor 3, or ended by the exit_group "
                                      "system call rather than exit() or _exit(), so which allocator served it is unknown"}});
    else if (builder.saw_start() && !end.timed_out && !interrupted)
      builder.on_event({{"event", "done"},
                        {"alloc_stats", exit_event.is_object() ? exit_event.value("alloc_stats", json::object()) : json::object()},
                        {"contention", exit_event.is_object() ? exit_event.value("contention", json()) : json()}});
    json extra = stdout_summary(stdout_path);
    extra["exit_code"] = WIFEXITED(end.wait_status) ? json(WEXITSTATUS(end.wait_status)) : json(nullptr);
    extra["exit_signal"] = WIFSIGNALED(end.wait_status) ? json(WTERMSIG(end.wait_status)) : json(nullptr);
    extra["phase_mark_errors"] = phases->bad_lines();
    extra["stdout"] = stdout_path;
    extra["outlived_by"] = outlived_by;
    json where = placement::to_json(program_placement);
    const bool pinned = program_placement.spec.kind != placement::PinSpec::Kind::none;
    where["program_cpus"] = pinned ? json(topology::format_list(program_placement.candidate_cpus)) : json(nullptr);
    where["thread_cpus"] = where["thread_nodes"] = nullptr;  // the program's threads are placed by the kernel
    where["allowed"] = placement::to_json(placement::current_allowed());
    extra["placement"] = where;
    extra["pinned_cpus"] = nullptr;
    builder.annotate(extra);
  }
  // The worker's whole group is dead by now, so nothing writes into the folder any more; a cell
  // that crashed or timed out leaves nothing behind either.
  if (!data_dir.empty() && !settings.keep_data) {
    try {
      DataRoot root = locate_data_root(settings.data_root);
      if (auto data = root.above.sub_if_exists(root.name)) data->remove_tree(results::layout::data_folder_name(log_path));
      root.above.remove_if_empty(root.name);  // only when no other cell's folder is kept there
    } catch (const results::ResultsError&) {
      // A data root that became a link is left alone, and what is below it; the record counts more.
    }
  }
  const double wall_s = (exit_ns - start_ns) / 1e9;

  end.saw_done = builder.saw_done();
  end.error_event = builder.error_event();
  end.partial_bytes = stream.partial_bytes();
  end.malformed_lines = stream.malformed_lines();
  if (!end.timed_out && !interrupted && !(end.saw_done && WIFEXITED(end.wait_status) && WEXITSTATUS(end.wait_status) == 0))
    end.log_tail = tail_of_file(log_path, 400);
  json record = builder.finish(timeline.to_json(), timeline.max_rss(), wall_s, classify(end));
  // The host the cell ran on, in the record itself: cells of one folder may come from many nodes
  // (a Slurm array), and readers never pool cells of different hosts.
  utsname host{};
  ::uname(&host);
  record["host"] = host.nodename;
  return {std::move(record), interrupted};
}

}  // namespace allocmark::runner
