#include "harness/matrix/plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>

#include "allocators/backends.h"
#include "allocators/releases/releases.h"
#include "harness/metrics/proc.h"
#include "workloads/replay.h"
#include "units/input_file.h"
#include "workloads/workload.h"

namespace allocmark::matrix {
namespace {

namespace wl = allocmark::workloads;

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::string param_names(const wl::WorkloadInfo& w) {
  std::vector<std::string> names;
  for (const auto& p : w.params) names.push_back(p.name);
  return join(names);
}

std::vector<std::string> runnable_workload_names() {
  std::vector<std::string> names;
  for (const auto& w : wl::registered_workloads())
    if (!w.diagnostic && !w.named_only) names.push_back(w.name);
  return names;
}

std::vector<std::string> all_workload_names() {
  std::vector<std::string> names;
  for (const auto& w : wl::registered_workloads()) names.push_back(w.name);
  return names;
}

const wl::ParamSpec* find_param(const wl::WorkloadInfo& w, const std::string& name) {
  for (const auto& p : w.params)
    if (p.name == name) return &p;
  return nullptr;
}

// A parameter's value read once, here, in the type its workload declares.
void set_param(const wl::WorkloadInfo& w, std::map<std::string, wl::ParamValue>& values, const std::string& name,
               const std::string& text, const std::string& origin) {
  const auto* spec = find_param(w, name);
  if (!spec)
    throw ConfigError(origin + ": unknown parameter '" + name + "' for workload " + w.name + " (valid: " +
                      param_names(w) + ")");
  try {
    values[name] = wl::parse_param(*spec, text);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(origin + ": " + w.name + "." + name + ": " + e.what());
  }
}

std::map<std::string, std::string> canonical_texts(const std::map<std::string, wl::ParamValue>& values) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : values) out[k] = wl::canonical_param_text(v);
  return out;
}

// A name the C library's getenv can find, and a value without control characters: anything else
// would be recorded as a setting the worker never sees.
std::string env_entry_problem(const std::string& name, const std::string& value) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (unsigned char c : name) ok = ok && (std::isalnum(c) || c == '_');
  if (!ok) {
    std::string shown;
    for (unsigned char c : name) shown += std::iscntrl(c) ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
    return "environment name '" + shown + "' is not a valid variable name (letters, digits and '_', not starting with a digit)";
  }
  for (unsigned char c : value)
    if (std::iscntrl(c)) return "the value of " + name + " contains a control character (newline, tab, ...)";
  return "";
}

// A value named twice on an axis is one point, not two cells with one key (--threads 1,1).
template <class T>
void dedupe(std::vector<T>& values, const char* axis, std::vector<std::string>& notes) {
  std::vector<T> unique;
  for (const auto& v : values)
    if (std::find(unique.begin(), unique.end(), v) == unique.end()) unique.push_back(v);
    else notes.push_back(fmt::format("{} {} is named twice; it runs once", axis, v));
  values = unique;
}

}  // namespace


