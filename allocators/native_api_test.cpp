// Runs native_probe with each allocator LD_PRELOADed and checks that what the native API reports
// reflects the allocator and the environment the variant set.
#include "allocators/native_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace {

using nlohmann::json;
using allocmark::allocators::native_api;

constexpr const char* kLibDir = "/usr/lib/x86_64-linux-gnu/";

// Allocator settings inherited from whoever runs the test would make the results meaningless.
bool scrubbed(std::string_view var) {
  const auto name = var.substr(0, var.find('='));
  return name == "LD_PRELOAD" || name == "MALLOC_CONF" || name == "GLIBC_TUNABLES" ||
         name.starts_with("MALLOC_") || name.starts_with("TCMALLOC_") || name.starts_with("MIMALLOC_");
}

// Runs the probe for `backend` with `lib` preloaded (none when empty; a name in kLibDir or an
// absolute path) and `env` added; returns its JSON.
json run_probe(const std::string& backend, const std::string& lib,
               const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!scrubbed(*e)) vars.emplace_back(*e);
  }
  if (!lib.empty()) vars.push_back("LD_PRELOAD=" + (lib.front() == '/' ? lib : std::string(kLibDir) + lib));
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string probe = NATIVE_PROBE;
  std::vector<char*> argv = {probe.data(), const_cast<char*>(backend.c_str()), nullptr};

  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    else if (errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("native_probe " + backend + " failed (status " + std::to_string(status) +
                             "), output: " + out);
  }
  return json::parse(out);
}

#define REQUIRE_LIB(lib)                                                      \
  if (!std::filesystem::exists(std::string(kLibDir) + (lib))) {               \
    GTEST_FAIL() << kLibDir << (lib) << " is not installed (ci/setup.sh installs it)";                  \
  }

TEST(NativeApi, KnowsTheFourBackendsAndRejectsOthers) {
  for (const char* name : {"glibc", "jemalloc", "tcmalloc", "mimalloc"}) {
    EXPECT_EQ(native_api(name).backend, name);
  }
  EXPECT_THROW(native_api("hoard"), std::out_of_range);
  EXPECT_THROW(native_api(""), std::out_of_range);
}

// In this (un-preloaded) process the other allocators' symbols are absent: empty, not a crash.
TEST(NativeApi, AbsentAllocatorReportsNothing) {
  if (std::getenv("LD_PRELOAD") != nullptr) GTEST_SKIP() << "LD_PRELOAD is set";
  for (const char* name : {"jemalloc", "tcmalloc", "mimalloc"}) {
    SCOPED_TRACE(name);
    const auto& api = native_api(name);
    EXPECT_EQ(api.read_stats(), json::object());
    EXPECT_EQ(api.read_contention(), json::object());
    EXPECT_EQ(api.read_options(), json::object());
    EXPECT_EQ(api.version(), "");
    EXPECT_FALSE(api.purge());
  }
}

TEST(NativeApi, Glibc) {
  const json r = run_probe("glibc", "");
  EXPECT_EQ(r["backend"], "glibc");
  EXPECT_GT(r["stats"].value("uordblks", 0), 0);
  EXPECT_GT(r["stats"].value("arena", 0), 0);
  EXPECT_GE(r["stats"].value("arenas", 0), 2);
  EXPECT_EQ(r["contention"], json::object());
  EXPECT_GE(r["options"].value("arena_count", 0), 2);  // the two threads got arenas of their own
  EXPECT_TRUE(r["options"]["MALLOC_ARENA_MAX"].is_null());
  EXPECT_FALSE(r["version"].get<std::string>().empty());
  EXPECT_TRUE(r["purge_ok"].get<bool>());
}

TEST(NativeApi, GlibcArenaMax) {
  const json r = run_probe("glibc", "", {{"MALLOC_ARENA_MAX", "1"}});
  EXPECT_EQ(r["options"].value("arena_count", 0), 1);
  EXPECT_EQ(r["options"]["MALLOC_ARENA_MAX"], "1");
}

TEST(NativeApi, Jemalloc) {
  REQUIRE_LIB("libjemalloc.so.2");
  const json r = run_probe("jemalloc", "libjemalloc.so.2");
  const json& s = r["stats"];
  EXPECT_GT(s.value("stats.active", 0), 0);
  EXPECT_GT(s.value("stats.allocated", 0), 0);
  EXPECT_GE(s.value("stats.resident", 0), s.value("stats.active", 0));
  EXPECT_GE(s.value("arenas.narenas", 0), 1);
  EXPECT_FALSE(r["version"].get<std::string>().empty());
  EXPECT_TRUE(r["purge_ok"].get<bool>());
  EXPECT_EQ(r["options"]["opt.background_thread"], false);
  EXPECT_NE(r["options"]["opt.dirty_decay_ms"], 0);  // default 10000

  const json& c = r["contention"];
  EXPECT_GT(c.value("num_ops", 0), 0);
  ASSERT_TRUE(c["mutexes"].is_object());
  EXPECT_FALSE(c["mutexes"].empty());
  EXPECT_TRUE(c["mutexes"].contains("bins"));  // the two threads allocated small sizes
  std::uint64_t ops = 0;
  for (const auto& [name, m] : c["mutexes"].items()) {
    SCOPED_TRACE(name);
    EXPECT_GT(m.value("num_ops", 0), 0);
    EXPECT_LE(m["num_wait"].get<std::uint64_t>(), m["num_ops"].get<std::uint64_t>());
    ops += m["num_ops"].get<std::uint64_t>();
  }
  EXPECT_EQ(c["num_ops"].get<std::uint64_t>(), ops);
}

