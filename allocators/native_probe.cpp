// Test helper for native_api_test: allocates in two threads, then prints what the native API of
// the backend named in argv[1] reports, as one JSON object on stdout.
#include "allocators/native_api.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

namespace {

std::mutex g_keep_mutex;
std::vector<void*> g_keep;  // blocks kept alive until the stats are read

void allocate_some(unsigned seed) {
  std::vector<void*> kept;
  for (unsigned i = 0; i < 2000; ++i) {
    const std::size_t size = std::size_t{16} << ((i + seed) % 17);  // 16 B .. 1 MiB
    void* p = std::malloc(size);
    if (p == nullptr) std::abort();
    std::memset(p, static_cast<int>(i), size < 4096 ? size : 4096);
    if (i % 4 == 0) {
      kept.push_back(p);
    } else {
      std::free(p);
    }
  }
  const std::lock_guard lock(g_keep_mutex);
  g_keep.insert(g_keep.end(), kept.begin(), kept.end());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s glibc|jemalloc|tcmalloc|mimalloc\n", argv[0]);
    return 2;
  }
  try {
    const auto& api = allocmark::allocators::native_api(argv[1]);
    std::thread a(allocate_some, 0u), b(allocate_some, 7u);
    a.join();
    b.join();
    nlohmann::json out = {{"backend", std::string(api.backend)},
                          {"stats", api.read_stats()},
                          {"contention", api.read_contention()},
                          {"options", api.read_options()},
                          {"version", api.version()}};
    for (void* p : g_keep) std::free(p);
    out["purge_ok"] = api.purge();
    std::cout << out.dump() << '\n';
  } catch (const std::exception& e) {
    std::fprintf(stderr, "native_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