namespace {

namespace al = allocmark::allocators;
namespace rel = allocmark::allocators::releases;

// The variant `name` names: a matrix file's or the built-in variants' definition, else a backend.
AllocatorDef find_def(const std::string& name, const std::map<std::string, AllocatorDef>& defs,
                      const std::string& context) {
  if (auto it = defs.find(name); it != defs.end()) return it->second;
  if (al::find_backend(name) && name != "generic") return AllocatorDef{name, name, "", {}, "", context, ""};
  std::vector<std::string> choices;
  for (const auto* b : al::backends())
    if (b->native) choices.push_back(b->from_source ? b->name + "@VERSION" : b->name);
  for (const auto& [n, d] : defs) choices.push_back(n);
  throw ConfigError(context + ": unknown allocator '" + name + "' (valid: " + join(choices) + ")");
}

void check_env(const AllocatorDef& def, const std::string& name) {
  for (const auto& [k, v] : def.env) {
    if (auto problem = env_entry_problem(k, v); !problem.empty())
      throw ConfigError(def.origin + ": allocator '" + name + "': " + problem);
    if (!al::is_allocator_env(k))
      throw ConfigError(def.origin + ": allocator '" + name + "' sets " + k +
                        ", which is not an allocator setting (" + al::allocator_env_summary() + ")");
    if (auto problem = al::env_value_problem(k, v); !problem.empty())
      throw ConfigError(def.origin + ": allocator '" + name + "': " + problem);
  }
  if (def.env.count("LD_PRELOAD"))
    throw ConfigError(def.origin + ": allocator '" + name + "' sets LD_PRELOAD; name the library with library = \"...\"");
}

// A variant's own library (`library = "..."`): a path, or a bare soname looked for like a backend's.
std::string user_library(const AllocatorDef& def, const std::string& name) {
  std::string path = def.library;
  const std::string& at = def.library_origin.empty() ? def.origin : def.library_origin;
  if (path.find('/') == std::string::npos) {
    auto found = al::locate_library(path);
    if (!found)
      throw ConfigError(at + ": allocator '" + name + "': library " + path + " not found in " + join(al::library_dirs()));
    path = *found;
  }
  if (std::string problem = units::input_file_problem(path); !problem.empty())
    throw ConfigError(at + ": allocator '" + name + "': library: " + problem);
  if (def.backend == "glibc")
    throw ConfigError(def.origin + ": allocator '" + name + "': backend glibc takes no library (it is the C library)");
  return path;
}

// The backend's system library; "" for glibc (nothing preloaded).
std::string system_library(const AllocatorDef& def, const al::Backend& backend, const std::string& name,
                           const std::string& context) {
  if (def.backend == "generic")
    throw ConfigError(def.origin + ": allocator '" + name + "' of backend generic needs library = \"/path/to/lib.so\"");
  if (backend.from_source)
    throw ConfigError(fmt::format("{}: allocator '{}': {} has no system library; name a release built from its source, "
                                  "e.g. {}@VERSION (`allocmark build {}@VERSION`; `allocmark list` shows what can be built)",
                                  context, name, backend.name, name, backend.name));
  for (const auto& soname : backend.sonames)
    if (auto found = al::locate_library(soname)) return *found;
  if (!backend.sonames.empty())
    throw ConfigError(context + ": allocator '" + name + "': " + backend.sonames.front() + " not found in " +
                      join(al::library_dirs()) + " (install Debian's " + backend.debian_package + ")");
  return "";
}

}  // namespace

ReleaseName split_release(const std::string& name) {
  const auto at = name.find('@');
  if (at == std::string::npos || name.compare(at, std::strlen(kThpNameMark), kThpNameMark) == 0) return {name, "", false};
  const auto end = name.find_first_of(":@", at + 1);
  return {name.substr(0, at) + (end == std::string::npos ? "" : name.substr(end)),
          name.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1), true};
}

namespace {

// The release's library, built first where the policy allows; its build.json's facts for the record.
void use_release(ResolvedAllocator& out, const AllocatorDef& def, const ReleaseName& rn, const std::string& name,
                 const std::string& context, const ReleasePolicy& policy) {
  if (!def.library.empty())
    throw ConfigError(def.origin + ": allocator '" + name + "': '" + rn.variant + "' names its own library, and a release (@" +
                      rn.version + ") would replace it: name one or the other");
  const auto families = rel::recipe_families();
  if (std::find(families.begin(), families.end(), def.backend) == families.end())
    throw ConfigError(fmt::format("{}: allocator '{}': {} has no releases to build (recipes: {})", context, name,
                                  def.backend, join(families)));
  rel::Release release;
  try {
    release = rel::parse_release(def.backend + "@" + rn.version);
  } catch (const std::exception& e) {
    throw ConfigError(context + ": allocator '" + name + "': " + e.what());
  }
  std::optional<rel::Built> built = rel::find_built(release);
  if (!built && policy.build) try {
      built = rel::build_release(release, "", *policy.progress);
    } catch (const std::exception& e) {
      throw ConfigError(context + ": allocator '" + name + "': " + e.what());
    }
  if (!built)
    throw ConfigError(fmt::format("{}: allocator '{}': {} is not built yet: `allocmark build {}` builds it{}", context, name,
                                  release.name(), release.name(), policy.refusal));
  out.library = built->library;
  out.release = {{"name", release.name()},         {"version", release.version},
                 {"source_sha256", built->source_sha256}, {"recipe_sha256", built->recipe_sha256},
                 {"compiler", built->compiler},        {"build", built->dir}};
}

}  // namespace

