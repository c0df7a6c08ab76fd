// fault_inject: a diagnostic workload that fails on purpose, so tests can prove that a crashing,
// aborting, failing or hanging cell is recorded as such and the matrix goes on.
#include <csignal>
#include <cstdlib>
#include <thread>

#include "workloads/workload.h"
#include "workloads/call_latency.h"

namespace allocmark::workloads {
namespace {

class FaultInject final : public Workload {
 public:
  explicit FaultInject(const Params& p) : mode_(p.text("mode")) {}
  const std::vector<std::string>& phases() const override {
    static const std::vector<std::string> names{"run"};
    return names;
  }
  uint64_t run_phase(std::size_t, ThreadContext& ctx) override {
    if (ctx.index != 0) return 0;
    if (mode_ == "segv") std::raise(SIGSEGV);
    if (mode_ == "abort") std::abort();
    if (mode_ == "exit") std::_Exit(7);
    if (mode_ == "kill") std::raise(SIGKILL);  // what the kernel's OOM killer does
    if (mode_ == "hang")
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    void* p = workloads::allocate(1 << 20);  // "none": one harmless allocation
    workloads::release(p);
    return 1;
  }

 private:
  std::string mode_;
};

const bool registered = register_workload({
    "fault_inject",
    "diagnostic: fails on purpose (segv, abort, exit, hang) to test failure isolation",
    {"run"},
    {{"mode", ParamType::String, "none", "none", "none | segv | abort | exit | kill | hang"}},
    [](const Params& p, int, const WorkloadEnv&) { return std::make_unique<FaultInject>(p); },
    [](const Params& p) -> std::string {
      const auto& m = p.text("mode");
      for (const char* valid : {"none", "segv", "abort", "exit", "kill", "hang"})
        if (m == valid) return "";
      return "mode '" + m + "' is not one of none, segv, abort, exit, kill, hang";
    },
    true,
});

}  // namespace
}  // namespace allocmark::workloads
