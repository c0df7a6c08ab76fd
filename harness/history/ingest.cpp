#include "harness/history/ingest.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "harness/os/spawn.h"
#include "harness/record/cell.h"
#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/model.h"

namespace allocmark::history {

namespace {

using nlohmann::json;
namespace rs = allocmark::results;

std::string hex(std::uint64_t h) { return fmt::format("{:016x}", h); }

std::string digest(const std::string& text) { return hex(record::fnv1a64(text.data(), text.size())); }

// Of the machine description, what decides whether two machines' figures are comparable (the
// fields results::machine_differences compares), so a kernel upgrade on a testbed shows.
std::string machine_fingerprint(const json& machine) {
  json part = json::object();
  if (!machine.is_object()) return digest(part.dump());
  for (const auto& [field, role] : rs::kMachineFields)
    if (role != rs::MachineRole::describes && machine.contains(field)) part[field] = machine[field];
  if (machine.contains(rs::machine_key::numa) && machine[rs::machine_key::numa].is_object())
    part["numa_nodes"] = machine[rs::machine_key::numa].value(rs::numa_key::kNodes, json(1));
  return digest(part.dump());
}

// The folder's run ids (meta.json runs[]); a folder from before them is named by its records'
// bytes instead, so adding it twice is still recognised.
std::string run_ids_of(const std::string& dir, const json& meta) {
  std::set<std::string> ids;
  if (meta.contains(rs::meta::kRuns) && meta[rs::meta::kRuns].is_array())
    for (const auto& r : meta[rs::meta::kRuns])
      if (r.is_object() && r.contains(rs::meta::run_entry::kRunId) && r[rs::meta::run_entry::kRunId].is_string())
        ids.insert(r[rs::meta::run_entry::kRunId].get<std::string>());
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  if (!out.empty()) return out;
  std::ifstream in(rs::layout::path_in(dir, rs::layout::kResults), std::ios::binary);
  std::uint64_t h = 1469598103934665603ULL;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) h = record::fnv1a64(buffer, static_cast<std::size_t>(in.gcount()), h);
  return "content:" + hex(h);
}

std::string allocmark_version_of(const json& meta) {
  if (!meta.contains(rs::meta::kAllocmark) || !meta[rs::meta::kAllocmark].is_object()) return "";
  const json& a = meta[rs::meta::kAllocmark];
  auto text = [&](const char* key) { return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : std::string(); };
  const std::string version = text(rs::meta::identity::kVersion), commit = text(rs::meta::identity::kGitCommit);
  return commit.empty() ? version : version + " (" + commit + ")";
}


std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

RunInfo run_info(const std::string& dir, const RunLabels& labels) {
  if (std::string problem = commit_problem(labels.commit, "--commit"); !problem.empty()) throw HistoryError(problem);
  RunInfo run;
  run.commit = labels.commit;
  run.branch = labels.branch;
  if (!labels.time.empty()) {
    run.time = normalise_time(labels.time, "--time");
  } else {
    // A commit date git gives is ISO 8601 already; a repository without the commit means "now".
    const std::string date = commit_field(labels.commit, "%cI");
    run.time = normalise_time(date.empty() ? fmt::format("@{}", std::time(nullptr)) : date, "the commit's date");
  }
  run.testbed = labels.testbed.empty() ? host_name() : labels.testbed;
  const rs::meta::Recorded meta = rs::meta::read(dir);
  const json machine = meta.value.value(rs::meta::kMachine, json::object());
  run.machine_fingerprint = machine_fingerprint(machine);
  run.machine_json = machine.dump();
  run.run_ids = run_ids_of(dir, meta.value);
  run.allocmark_version = allocmark_version_of(meta.value);
  return run;
}

// Every metric of the model for one phase: the metric table's, and the workload's own figures.
void add_phase_values(const rs::Model& model, const rs::CellResult& cell, const rs::PhaseValues& phase, int repetition,
                      std::vector<Value>& out) {
  for (const auto& row : rs::metric_table())
    if (auto v = rs::metric_value(row.metric, cell, phase); v && std::isfinite(*v))
      out.push_back({phase.name, std::string(row.name), repetition, *v});
  for (const auto& [index, v] : phase.workload)
    if (std::isfinite(v)) out.push_back({phase.name, model.workload_metric_name(index), repetition, v});
}

CellInfo cell_info(const rs::Model& model, const rs::CellResult& cell) {
  const rs::CellIdentity& id = model.identity(cell);
  const std::string params = id.params.dump();
  return {series_cell_id(cell.key, cell.threads, cell.rep), id.allocator, id.backend, id.workload, digest(params), params,
          cell.threads};
}

}  // namespace

