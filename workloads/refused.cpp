// The refusal path of every workload (refused.h); not a workload itself.
#include "workloads/refused.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace allocmark::workloads {
namespace {
std::atomic<RefusalHandler> g_handler{nullptr};
}

void on_allocation_refused(RefusalHandler handler) { g_handler.store(handler); }

void allocation_refused(std::size_t bytes) {
  if (RefusalHandler h = g_handler.load()) h(bytes);
  std::fprintf(stderr, "malloc(%zu) returned null: the allocator refused the request\n", bytes);
  std::abort();
}

}  // namespace allocmark::workloads