ResolvedAllocator resolve_allocator(const std::string& name, const std::map<std::string, AllocatorDef>& defs,
                                    const std::string& context, const ReleasePolicy& policy) {
  const ReleaseName rn = split_release(name);
  if (rn.named && rn.version.empty())
    throw ConfigError(context + ": allocator '" + name + "': no version after '@' (e.g. jemalloc@5.2.1:bg)");
  const AllocatorDef def = find_def(rn.variant, defs, context);
  const al::Backend* backend = al::find_backend(def.backend);
  if (!backend)
    throw ConfigError(def.origin + ": allocator '" + name + "' has unknown backend '" + def.backend +
                      "' (valid: " + al::backend_names() + ")");
  check_env(def, name);
  ResolvedAllocator out{rn.named ? name : def.name, def.backend, "", def.env, def.description, false};
  if (rn.named) {
    use_release(out, def, rn, name, context, policy);
    out.description = out.release.at("name") + " built from source" + (def.description.empty() ? "" : "; " + def.description);
  } else if (!def.library.empty()) {
    out.library = user_library(def, name);
    out.user_library = def.library.find('/') != std::string::npos;
  } else {
    out.library = system_library(def, *backend, name, context);
  }
  return out;
}

namespace {

// An axis comes from the flags, else the file, else its default; `origin` names which, for errors.
struct Axis {
  std::vector<std::string> names;
  std::string origin;
  bool defaulted = false;
};

// One parameter set of a workload: one per workload named, and one of the replay workload per
// [traces.NAME].
struct Instance {
  std::string workload;
  std::string context;  // how messages name it: "workload NAME", "path:line:col: trace NAME"
  std::map<std::string, wl::ParamValue> values;
};

// build_plan, one step per axis or check. The steps run in build()'s order, which is the order of
// the plan's notes and decides which error a matrix with several mistakes gets.
class PlanBuilder {
 public:
  PlanBuilder(const std::optional<MatrixFile>& file, const MatrixFile& variants, const Overrides& flags)
      : file_(file), flags_(flags), defs_(variants.allocator_defs) {
    if (file)
      for (const auto& [n, d] : file->allocator_defs) defs_[n] = d;
  }

  Plan build() {
    apply_all_settings();
    resolve_allocators();
    if (flags_.thp || (file_ && !file_->thp.empty())) cross_thp_modes();
    collect_programs();
    collect_traces();
    pick_workloads();
    pick_threads();
    check_param_tables();
    make_instances();
    for (const auto& set : flags_.sets) apply_set(set);
    pin_and_validate_instances();
    add_cells();
    return std::move(plan_);
  }

 private:
  // Settings: defaults, then the file, then flags.
  void apply_all_settings() {
    if (file_) apply_settings(plan_.settings, *file_, file_->path + " [matrix]");
    if (file_) plan_.expect_hours = file_->expect_hours, plan_.expect_hours_origin = file_->expect_hours_origin;
    apply_settings(plan_.settings, flags_, "flags");
  }

  Axis pick_axis(const std::optional<std::vector<std::string>>& flag, const char* flag_name,
                 const std::vector<std::string>* from_file, const char* key, std::vector<std::string> defaults) const {
    if (flag) return Axis{*flag, flag_name, false};
    if (from_file && !from_file->empty()) return Axis{*from_file, file_->path + " [matrix] " + key, false};
    return Axis{std::move(defaults), std::string("default ") + key, true};
  }

  void resolve_allocators() {
    std::vector<std::string> installed_backends;
    for (const auto* b : allocmark::allocators::backends())
      if (b->native && !b->from_source) installed_backends.push_back(b->name);
    Axis axis = pick_axis(flags_.allocators, "--allocators", file_ ? &file_->allocators : nullptr, "allocators",
                          installed_backends);
    const std::string& ctx = axis.origin;
    if (axis.names.empty()) throw ConfigError(ctx + ": no allocator named");
    std::set<std::string> seen;
    for (const auto& name : axis.names) {
      if (!seen.insert(name).second) throw ConfigError(ctx + ": allocator '" + name + "' is named twice");
      try {
        plan_.allocators.push_back(resolve_allocator(name, defs_, ctx, flags_.releases));
      } catch (const ConfigError& e) {
        if (!axis.defaulted) throw;  // a default backend that is not installed is skipped, with a note
        plan_.notes.push_back(std::string("skipped: ") + e.what());
      }
    }
    if (plan_.allocators.empty()) throw ConfigError(ctx + ": none of these allocators is installed (ci/setup.sh installs them)");
    order_releases();
  }

