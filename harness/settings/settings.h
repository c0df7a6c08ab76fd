// The matrix settings, declared once (as mimalloc's options table and Google Benchmark's DEFINE_
// flags are): each row of ALLOCMARK_SETTINGS is a setting's type, name (its TOML key and its
// field in meta.json, baselines and cell descriptions), default, command-line flag, kind, range,
// where it travels and its help. Everything else is derived from the rows: the flags of `run`,
// `advise`, `lab` and `gate --confirm`'s rerun, the [matrix] keys of a matrix file, validation with
// one message form, --help, meta.json's matrix, the cell description (`allocmark cell`, Slurm), the
// worker's description, the resume comparison and the settings of a confirming rerun. One Settings
// value flows from the plan to the worker. How to add one: docs/ARCHITECTURE.md, "How to add a
// setting".
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/placement/placement.h"
#include "units/config_error.h"

namespace allocmark::matrix {

// A matrix that cannot run as given (a flag, a file's key, a setting's value): exit code 2.
using allocmark::ConfigError;

inline constexpr int kMaxReps = 10000;
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;
inline constexpr int kMaxSampleMs = 60000;
inline constexpr int kMaxTimelinePoints = 10000000;
// One allocation call in N per thread is timed (0: none); its cost is in docs/benchmarks.md.
inline constexpr int kDefaultLatencyEvery = 64;
inline constexpr int kMaxLatencyEvery = 1000000000;
// The settle after a cell's last phase (its return curve, docs/results-schema.md): its points are
// read at +10 ms, +100 ms and its end, so a settle shorter than 100 ms would miss one. The default
// keeps the quick matrix within 15% of its time without one (docs/benchmarks.md, "Return curve").
inline constexpr int kMinSettleMs = 100;
inline constexpr int kMaxSettleMs = 60000;

enum class SettingKind {
  Int,     // an integer in [min, max]
  OffOrInt,  // 0 (off) or an integer in [min, max]
  Number,  // a finite number in (min, max]
  Bool,    // true or false; its flag sets the opposite of the default (--no-node-figures, --keep-data)
  Preset,  // a size preset of the workloads' parameters: quick or full
  Writes,  // how much of each block the models write: a word of workloads::kWritesNames
  Text,    // a string
};

// Where a setting travels (bits of SettingRow::scope).
enum SettingScope : unsigned {
  kMatrixKey = 1u << 0,  // a [matrix] key of a matrix file, and a field of meta.json's matrix and of baselines
  kCompared = 1u << 1,   // --resume refuses a folder recorded with another value
  kCellSpec = 1u << 2,   // in a cell description (`allocmark cell`, the Slurm executor)
  kWorker = 1u << 3,     // in the worker's description (its argv)
};

// X(type, name, default, flag, kind, min, max, scope, absent_in_record, help): one row per setting. pin and nodes
// are the placement policy's two halves, parsed together into Settings::pin (see kPlacementRows).
#define ALLOCMARK_SETTINGS(X)                                                                                        \
  X(std::string, size, "quick", "--size", Preset, 0, 0, kMatrixKey | kCompared, nullptr,                             \
    "parameter preset: quick or full")                                                                               \
  X(int, reps, 3, "--reps,-r", Int, 1, kMaxReps, kMatrixKey | kCompared, nullptr, "repetitions of every cell")                \
  X(double, timeout_s, 300, "--timeout", Number, 0, kMaxTimeoutS, kMatrixKey | kCellSpec, nullptr,                   \
    "seconds before a cell is killed and recorded as timeout")                                                       \
  X(std::string, writes, "all", "--writes", Writes, 0, 0, kMatrixKey | kCompared | kCellSpec | kWorker,               \
    "all" /* folders from before the setting wrote all */,                                                           \
    "how much of each block the workload models write: all (each model as documented), lines (its first 256 "       \
    "bytes) or page (its first 4 KiB); a program that reserves more than it writes")                                \
  X(int, sample_ms, 10, "--sample-ms", Int, 1, kMaxSampleMs, kMatrixKey | kCompared | kCellSpec, nullptr,            \
    "RSS timeline sampling period in ms")                                                                            \
  X(int, max_timeline_points, 2000, "--max-timeline-points", Int, 2, kMaxTimelinePoints,                             \
    kMatrixKey | kCompared | kCellSpec, nullptr, "most RSS timeline points per cell (the resolution halves when full)")       \
  X(int, latency_every, kDefaultLatencyEvery, "--latency-every", Int, 0, kMaxLatencyEvery,                           \
    kMatrixKey | kCompared | kCellSpec | kWorker, 0 /* folders from before call timing timed nothing */,         \
    "time one allocation call in N per thread for the latency percentiles (0: off)")                                \
  X(int, settle_ms, 200, "--settle-ms", OffOrInt, kMinSettleMs, kMaxSettleMs,                                        \
    kMatrixKey | kCompared | kCellSpec | kWorker, 0 /* folders from before the settle had none */,                   \
    "ms the worker waits, idle, after a cell's last phase, reading RSS at +10 ms, +100 ms and the end: the "         \
    "cell's return curve, outside every measured phase (0: off)")                                                   \
  X(bool, node_figures, true, "--no-node-figures", Bool, 0, 0, kMatrixKey | kCompared | kCellSpec | kWorker, nullptr, \
    "skip the per-node figures after each phase (numa_maps, move_pages: tens of ms per phase on large processes, "   \
    "in the gap before the next phase); phases[].nodes is then null")                                               \
  X(bool, keep_data, false, "--keep-data", Bool, 0, 0, kCellSpec, nullptr,                                                  \
    "keep each cell's on-disk data (DIR/data/, e.g. rocksdb's database) after the cell")                            \
  X(std::string, data_root, "", "", Text, 0, 0, kCellSpec, nullptr,                                                         \
    "where cells keep on-disk state: each gets DATA_ROOT/<its log's name>.data, removed once its worker has ended "  \
    "unless keep_data; set by the run (DIR/data), not by the user")

// How a run measures, complete: defaults, then the matrix file, then the flags.
struct Settings {
#define ALLOCMARK_SETTING_FIELD(type, name, def, ...) type name = def;
  ALLOCMARK_SETTINGS(ALLOCMARK_SETTING_FIELD)
#undef ALLOCMARK_SETTING_FIELD
  placement::PinSpec pin;  // the pin and nodes rows; compact unless asked otherwise
};

// The settings one source names (a matrix file, the flags, a recorded matrix); absent: not named.
struct SettingChoices {
#define ALLOCMARK_SETTING_CHOICE(type, name, ...) std::optional<type> name;
  ALLOCMARK_SETTINGS(ALLOCMARK_SETTING_CHOICE)
#undef ALLOCMARK_SETTING_CHOICE
  std::optional<std::string> pin, nodes;  // placement::parse_pin's texts
  std::map<std::string, std::string> origins;  // key -> where the source named it ("m.toml:4:1"), for messages
};

struct SettingRow {
  const char* key;
  const char* flag;  // CLI11 names ("--reps,-r"); "" for none
  SettingKind kind;
  double min, max;
  unsigned scope;
  const char* help;
  // What a recorded matrix without the key meant (folders from before the setting): null for the default.
  nlohmann::json absent_in_record;
  nlohmann::json (*get)(const Settings&);
  nlohmann::json (*chosen)(const SettingChoices&);  // null when the source did not name it
  void (*choose)(SettingChoices&, const nlohmann::json&);  // a value check_setting accepted
};

const std::vector<SettingRow>& setting_rows();
// How a cell is measured rather than which cells run (the matrix keys a cell description also
// carries): what a baseline keeps and a confirming rerun measures with.
inline bool is_measurement(const SettingRow& row) { return (row.scope & kMatrixKey) && (row.scope & kCellSpec); }
const SettingRow* find_setting(const std::string& key);

// `value` as the row's kind, or ConfigError "WHERE must be EXPECTED (found VALUE)". `where` names
// the value ("--latency-every:", "m.toml:4:1: 'latency_every'", "spec.json: settings.latency_every").
nlohmann::json check_setting(const SettingRow& row, const nlohmann::json& value, const std::string& where);
// A flag's text as the row's kind (then checked, the text quoted in the message).
nlohmann::json setting_from_flag(const SettingRow& row, const std::string& text);

// Every row of `scope` present in `j` (a meta.json matrix, a baseline's settings, a cell
// description) into `out`; `where(key)` names a field in messages. Rows absent keep their choice.
void read_settings(SettingChoices& out, const nlohmann::json& j, unsigned scope,
                   const std::function<std::string(const std::string& key)>& where);
// Applies `choices` over `s` (pin and nodes checked together); throws ConfigError naming the source.
void apply_settings(Settings& s, const SettingChoices& choices, const std::string& source);
// The rows of `scope` as JSON (meta.json's matrix, a cell description, the worker's description).
nlohmann::json settings_json(const Settings& s, unsigned scope);
// The placement a recorded matrix asks for: `pin`/`nodes`, or the boolean `pin_threads` of folders
// recorded before the pinning policies (true = compact, false = none).
placement::PinSpec recorded_pin(const nlohmann::json& matrix);
// The settings of scope `scope` a description holds (a cell's, the worker's), over the defaults;
// `where` names it in messages ("spec.json: settings").
Settings settings_from_json(const nlohmann::json& j, unsigned scope, const std::string& where);
// The same for a recorded matrix (meta.json's, a baseline's settings): a key the record predates
// reads as its row's absent_in_record.
Settings recorded_settings(const nlohmann::json& matrix, const std::string& where);

}  // namespace allocmark::matrix
