// Building one release into the cache: check the source, unpack it into a temporary folder of the
// cache, run the recipe's steps, prove the library is the allocator, and register the entry with
// one rename(). Anything that fails before the rename leaves no entry (docs/versions.md).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "allocators/releases/command.h"
#include "allocators/releases/releases.h"
#include "harness/os/clock.h"

namespace allocmark::allocators::releases {
namespace fs = std::filesystem;

namespace {

std::string joined(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// For /bin/sh: 'text' with every ' written as '\''.
std::string sh_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Source locate_source(const Release& r, const Recipe& recipe, const std::string& explicit_source) {
  if (!explicit_source.empty() && !fs::exists(explicit_source))
    throw BuildError("--source " + explicit_source + " does not exist");
  if (auto s = find_source(r, explicit_source)) return *s;
  const std::string file = recipe.source + "-" + r.version + ".tar.gz";
  std::string tag = recipe.tag;
  tag.replace(tag.find("{version}"), 9, r.version);
  throw BuildError("no source for " + r.name() + ": looked for " + sources_dir() + "/" + file +
                   " (the sources folder: $ALLOCMARK_SOURCES, else " + cache_root() +
                   "/sources); give --source PATH, or put the release there: releases come from the upstream tags (" +
                   recipe.upstream + ", tag " + tag + ", saved as " + file + ")");
}

// Refuses a source that lacks any of the recipe's files (`has` says whether one is there).
void require_files(const Source& s, const Release& r, const Recipe& recipe, const std::function<bool(const std::string&)>& has) {
  std::vector<std::string> missing;
  for (const auto& f : recipe.required_files)
    if (!has(f)) missing.push_back(f);
  if (!missing.empty())
    throw BuildError(s.path + " is not a " + r.family + " source: it lacks " + joined(missing) + " (a release of " +
                     recipe.upstream + " has " + joined(recipe.required_files) + ")");
}

// The folder the build unpacks or copies the source into: the tarball's one top folder, after
// checking that it is a gzip tar holding the recipe's files; FAMILY-VERSION for a source folder.
std::string check_source(const Source& s, const Release& r, const Recipe& recipe) {
  if (s.folder) {
    require_files(s, r, recipe, [&](const std::string& f) { return fs::is_regular_file(fs::path(s.path) / f); });
    return r.family + "-" + r.version;
  }
  CommandResult list = capture({"tar", "-tzf", s.path}, true);
  if (list.status != 0)
    throw BuildError(s.path + " is not a source of " + r.name() + ": not a gzip-compressed tar archive (tar: " +
                     first_line(list.output) + ")");
  std::set<std::string> entries;
  std::istringstream lines(list.output);
  std::string top, line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const std::string first = line.substr(0, line.find('/'));
    if (top.empty()) top = first;
    if (first != top) throw BuildError(s.path + " is not a release tarball: it holds " + top + " and " + first + ", not one top folder");
    entries.insert(line);
  }
  require_files(s, r, recipe, [&](const std::string& f) { return !top.empty() && entries.count(top + "/" + f) > 0; });
  return top;
}

// Holds the cache's lock for one entry: a second build of the same release waits here.
class EntryLock {
 public:
  EntryLock(const std::string& path, const std::string& what, std::ostream& progress) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw BuildError("cannot open the cache's lock " + path + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    progress << "waiting for another build of " << what << " (" << path << ")" << std::endl;
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) throw BuildError("cannot lock " + path + ": " + std::strerror(errno));
  }
  ~EntryLock() { ::close(fd_); }
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  int fd_ = -1;
};

// Temporary folders of builds whose process is gone (killed midway): never registered, removed.
void remove_stale_temps(const std::string& builds) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(builds, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp-", 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.substr(name.rfind('-') + 1).c_str()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
}

std::string expand(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values)
    for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

std::string tail_of(const std::string& path, std::size_t count) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::size_t from = lines.size() > count ? lines.size() - count : 0;
  std::string out;
  for (std::size_t i = from; i < lines.size(); ++i) out += "  " + lines[i] + "\n";
  return out;
}