  // Each family's releases in version order in the places the matrix gives them (jemalloc@5.3.0,
  // jemalloc@4.4.0 run and read 4.4.0 first): every reader shows the allocator axis in plan order.
  void order_releases() {
    std::map<std::string, std::vector<std::size_t>> places;
    for (std::size_t i = 0; i < plan_.allocators.size(); ++i)
      if (!plan_.allocators[i].release.empty()) places[plan_.allocators[i].backend].push_back(i);
    for (const auto& [family, at] : places) {
      std::vector<ResolvedAllocator> releases;
      for (std::size_t i : at) releases.push_back(plan_.allocators[i]);
      std::stable_sort(releases.begin(), releases.end(), [](const ResolvedAllocator& a, const ResolvedAllocator& b) {
        return allocators::releases::release_less({a.backend, a.release.at("version")}, {b.backend, b.release.at("version")});
      });
      for (std::size_t k = 0; k < at.size(); ++k) plan_.allocators[at[k]] = std::move(releases[k]);
    }
  }

  // Only `never` can be set for one process; the machine's own mode runs as it is, any other one
  // needs a machine (or the lab's guest) in it.
  void check_thp_modes(const std::vector<std::string>& modes, const std::string& ctx) const {
    const std::string machine = flags_.cells_machine_thp ? *flags_.cells_machine_thp : metrics::thp_enabled_mode();
    const std::string machine_name =
        flags_.cells_machine_thp ? flags_.cells_machine : "this machine (/sys/kernel/mm/transparent_hugepage/enabled)";
    for (const auto& m : modes) {
      if (auto problem = thp_mode_problem(m); !problem.empty()) throw ConfigError(ctx + ": " + problem);
      if (thp_obtained_by(m) != record::kThpHowPrctl && m != machine)
        throw ConfigError(fmt::format(
            "{}: {}: the transparent huge pages of {} are {}, and only 'never' can be set for one cell; run the {} cells "
            "where it is the kernel's mode, e.g. in the lab: `allocmark lab --topology configs/topologies/two-node.toml "
            "--thp {} -- run ... --thp {}`",
            ctx, m, machine_name, machine.empty() ? "not known" : "'" + machine + "'", m, m, m));
    }
  }

  // The thp axis: every allocator once per mode, named for it (jemalloc@thp=never), so each pair
  // is its own row everywhere results are read.
  void cross_thp_modes() {
    std::vector<std::string> modes = flags_.thp ? *flags_.thp : file_->thp;
    const std::string ctx = flags_.thp ? "--thp" : file_->thp_origin + ": 'thp'";
    if (modes.empty()) throw ConfigError(ctx + ": no mode named (never, madvise, always)");
    dedupe(modes, "thp", plan_.notes);
    check_thp_modes(modes, ctx);
    std::vector<ResolvedAllocator> crossed;
    for (const auto& a : plan_.allocators)
      for (const auto& m : modes) {
        ResolvedAllocator with = a;
        with.thp = m;
        with.name = a.name + kThpNameMark + m;
        with.description += (with.description.empty() ? "" : "; ") + std::string("transparent huge pages ") + m +
                            (thp_obtained_by(m) == record::kThpHowPrctl ? " (PR_SET_THP_DISABLE for the cell's process)"
                                                                        : " (the machine's mode)");
        crossed.push_back(std::move(with));
      }
    plan_.allocators = std::move(crossed);
  }

  // Programs: the file's [programs.*] and --program; a matrix that names programs runs only them
  // unless it also names workloads.
  void collect_programs() {
    if (file_) programs_ = file_->programs;
    for (const auto& flag : flags_.programs) {
      ProgramDef def = parse_program_flag(flag);
      if (programs_.count(def.name))
        throw ConfigError(def.origin + ": program '" + def.name + "' is defined twice (also at " + programs_[def.name].origin + ")");
      programs_[def.name] = def;
    }
  }

