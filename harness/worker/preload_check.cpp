#include "harness/worker/preload_check.h"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <cstring>

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

// The first object after the executable, in lookup order, that defines `symbol` itself.
static std::string first_definition_after_executable(const char* symbol) {
  void* self = ::dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);
  link_map* map = nullptr;
  if (!self || ::dlinfo(self, RTLD_DI_LINKMAP, &map) != 0 || !map) return "";
  for (link_map* l = map->l_next; l; l = l->l_next) {
    if (!l->l_name || !*l->l_name) continue;
    void* handle = ::dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    void* address = ::dlsym(handle, symbol);  // searches the object, then its dependencies
    Dl_info info{};
    const ElfW(Sym)* sym = nullptr;
    bool defines = address && ::dladdr1(address, &info, reinterpret_cast<void**>(const_cast<ElfW(Sym)**>(&sym)), RTLD_DL_SYMENT) != 0 &&
                   info.dli_fname && sym && sym->st_shndx != SHN_UNDEF && canonical(info.dli_fname) == canonical(l->l_name);
    ::dlclose(handle);
    if (defines) return canonical(l->l_name);
  }
  return "";
}

std::string library_serving(const char* symbol) {
  void* address = ::dlsym(RTLD_DEFAULT, symbol);
  if (!address) return "";
  Dl_info info{};
  const ElfW(Sym)* sym = nullptr;
  if (::dladdr1(address, &info, reinterpret_cast<void**>(const_cast<ElfW(Sym)**>(&sym)), RTLD_DL_SYMENT) == 0 || !info.dli_fname) return "";
  // A non-PIE executable that takes malloc's address (python3.11) exports a PLT stub as the
  // function's canonical address: an undefined symbol with a value, which dladdr attributes to
  // the executable though it only jumps to the real definition. Then the definition is the first
  // object after the executable in lookup order.
  if (sym && sym->st_shndx == SHN_UNDEF) {
    std::string defined = first_definition_after_executable(symbol);
    if (!defined.empty()) return defined;
  }
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