double children_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The dynamic symbols `library` defines, or "" with `why` set.
std::set<std::string> defined_symbols(const std::string& library, std::string& why) {
  CommandResult nm = capture({"nm", "-D", "--defined-only", library}, true);
  std::set<std::string> out;
  if (nm.status != 0) {
    why = "nm cannot read it: " + first_line(nm.output);
    return out;
  }
  std::istringstream lines(nm.output);
  for (std::string line; std::getline(lines, line);) {
    std::string name = line.substr(line.rfind(' ') + 1);
    out.insert(name.substr(0, name.find('@')));  // malloc@@GLIBC_2.2.5 style versions
  }
  return out;
}

// The SONAME the dynamic linker would use, so that the cached file keeps it as its name.
std::string soname_of(const std::string& library) {
  CommandResult dump = capture({"objdump", "-p", library});
  std::istringstream lines(dump.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string key, value;
    if (words >> key >> value && key == "SONAME") return value;
  }
  return fs::path(library).filename().string();
}

}  // namespace

// What one build is doing: where, with what, and how far it got.
class ReleaseBuild {
 public:
  ReleaseBuild(const Release& r, Recipe recipe, Source source, std::string compiler, std::string entry)
      : r_(r), recipe_(std::move(recipe)), source_(std::move(source)), compiler_(std::move(compiler)),
        entry_(std::move(entry)) {
    tmp_ = fs::path(entry_).parent_path().string() + "/.tmp-" + r_.family + "-" + r_.version + "-" +
           std::to_string(::getpid());
    log_ = tmp_ + "/entry/build.log";
  }