  // `program:NAME` among the workloads (the cell's own workload name) picks that program of the
  // matrix's: naming one runs only the programs named (and any built-in workloads named beside
  // them); the others are not checked (a program of the file another machine lacks is no error
  // here) and a note names them. Then the programs that run are checked.
  void pick_programs(const std::string& ctx) {
    std::map<std::string, ProgramDef> picked;
    std::erase_if(workloads_.names, [&](const std::string& name) {
      if (!is_program(name)) return false;
      auto it = programs_.find(program_name(name));
      if (it == programs_.end())
        throw ConfigError(ctx + ": workload '" + name + "' names no program of this matrix (" +
                          (programs_.empty() ? std::string("it defines none: [programs.NAME] or --program") : join(program_workloads())) + ")");
      picked.insert(*it);
      return true;
    });
    if (!picked.empty()) {
      std::vector<std::string> left;
      for (const auto& [name, def] : programs_)
        if (!picked.count(name)) left.push_back(program_workload(name));
      if (!left.empty()) plan_.notes.push_back("not run: " + join(left) + " (" + ctx + " names other programs)");
      programs_ = std::move(picked);
    }
    for (const auto& [name, def] : programs_) check_program(def);
  }
  std::vector<std::string> program_workloads() const {
    std::vector<std::string> names;
    for (const auto& [name, def] : programs_) names.push_back(program_workload(name));
    return names;
  }

  // Traces: the file's [traces.*], cells of the replay workload; like programs, a matrix that names
  // traces runs only them unless it also names workloads.
  void collect_traces() {
    if (file_) traces_ = file_->traces;
    for (const auto& [name, def] : traces_)
      if (!valid_name(name)) throw ConfigError(def.origin + ": trace name '" + name + "' must be letters, digits, '_', '-' or '.'");
  }

  void pick_workloads() {
    workloads_ = pick_axis(flags_.workloads, "--workloads", file_ ? &file_->workloads : nullptr, "workloads",
                           programs_.empty() && traces_.empty() ? runnable_workload_names() : std::vector<std::string>{});
    dedupe(workloads_.names, "workload", plan_.notes);
    const std::string& ctx = workloads_.origin;
    pick_programs(ctx);
    if (workloads_.names.empty() && programs_.empty() && traces_.empty()) throw ConfigError(ctx + ": no workload named");
    for (const auto& name : workloads_.names)
      if (!wl::find_workload(name))
        throw ConfigError(ctx + ": unknown workload '" + name + "' (valid: " + join(all_workload_names()) + ")" +
                          (programs_.count(name) ? "; did you mean " + program_workload(name) + "?" : ""));
  }

  void pick_threads() {
    threads_ = flags_.threads ? *flags_.threads : (file_ && !file_->threads.empty() ? file_->threads : std::vector<int>{1, 2});
    for (int t : threads_)
      if (t < 1 || t > kMaxThreads) throw ConfigError("threads: " + std::to_string(t) + " is outside 1.." + std::to_string(kMaxThreads));
    dedupe(threads_, "threads", plan_.notes);
  }

  void check_param_tables() const {
    if (file_)
      for (const auto& [w, values] : file_->params)
        if (!wl::find_workload(w))
          throw ConfigError(file_->params_origin.at(w) + ": [params." + w + "] names unknown workload '" + w +
                            "' (valid: " + join(all_workload_names()) + ")");
  }

  // Parameters: the size preset's defaults, then [params.*] (then the trace's table, then --set).
  Instance default_instance(const std::string& name, const std::string& context) const {
    const auto& w = *wl::find_workload(name);
    Instance in{name, context, {}};
    for (const auto& p : w.params)
      set_param(w, in.values, p.name, plan_.settings.size == "full" ? p.full : p.quick, "workload " + name + " default");
    if (file_)
      if (auto it = file_->params.find(name); it != file_->params.end())
        for (const auto& [k, v] : it->second) set_param(w, in.values, k, v.value, v.origin);
    return in;
  }

  void make_instances() {
    for (const auto& name : workloads_.names) instances_.push_back(default_instance(name, "workload " + name));
    for (const auto& [name, def] : traces_) {
      Instance in = default_instance(wl::replay::kWorkloadName, def.origin + ": trace " + name);
      const auto& replay = *wl::find_workload(wl::replay::kWorkloadName);
      for (const auto& [k, v] : def.params) set_param(replay, in.values, k, v.value, v.origin);
      set_param(replay, in.values, "name", name, def.origin);
      instances_.push_back(std::move(in));
    }
  }

