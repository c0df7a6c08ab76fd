// Makes every kind of allocation call the recorder interposes, kIterations times in each of two
// threads, each kind with its own size, so that the test can count them in the trace exactly.
// `--no-pvalloc`: under jemalloc, which has no pvalloc (glibc's block would reach jemalloc's free).
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <cstdio>
#include <new>
#include <string>
#include <thread>

namespace {

constexpr int kIterations = 500;
void* volatile g_sink;  // keeps every pair from being optimised away
bool g_pvalloc = true;

void calls() {
  const std::string text(1015, 'x');  // strdup: malloc(1016)
  for (int i = 0; i < kIterations; ++i) {
    void* p = malloc(1001);
    g_sink = p;
    free(p);
    p = calloc(3, 1002);
    g_sink = p;
    free(p);
    p = malloc(1003);
    g_sink = p;
    p = realloc(p, 5003);
    g_sink = p;
    free(p);
    if (posix_memalign(&p, 64, 1004) == 0) free(p);
    p = aligned_alloc(128, 1280);
    g_sink = p;
    free(p);
    p = memalign(256, 1006);
    g_sink = p;
    free(p);
    p = valloc(1007);
    g_sink = p;
    free(p);
    if (g_pvalloc) {
      p = pvalloc(1008);
      g_sink = p;
      free(p);
    }
    p = ::operator new(1009);
    g_sink = p;
    ::operator delete(p);
    p = ::operator new[](1010);
    g_sink = p;
    ::operator delete[](p);
    p = ::operator new(1011, std::align_val_t(64));
    g_sink = p;
    ::operator delete(p, std::align_val_t(64));
    p = ::operator new[](1012, std::align_val_t(64));
    g_sink = p;
    ::operator delete[](p, std::align_val_t(64));
    p = ::operator new(1013, std::nothrow);
    g_sink = p;
    ::operator delete(p, std::nothrow);
    p = ::operator new(1014);
    g_sink = p;
    ::operator delete(p, std::size_t{1014});
    p = ::operator new[](1017);
    g_sink = p;
    ::operator delete[](p, std::size_t{1017});
    char* s = strdup(text.c_str());
    g_sink = s;
    free(s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  g_pvalloc = !(argc > 1 && strcmp(argv[1], "--no-pvalloc") == 0);
  std::thread other(calls);
  calls();
  other.join();
  std::printf("done %d\n", kIterations);
  return 0;
}