std::string commit_field(const std::string& commit, const std::string& format) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return "";
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  os::SpawnOptions o;
  o.argv = {"git", "show", "-s", "--format=" + format, commit + "^{commit}", "--"};
  o.search_path = true;
  o.fds = {{pipe_fds[1], 1}};
  if (null_fd >= 0) o.fds.push_back({null_fd, 2});
  const os::SpawnResult started = os::spawn(o);
  ::close(pipe_fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  std::string out;
  char buffer[256];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  if (started.pid < 0 || !os::wait_for(started.pid, status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string series_cell_id(const std::string& key, int threads, int rep) {
  // The key's path is allocator/workload/tT/rR/HASH (record::Cell::key); the digest leaves rep out.
  const std::string part = fmt::format("/t{}/r{}/", threads, rep);
  const std::size_t at = key.rfind(part);
  if (at == std::string::npos) return key;
  return key.substr(0, at) + fmt::format("/t{}/", threads) + key.substr(at + part.size());
}

std::string commit_problem(const std::string& commit, const std::string& flag) {
  static const std::regex hex_sha("[0-9a-fA-F]{7,40}");
  if (std::regex_match(commit, hex_sha)) return "";
  return flag + ": '" + commit + "' is not a commit (7 to 40 hex digits, as `git rev-parse HEAD` prints)";
}

std::string normalise_time(const std::string& text, const std::string& flag) {
  static const std::regex iso(
      R"((\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?)");
  static const std::regex epoch(R"(@(\d{1,12}))");
  std::smatch m;
  std::time_t t = 0;
  if (std::regex_match(text, m, epoch)) {
    t = static_cast<std::time_t>(std::stoll(m[1]));
  } else if (std::regex_match(text, m, iso)) {
    auto number = [&](int i) { return m[i].matched ? std::stoi(m[i]) : 0; };
    std::tm tm{};
    tm.tm_year = number(1) - 1900, tm.tm_mon = number(2) - 1, tm.tm_mday = number(3);
    tm.tm_hour = number(4), tm.tm_min = number(5), tm.tm_sec = number(6);
    const std::tm asked = tm;
    t = ::timegm(&tm);
    // timegm folds 2026-02-30 into March: a date it had to move was not a date.
    if (tm.tm_mday != asked.tm_mday || tm.tm_hour != asked.tm_hour || tm.tm_min != asked.tm_min || tm.tm_sec != asked.tm_sec)
      throw HistoryError(flag + ": '" + text + "' is not a date and time");
    // No zone given reads as UTC, as git's and CI's ISO times carry one anyway.
    if (m[7].matched && m[7].str() != "Z") {
      const std::string z = m[7].str();
      const int minutes = std::stoi(z.substr(1, 2)) * 60 + std::stoi(z.substr(z.size() - 2));
      t -= (z[0] == '-' ? -1 : 1) * minutes * 60;
    }
  } else {
    throw HistoryError(flag + ": '" + text + "' is not an ISO 8601 time (2026-12-06T18:55:00Z, or a date)");
  }
  std::tm utc{};
  gmtime_r(&t, &utc);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

ModelCells model_cells(const rs::Model& model) {
  ModelCells out;
  // Repetitions of a cell numbered 0.. in the order of their rep, whatever order the file holds.
  std::map<std::string, std::vector<const rs::CellResult*>> by_cell;
  for (const auto& cell : model.cells()) {
    if (!cell.ok()) {
      ++out.cells_not_ok;
      continue;
    }
    by_cell[series_cell_id(cell.key, cell.threads, cell.rep)].push_back(&cell);
  }
  for (auto& [id, reps] : by_cell) {
    std::stable_sort(reps.begin(), reps.end(), [](auto* a, auto* b) { return a->rep < b->rep; });
    CellRun run{cell_info(model, *reps.front()), reps.front()->allocator_version.value_or(""),
                reps.front()->library.value_or(""), {}};
    for (std::size_t r = 0; r < reps.size(); ++r)
      for (const auto& phase : reps[r]->phases) add_phase_values(model, *reps[r], phase, static_cast<int>(r), run.values);
    out.values += run.values.size();
    out.cells.push_back(std::move(run));
  }
  return out;
}

FolderRun read_folder_run(const std::string& dir, const RunLabels& labels) {
  FolderRun out;
  out.run = run_info(dir, labels);
  const rs::Model model = rs::Model::load({dir});
  rs::refuse_folder_being_written(dir, "wait for it to end: the history would keep a partial run");
  ModelCells cells = model_cells(model);
  out.cells = std::move(cells.cells);
  out.values = cells.values;
  out.cells_not_ok = cells.cells_not_ok;
  return out;
}

}  // namespace allocmark::history