  Built run(const std::string& top, std::ostream& progress) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
    fs::create_directories(tmp_ + "/entry");
    fs::create_directories(tmp_ + "/work/build");
    if (source_.folder) fs::create_directories(tmp_ + "/work/" + top);
    const auto start = os::Clock::now();
    const double cpu0 = children_cpu_seconds();
    try {
      // A source folder is copied whole, so the build never writes into the user's tree.
      step(source_.folder ? "cp -a " + sh_quoted(source_.path + "/.") + " " + sh_quoted(tmp_ + "/work/" + top)
                          : "tar -xzf " + sh_quoted(source_.path) + " -C " + sh_quoted(tmp_ + "/work"),
           tmp_, progress, 0);
      const std::string src = tmp_ + "/work/" + top, build = tmp_ + "/work/build";
      values_ = {{"{src}", src}, {"{build}", build}, {"{jobs}", std::to_string(jobs())}, {"{version}", r_.version}};
      for (std::size_t i = 0; i < recipe_.steps.size(); ++i) step(expand(recipe_.steps[i], values_), src, progress, i + 1);
      const std::string library = install_library();
      wall_ = std::chrono::duration<double>(os::Clock::now() - start).count();
      cpu_ = children_cpu_seconds() - cpu0;
      return register_entry(library);
    } catch (...) {  // a full disk (filesystem_error) as much as a failed step: nothing half-built stays
      fs::remove_all(tmp_, ec);
      throw;
    }
  }

 private:
  static long jobs() {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
  }

  void step(const std::string& command, const std::string& cwd, std::ostream& progress, std::size_t number) {
    progress << "building " << r_.name() << ": " << command << std::endl;
    { std::ofstream(log_, std::ios::app) << "$ " << command << "\n"; }
    const int status = run_logged(command, cwd, log_, {"CC=" + cc("CC", "cc"), "CXX=" + cc("CXX", "c++")});
    if (status == 0) return;
    fail("failed at step " + std::to_string(number) + " (" + command + "): exit status " + std::to_string(status));
  }

  static std::string cc(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
  }

  // Keeps the log outside the temporary folder (removed next), then throws with its last lines.
  [[noreturn]] void fail(const std::string& what) {
    const std::string kept = cache_root() + "/logs/" + fs::path(entry_).filename().string() + "-failed.log";
    std::error_code ec;
    fs::create_directories(fs::path(kept).parent_path(), ec);
    fs::copy_file(log_, kept, fs::copy_options::overwrite_existing, ec);
    throw BuildError("building " + r_.name() + " " + what + "\nlast lines of its log:\n" + tail_of(kept, 20) +
                     "the whole log: " + kept + "\n(the recipe " + recipe_.path + " needs the Debian packages " +
                     joined(recipe_.packages) + ")");
  }

  // The built library, proved to be the allocator, copied into the entry under its SONAME.
  std::string install_library() {
    const std::string built = expand(recipe_.library, values_);
    if (!fs::exists(built)) fail("made no library: " + built + " does not exist");
    std::string why;
    const auto symbols = defined_symbols(built, why);
    if (!why.empty()) fail("made " + built + ", which is not a shared library (" + why + ")");
    for (const std::string& need : {std::string("malloc"), recipe_.signature})
      if (!symbols.count(need))
        fail("made " + built + ", which does not export " + need + (need == "malloc" ? " (it would replace no allocator)" :
             " (the symbol that proves it is " + r_.family + ")"));
    const std::string name = soname_of(built);
    fs::copy_file(fs::canonical(built), tmp_ + "/entry/" + name);
    return name;
  }

  Built register_entry(const std::string& library_name) {
    Built b{r_, entry_ + "/" + library_name, source_.sha256, recipe_.sha256, compiler_, entry_, entry_ + "/build.log",
            recipe_.backend, true};
    write_json(b);
    if (::rename((tmp_ + "/entry").c_str(), entry_.c_str()) != 0)
      fail("could not be registered: rename to " + entry_ + ": " + std::strerror(errno));
    std::error_code ec;
    fs::remove_all(tmp_, ec);
    return b;
  }

  void write_json(const Built& b) const {
    const std::time_t now = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    nlohmann::json j{{"release", {{"family", r_.family}, {"version", r_.version}}},
                     {"backend", b.backend}, {"library", b.library}, {"source", source_.path},
                     {"source_sha256", b.source_sha256}, {"recipe", recipe_.path}, {"recipe_sha256", b.recipe_sha256},
                     {"compiler", b.compiler}, {"steps", recipe_.steps}, {"jobs", jobs()},
                     {"log", b.log}, {"built_at", when}, {"wall_seconds", wall_}, {"cpu_seconds", cpu_},
                     {"allocmark_commit", ALLOCMARK_GIT_COMMIT}};
    std::ofstream(tmp_ + "/entry/build.json") << j.dump(2) << "\n";
  }

  Release r_;
  Recipe recipe_;
  Source source_;
  std::string compiler_, entry_, tmp_, log_;
  std::vector<std::pair<std::string, std::string>> values_;
  double wall_ = 0, cpu_ = 0;
};

Built build_release(const Release& r, const std::string& explicit_source, std::ostream& progress) {
  const Recipe recipe = load_recipe(r.family);
  const Source source = locate_source(r, recipe, explicit_source);
  const std::string top = check_source(source, r, recipe);
  const std::string compiler = compiler_identity();
  const std::string builds = cache_root() + "/builds";
  std::error_code ec;
  fs::create_directories(builds, ec);
  if (ec) throw BuildError("cannot create the build cache " + builds + ": " + ec.message());
  remove_stale_temps(builds);
  const std::string name = r.family + "-" + r.version + "-" + cache_key(source.sha256, recipe.sha256, compiler);
  EntryLock lock(builds + "/.lock-" + name, r.name(), progress);
  if (auto b = read_entry(builds + "/" + name)) return *b;  // built before, or by the build we waited for
  fs::remove_all(builds + "/" + name, ec);  // an entry someone damaged (its library removed): built again
  return ReleaseBuild(r, recipe, source, compiler, builds + "/" + name).run(top, progress);
}

}  // namespace allocmark::allocators::releases