  // One --set workload.param=value, applied to every parameter set of that workload.
  void apply_set(const std::string& set) {
    std::string ctx = "--set " + set;
    auto eq = set.find('='), dot = set.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      throw ConfigError(ctx + ": expected workload.param=value");
    std::string w = set.substr(0, dot), key = set.substr(dot + 1, eq - dot - 1), value = set.substr(eq + 1);
    const auto* info = wl::find_workload(w);
    if (!info) throw ConfigError(ctx + ": unknown workload '" + w + "' (valid: " + join(all_workload_names()) + ")");
    bool found = false;
    for (auto& in : instances_)
      if (in.workload == w) {
        set_param(*info, in.values, key, value, ctx);
        found = true;
      }
    if (!found) throw ConfigError(ctx + ": workload '" + w + "' is not in this matrix (" + join(workloads_.names) + ")");
  }

  // A replay cell is its trace's contents: the path made absolute and the file's SHA-256 pinned into
  // its parameters, once, here (a file replaced later is another cell, and --resume says the matrix differs).
  void pin_and_validate_instances() {
    for (auto& in : instances_)
      if (in.workload == wl::replay::kWorkloadName) try {
          wl::replay::pin_trace(in.values);
        } catch (const units::InputFileError& e) {
          throw ConfigError(in.context + ": " + e.what());
        }
    for (const auto& in : instances_) {
      const auto& w = *wl::find_workload(in.workload);
      if (w.validate)
        if (auto problem = w.validate(wl::Params::of(in.values)); !problem.empty()) throw ConfigError(in.context + ": " + problem);
    }
  }

  // A workload that runs its own number of threads (a replay: the trace's) takes no threads axis.
  std::vector<int> threads_of(const Instance& in) {
    const auto& w = *wl::find_workload(in.workload);
    if (!w.own_threads) return threads_;
    const int own = w.own_threads(wl::Params::of(in.values));
    if (own < 1 || own > kMaxThreads)
      throw ConfigError(in.context + ": it runs " + std::to_string(own) + " threads, outside 1.." + std::to_string(kMaxThreads));
    if (threads_ != std::vector<int>{own}) {
      std::string axis;
      for (int t : threads_) axis += (axis.empty() ? "" : ",") + std::to_string(t);
      plan_.notes.push_back(in.context + " runs its own " + std::to_string(own) + " thread" + (own == 1 ? "" : "s") +
                            "; the threads axis (" + axis + ") does not apply to it");
    }
    return {own};
  }

  // Repetitions outermost, allocators innermost: slow drift on a shared machine then spreads over
  // every allocator instead of landing on one.
  void add_cells() {
    std::vector<std::vector<int>> instance_threads;
    for (const auto& in : instances_) instance_threads.push_back(threads_of(in));
    std::vector<std::map<std::string, std::string>> texts;
    for (const auto& in : instances_) texts.push_back(canonical_texts(in.values));
    for (int rep = 1; rep <= plan_.settings.reps; ++rep) {
      for (std::size_t i = 0; i < instances_.size(); ++i)
        for (int t : instance_threads[i])
          for (const auto& a : plan_.allocators) plan_.cells.push_back(Cell{a, instances_[i].workload, t, rep, texts[i]});
      // A program runs with its own threads: the threads axis does not apply, each is one cell per allocator.
      for (const auto& [name, def] : programs_)
        for (const auto& a : plan_.allocators) plan_.cells.push_back(Cell{a, program_workload(name), 1, rep, program_params(def)});
    }
  }

  const std::optional<MatrixFile>& file_;
  const Overrides& flags_;
  std::map<std::string, AllocatorDef> defs_;  // the built-in variants, then the file's
  Plan plan_;
  std::map<std::string, ProgramDef> programs_;
  std::map<std::string, TraceDef> traces_;
  Axis workloads_;
  std::vector<int> threads_;
  std::vector<Instance> instances_;
};

}  // namespace

Plan build_plan(const std::optional<MatrixFile>& file, const MatrixFile& variants, const Overrides& flags) {
  return PlanBuilder(file, variants, flags).build();
}