TEST(NativeApi, JemallocBackgroundThread) {
  REQUIRE_LIB("libjemalloc.so.2");
  const json r = run_probe("jemalloc", "libjemalloc.so.2", {{"MALLOC_CONF", "background_thread:true"}});
  EXPECT_EQ(r["options"]["opt.background_thread"], true);
  EXPECT_EQ(r["options"]["background_thread"], true);
}

TEST(NativeApi, JemallocDecay) {
  REQUIRE_LIB("libjemalloc.so.2");
  const json r =
      run_probe("jemalloc", "libjemalloc.so.2", {{"MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0"}});
  EXPECT_EQ(r["options"]["opt.dirty_decay_ms"], 0);
  EXPECT_EQ(r["options"]["opt.muzzy_decay_ms"], 0);
}

TEST(NativeApi, Tcmalloc) {
  REQUIRE_LIB("libtcmalloc.so.4");
  const json r = run_probe("tcmalloc", "libtcmalloc.so.4");
  EXPECT_GT(r["stats"].value("generic.current_allocated_bytes", 0), 0);
  EXPECT_GE(r["stats"].value("generic.heap_size", 0), r["stats"].value("generic.current_allocated_bytes", 0));
  EXPECT_EQ(r["contention"], json::object());
  EXPECT_EQ(r["options"]["tcmalloc.aggressive_memory_decommit"], 0);
  EXPECT_TRUE(r["options"]["TCMALLOC_RELEASE_RATE"].is_null());
  EXPECT_FALSE(r["version"].get<std::string>().empty());
  EXPECT_TRUE(r["purge_ok"].get<bool>());
}

TEST(NativeApi, TcmallocEnvironment) {
  REQUIRE_LIB("libtcmalloc.so.4");
  const json r = run_probe("tcmalloc", "libtcmalloc.so.4",
                           {{"TCMALLOC_AGGRESSIVE_DECOMMIT", "true"},
                            {"TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "67108864"},
                            {"TCMALLOC_RELEASE_RATE", "5"}});
  EXPECT_EQ(r["options"]["tcmalloc.aggressive_memory_decommit"], 1);
  EXPECT_EQ(r["options"]["tcmalloc.max_total_thread_cache_bytes"], 67108864);
  EXPECT_EQ(r["options"]["TCMALLOC_RELEASE_RATE"], "5");
}

TEST(NativeApi, Mimalloc) {
  REQUIRE_LIB("libmimalloc.so.2");
  const json r = run_probe("mimalloc", "libmimalloc.so.2");
  EXPECT_GT(r["stats"].value("current_rss", 0), 0);
  EXPECT_GT(r["stats"].value("peak_commit", 0), 0);
  EXPECT_EQ(r["contention"], json::object());
  EXPECT_FALSE(r["version"].get<std::string>().empty());
  EXPECT_TRUE(r["purge_ok"].get<bool>());
  ASSERT_FALSE(r["options"].contains("unverified")) << r["options"]["unverified"];
  EXPECT_EQ(r["options"]["page_reset"], 0);
  EXPECT_NE(r["options"]["decommit_delay"], 0);  // default 25 ms
}

TEST(NativeApi, MimallocEnvironment) {
  REQUIRE_LIB("libmimalloc.so.2");
  const json r = run_probe("mimalloc", "libmimalloc.so.2",
                           {{"MIMALLOC_PAGE_RESET", "1"}, {"MIMALLOC_DECOMMIT_DELAY", "0"}});
  ASSERT_FALSE(r["options"].contains("unverified")) << r["options"]["unverified"];
  EXPECT_EQ(r["options"]["page_reset"], 1);
  EXPECT_EQ(r["options"]["decommit_delay"], 0);
}

// numap's totals: reused_bytes is borrowed + moved; a library built before a total existed leaves
// it out instead of reporting 0.
TEST(NativeApi, Numap) {
  const json r = run_probe("numap", NUMAP_LIBRARY);
  ASSERT_TRUE(r["stats"].contains("reused_bytes")) << r["stats"].dump();
  EXPECT_EQ(r["stats"]["reused_bytes"].get<std::uint64_t>(),
            r["stats"]["borrowed_bytes"].get<std::uint64_t>() + r["stats"]["moved_bytes"].get<std::uint64_t>());
  EXPECT_GT(r["stats"].value("allocs", 0), 0);
  EXPECT_FALSE(r["version"].get<std::string>().empty());
}

TEST(NativeApi, NumapOlderLibraryLeavesOutTotalsItDoesNotHave) {
  const json r = run_probe("numap", NUMAP_V8_FAKE);
  EXPECT_EQ(r["stats"].value("moved_bytes", 0), 5 << 20);
  EXPECT_EQ(r["stats"].value("borrowed_bytes", 0), 3 << 20);
  EXPECT_FALSE(r["stats"].contains("reused_bytes")) << r["stats"].dump();
}

}  // namespace
