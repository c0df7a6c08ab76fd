// meta.json, the description of a results folder (machine, matrix, runs, allocators; docs/results-schema.md):
// its top-level field names and its decoding, defined once for the run that writes it and for every
// reader (report, gate, baseline, merge, status, the model). The `matrix` object inside is the plan's
// own (matrix/plan.h) and opaque here.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>

namespace allocmark::results::meta {

inline constexpr const char* kAllocmark = "allocmark";    // the version and commit that wrote the folder
inline constexpr const char* kMachine = "machine";        // the host's description (machine.h), absent for a merge of several
inline constexpr const char* kMachines = "machines";      // HOST -> description: batch nodes, merged hosts
inline constexpr const char* kMatrix = "matrix";          // the plan (Plan::as_json)
inline constexpr const char* kMatrixFile = "matrix_file";
inline constexpr const char* kRuns = "runs";              // one entry per run into the folder: mode, started, command
inline constexpr const char* kAllocators = "allocators";  // what served malloc for each allocator
inline constexpr const char* kBackends = "backends";
inline constexpr const char* kLab = "lab";                // set by `allocmark lab`
inline constexpr const char* kMergedFrom = "merged_from";
inline constexpr const char* kStarted = "started";        // when the folder was made (seconds since the epoch)
inline constexpr const char* kStrippedEnvironment = "stripped_environment";
inline constexpr const char* kTopology = "topology";      // the machine's NUMA layout the placement was planned on
inline constexpr const char* kAllowed = "allowed";        // the CPUs and nodes the run was allowed

// Inside `allocmark`: what wrote the folder.
namespace identity {
inline constexpr const char* kVersion = "version";
inline constexpr const char* kGitCommit = "git_commit";
}  // namespace identity

// An entry of `allocators`: the allocator (record::meta_allocator less its thp mode, which the
// matrix's entry says) and what the preload probe found serving it.
namespace served {
inline constexpr const char* kServedBy = "served_by";          // the library serving malloc
inline constexpr const char* kVersion = "version";             // as the allocator reports it
inline constexpr const char* kOptions = "options";             // its settings as it reports them
inline constexpr const char* kPreloadCheck = "preload_check";  // "ok", or why the preload did not take
}  // namespace served

// The `lab` entry, which `allocmark lab` writes (lab/runner.cpp) and readers warn by (lab_notice).
namespace lab_entry {
inline constexpr const char* kTopology = "topology";  // the booted topology (topology::to_json)
inline constexpr const char* kTopologyFile = "topology_file";
inline constexpr const char* kAccel = "accel";  // kvm or tcg
inline constexpr const char* kQemu = "qemu";
inline constexpr const char* kKernelImage = "kernel_image";
inline constexpr const char* kGuest = "guest";  // what the guest found: its facts, one object a node
inline constexpr const char* kGuestNodes = "nodes";  // in kGuest: NODE -> that node's facts (lab/guest.h fact)
inline constexpr const char* kCommand = "command";
inline constexpr const char* kGuestCommand = "guest_command";
inline constexpr const char* kCarried = "carried";
inline constexpr const char* kTimeoutS = "timeout_s";
inline constexpr const char* kGuestDeadlineS = "guest_deadline_s";
inline constexpr const char* kStoppedByTimeout = "stopped_by_timeout";
inline constexpr const char* kNote = "note";  // what the figures of a virtual machine are worth
}  // namespace lab_entry

// An entry of `runs`.
namespace run_entry {
inline constexpr const char* kMode = "mode";        // run, resume, merge, ...
inline constexpr const char* kStarted = "started";  // seconds since the epoch
inline constexpr const char* kCommand = "command";  // the command line
inline constexpr const char* kRunId = "run_id";      // the id every record the run wrote carries
inline constexpr const char* kExecutor = "executor";  // local, slurm, ...
}  // namespace run_entry

// What a run records in a new folder (`run`, `advise`, `gate --confirm`, `lab` inside its guest).
struct NewFolder {
  nlohmann::json allocmark;  // {"version", "git_commit"} of the program writing it
  nlohmann::json machine, allocators, backends, matrix;
  std::string matrix_file;
  nlohmann::json stripped_environment, topology, allowed;
  nlohmann::json run;  // the first entry of `runs`
};
nlohmann::json encode(const NewFolder& folder);

// meta.json's text decoded: the object, or nothing when it is not a JSON object.
std::optional<nlohmann::json> decode(const std::string& text);

// DIR/meta.json as a reader finds it. A fifo or device there is a ResultsError (check_readable_file).
struct Recorded {
  enum class State { missing, invalid, ok };
  std::string path;  // DIR/meta.json, for messages
  State state = State::missing;
  nlohmann::json value = nlohmann::json::object();  // the object when ok, else empty
  bool ok() const { return state == State::ok; }
};
Recorded read(const std::string& dir);

// The recording host's name ("" when not recorded).
std::string host(const nlohmann::json& meta);
// host -> machine description: `machines` (batch nodes, merged hosts), and `machine` for its host.
std::map<std::string, nlohmann::json> machines(const nlohmann::json& meta);

// The thread placement the matrix recorded, as `--pin` and `--nodes` would say it ("compact",
// "scatter on nodes 0-1"); what is wrong with it when it cannot be read.
std::string placement_text(const nlohmann::json& matrix);

}  // namespace allocmark::results::meta
