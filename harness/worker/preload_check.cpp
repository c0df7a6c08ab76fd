#include "harness/worker/preload_check.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>

namespace allocmark::worker {
namespace {
std::string canonical(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}
std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
}  // namespace

std::string library_serving(const char* symbol) {
  void* address = ::dlsym(RTLD_DEFAULT, symbol);
  if (!address) return "";
  Dl_info info{};
  if (::dladdr(address, &info) == 0 || !info.dli_fname) return "";
  return canonical(info.dli_fname);
}

std::string check_served_by(const std::string& served_by, const std::string& expected) {
  if (served_by.empty()) return "cannot tell which library serves malloc (dladdr found none)";
  if (expected.empty()) {
    std::string base = basename_of(served_by);
    if (base.rfind("libc.so", 0) == 0 || base.rfind("libc-", 0) == 0) return "";
    return "malloc is served by " + served_by + ", not by the C library";
  }
  if (canonical(expected) == served_by) return "";
  return "preload did not take: malloc is served by " + served_by + ", not by " + expected;
}

}  // namespace allocmark::worker
