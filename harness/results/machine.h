// What the results of a run depend on besides the allocator: kernel, CPU, NUMA layout, THP and
// overcommit modes, glibc. Read once per run by the driver, written to meta.json.
#pragma once

#include <nlohmann/json.hpp>

namespace allocmark::results {

nlohmann::json machine_info();

// What differs between two machine descriptions in what decides whether their cells are
// comparable (host, CPU model, usable CPUs, kernel, THP and overcommit modes, glibc, NUMA nodes);
// "" when nothing does.
std::string machine_differences(const nlohmann::json& recorded, const nlohmann::json& now);

// For a folder `allocmark lab` brought back from its virtual machine (meta.json `lab`): one line
// saying so, the topology and emulator, and what its figures are worth; "" for any other folder.
std::string lab_notice(const nlohmann::json& meta);

}  // namespace allocmark::results