namespace {

// An entry of a recorded matrix's allocators or workloads, named as the cell codec reads it back. A
// workload of several parameter sets (replay:NAME per trace) is named by its instance.
std::string entry_name(const std::string& field, const nlohmann::json& item) {
  std::string name;
  if (field == matrix_key::kAllocators) {
    name = record::allocator_of_meta(item).name;
  } else {
    const Cell c = record::workload_of_meta(item);
    name = c.workload;
    const auto* w = wl::find_workload(name);
    if (w && !w->instance_param.empty())
      if (auto it = c.params.find(w->instance_param); it != c.params.end() && !it->second.empty()) name += ":" + it->second;
  }
  return name.empty() ? item.dump() : name;
}

// What differs inside one named entry, field by field; in an object (params, env) entry by entry.
void entry_changes(const std::string& name, const nlohmann::json& was, const nlohmann::json& is, std::vector<std::string>& parts) {
  for (const auto& [k, v] : was.items()) {
    const nlohmann::json& w = is.value(k, nlohmann::json());
    if (v == w) continue;
    if (!v.is_object() || !w.is_object()) {
      parts.push_back(name + " " + k + " " + v.dump() + " -> " + w.dump());
      continue;
    }
    std::set<std::string> keys;
    for (const auto& [ik, iv] : v.items()) keys.insert(ik);
    for (const auto& [ik, iv] : w.items()) keys.insert(ik);
    for (const auto& ik : keys)
      if (v.value(ik, nlohmann::json()) != w.value(ik, nlohmann::json()))
        parts.push_back(name + " " + ik + " " + v.value(ik, nlohmann::json()).dump() + " -> " + w.value(ik, nlohmann::json()).dump());
  }
}

// Named entries (allocators, workloads): what was added, removed, or changed inside one.
std::string entries_difference(const std::string& field, const nlohmann::json& a, const nlohmann::json& b) {
  std::map<std::string, nlohmann::json> na, nb;
  for (const auto& item : a) na[entry_name(field, item)] = item;
  for (const auto& item : b) nb[entry_name(field, item)] = item;
  std::vector<std::string> parts;
  for (const auto& [name, item] : nb)
    if (!na.count(name)) parts.push_back("+" + name);
  for (const auto& [name, item] : na) {
    if (nb.count(name)) entry_changes(name, item, nb[name], parts);
    else parts.push_back("-" + name);
  }
  return join(parts);
}

}  // namespace

std::string matrix_differences(const nlohmann::json& recorded, const nlohmann::json& now) {
  std::string out;
  std::vector<std::string> fields{matrix_key::kAllocators, matrix_key::kWorkloads, matrix_key::kThreads};
  for (const auto& row : setting_rows())
    if (row.scope & kCompared) fields.push_back(row.key);
  // Each setting as it was meant (a key a folder predates read as its row says), never the raw JSON.
  const Settings was_set = recorded_settings(recorded, "recorded matrix"), is_set = recorded_settings(now, "matrix");
  for (const auto& field : fields) {
    nlohmann::json a = recorded.value(field, nlohmann::json()), b = now.value(field, nlohmann::json());
    if (const SettingRow* row = find_setting(field)) a = row->get(was_set), b = row->get(is_set);
    if (a == b) continue;
    const bool entries = a.is_array() && b.is_array() && !a.empty() && a[0].is_object();
    out += (out.empty() ? "" : "; ") + field + ": " +
           (entries ? entries_difference(field, a, b) : a.dump() + " recorded, " + b.dump() + " now");
  }
  return out;
}

Cell checked_cell(const nlohmann::json& description) {
  Cell c = record::cell_from_description(description);
  if (!allocmark::allocators::find_backend(c.allocator.backend))
    throw ConfigError("cell.allocator.backend: unknown backend '" + c.allocator.backend + "'");
  if (!is_program(c.workload) && !wl::find_workload(c.workload))
    throw ConfigError("cell.workload: unknown workload '" + c.workload + "'");
  return c;
}

nlohmann::json Plan::as_json() const {
  nlohmann::json j = settings_json(settings, kMatrixKey);
  j[matrix_key::kNotes] = notes;
  for (const auto& a : allocators) j[matrix_key::kAllocators].push_back(record::meta_allocator(a));
  std::set<std::string> wl_seen;
  std::set<int> th_seen;
  for (const auto& c : cells) {
    // Each parameter set once (a matrix's several [traces.NAME] are several sets of the replay workload).
    if (wl_seen.insert(c.workload + '\n' + nlohmann::json(c.params).dump()).second)
      j[matrix_key::kWorkloads].push_back(record::meta_workload(c));
    th_seen.insert(c.threads);
  }
  j[matrix_key::kThreads] = std::vector<int>(th_seen.begin(), th_seen.end());
  j[matrix_key::kCells] = cells.size();
  return j;
}

}  // namespace allocmark::matrix
