#include "harness/results/meta.h"

#include <ctime>
#include <fstream>
#include <iterator>

#include "harness/matrix/plan.h"
#include "harness/results/folder.h"
#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"

namespace allocmark::results::meta {

nlohmann::json encode(const NewFolder& f) {
  return nlohmann::json{{kAllocmark, f.allocmark},
                        {kMachine, f.machine},
                        {kAllocators, f.allocators},
                        {kBackends, f.backends},
                        {kMatrix, f.matrix},
                        {kMatrixFile, f.matrix_file},
                        {kStrippedEnvironment, f.stripped_environment},
                        {kTopology, f.topology},
                        {kAllowed, f.allowed},
                        {kStarted, std::time(nullptr)},
                        {kRuns, nlohmann::json::array({f.run})}};
}

std::optional<nlohmann::json> decode(const std::string& text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  if (value.is_discarded() || !value.is_object()) return std::nullopt;
  return value;
}

Recorded read(const std::string& dir) {
  Recorded out;
  out.path = layout::path_in(dir, layout::kMeta);
  check_readable_file(out.path);  // a reader follows a link: reading through one changes nothing
  std::ifstream in(out.path, std::ios::binary);
  if (!in) return out;
  std::optional<nlohmann::json> value = decode(std::string(std::istreambuf_iterator<char>(in), {}));
  out.state = value ? Recorded::State::ok : Recorded::State::invalid;
  if (value) out.value = std::move(*value);
  return out;
}

std::string host(const nlohmann::json& meta) {
  if (!meta.is_object() || !meta.contains(kMachine) || !meta[kMachine].is_object()) return "";
  const nlohmann::json& h = meta[kMachine].value(machine_key::host, nlohmann::json());
  return h.is_string() ? h.get<std::string>() : "";
}

std::map<std::string, nlohmann::json> machines(const nlohmann::json& meta) {
  std::map<std::string, nlohmann::json> out;
  if (!meta.is_object()) return out;
  if (meta.contains(kMachines) && meta[kMachines].is_object())
    for (const auto& [name, machine] : meta[kMachines].items()) out[name] = machine;
  if (std::string name = host(meta); !name.empty()) out.try_emplace(name, meta[kMachine]);
  return out;
}

std::string placement_text(const nlohmann::json& matrix) {
  try {
    const placement::PinSpec pin = matrix::recorded_pin(matrix);
    return pin.pin_text() + (pin.nodes.empty() ? "" : " on nodes " + pin.nodes_text());
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace allocmark::results::meta
