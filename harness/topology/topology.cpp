#include "harness/topology/topology.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "harness/os/files.h"
#include "harness/toml/unknown_keys.h"

#include "units/input_file.h"
#include "units/units.h"

namespace allocmark::topology {
namespace {

std::string at(const std::string& path, const toml::source_region& src) {
  std::ostringstream out;
  out << path << ":" << src.begin.line << ":" << src.begin.column;
  return out.str();
}

[[noreturn]] void fail(const std::string& path, const toml::node& node, const std::string& what) {
  throw TopologyError(at(path, node.source()) + ": " + what);
}

void reject_unknown_keys(const std::string& path, const toml::table& table, const std::string& section,
                         const std::set<std::string>& allowed) {
  if (std::string what = toml_files::unknown_key(path, table, section, allowed); !what.empty()) throw TopologyError(what);
}

const toml::node& required(const std::string& path, const toml::table& table, const char* key,
                           const std::string& section) {
  const toml::node* node = table.get(key);
  if (!node) fail(path, table, section + " has no '" + key + "'");
  return *node;
}

std::string read_text(const std::filesystem::path& file) { return os::read_text(file.string()); }

std::uint64_t meminfo_total_bytes(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto pos = line.find(label);
    if (pos == std::string::npos) continue;
    return std::strtoull(line.c_str() + pos + label.size(), nullptr, 10) * 1024;  // "kB"
  }
  return 0;
}

}  // namespace

int Topology::node_index_of_cpu(int cpu) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (std::binary_search(nodes[i].cpus.begin(), nodes[i].cpus.end(), cpu)) return static_cast<int>(i);
  return -1;
}

int Topology::index_of_node(int id) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].id == id) return static_cast<int>(i);
  return -1;
}

int Topology::cpu_count() const {
  int n = 0;
  for (const Node& node : nodes) n += static_cast<int>(node.cpus.size());
  return n;
}

std::vector<int> parse_list(std::string_view text) {
  std::vector<int> out;
  std::string s(text);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return out;
  std::stringstream items(s);
  std::string item;
  auto number = [&](const std::string& t) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT_MAX)
      throw std::invalid_argument("'" + item + "' in '" + s + "' is not a number or a range such as 0-3");
    return static_cast<int>(v);
  };
  while (std::getline(items, item, ',')) {
    auto dash = item.find('-');
    int lo = number(item.substr(0, dash));
    int hi = dash == std::string::npos ? lo : number(item.substr(dash + 1));
    if (hi < lo) throw std::invalid_argument("range '" + item + "' in '" + s + "' runs backwards");
    if (hi - lo > 1 << 20) throw std::invalid_argument("range '" + item + "' in '" + s + "' is too large");
    for (int v = lo; v <= hi; ++v) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw std::invalid_argument("'" + s + "' names an item twice");
  return out;
}

std::string format_list(const std::vector<int>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

void validate(const Topology& t, const std::string& where) {
  auto bad = [&](const std::string& what) { throw TopologyError(where + ": " + what); };
  if (t.nodes.empty()) bad("no nodes");
  if (t.nodes.size() > static_cast<std::size_t>(kMaxNodes))
    bad(std::to_string(t.nodes.size()) + " nodes; at most " + std::to_string(kMaxNodes) + " are supported");
  std::map<int, int> owner;  // cpu -> node id
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    std::string name = "node " + std::to_string(n.id);
    if (i > 0 && n.id <= t.nodes[i - 1].id) bad("node ids must be listed in increasing order, without repeats (" + name + ")");
    if (n.memory_bytes == 0) bad(name + " has no memory");
    for (int cpu : n.cpus) {
      auto [it, fresh] = owner.emplace(cpu, n.id);
      if (!fresh) bad("CPU " + std::to_string(cpu) + " is in node " + std::to_string(it->second) + " and in " + name);
    }
    if (n.distances.size() != t.nodes.size())
      bad(name + " has " + std::to_string(n.distances.size()) + " distances; it needs one per node (" +
          std::to_string(t.nodes.size()) + ")");
    for (std::size_t j = 0; j < t.nodes.size(); ++j) {
      int d = n.distances[j];
      std::string pair = "distance " + std::to_string(n.id) + "->" + std::to_string(t.nodes[j].id);
      if (i == j && d != kLocalDistance) bad(pair + " is " + std::to_string(d) + "; a node's distance to itself is 10");
      if (i != j && (d <= kLocalDistance || d > kMaxDistance))
        bad(pair + " is " + std::to_string(d) + "; remote distances are 11..254");
    }
  }
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    for (std::size_t j = i + 1; j < t.nodes.size(); ++j)
      if (t.nodes[i].distances[j] != t.nodes[j].distances[i])
        bad("asymmetric distances: " + std::to_string(t.nodes[i].id) + "->" + std::to_string(t.nodes[j].id) + " is " +
            std::to_string(t.nodes[i].distances[j]) + " but " + std::to_string(t.nodes[j].id) + "->" +
            std::to_string(t.nodes[i].id) + " is " + std::to_string(t.nodes[j].distances[i]));
  if (owner.empty()) bad("no node has CPUs");
}

Topology load_topology_file(const std::string& path, const std::string& what) {
  if (std::string problem = units::input_file_problem(path); !problem.empty()) throw TopologyError(what + ": " + problem);
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    std::ostringstream out;
    out << path;
    if (b.line != 0) out << ":" << b.line << ":" << b.column;
    out << ": " << e.description();
    throw TopologyError(out.str());
  }
  reject_unknown_keys(path, root, "a topology file", {"name", "description", "node"});
  Topology t;
  t.source = path;
  if (const toml::node* n = root.get("name")) {
    if (!n->is_string()) fail(path, *n, "'name' must be a string");
    t.name = n->as_string()->get();
  } else {
    t.name = std::filesystem::path(path).stem().string();
  }
  if (const toml::node* d = root.get("description")) {
    if (!d->is_string()) fail(path, *d, "'description' must be a string");
    t.description = d->as_string()->get();
  }
  const toml::node* nodes = root.get("node");
  if (!nodes) throw TopologyError(path + ": no [[node]] tables (one per NUMA node)");
  const toml::array* list = nodes->as_array();
  if (!list || !list->is_array_of_tables()) fail(path, *nodes, "'node' must be [[node]] tables");
  for (const toml::node& entry : *list) {
    const toml::table& table = *entry.as_table();
    reject_unknown_keys(path, table, "[[node]]", {"id", "cpus", "memory", "distances"});
    Node node;
    const toml::node& id = required(path, table, "id", "[[node]]");
    if (!id.is_integer() || id.as_integer()->get() < 0 || id.as_integer()->get() > INT_MAX)
      fail(path, id, "'id' must be a node number (0 or more)");
    node.id = static_cast<int>(id.as_integer()->get());
    const toml::node& cpus = required(path, table, "cpus", "[[node]]");
    if (!cpus.is_string()) fail(path, cpus, "'cpus' must be a CPU list string such as \"0-3,8\" (\"\" for none)");
    try {
      node.cpus = parse_list(cpus.as_string()->get());
    } catch (const std::invalid_argument& e) {
      fail(path, cpus, std::string("'cpus': ") + e.what());
    }
    const toml::node& memory = required(path, table, "memory", "[[node]]");
    try {
      if (!memory.is_string()) throw std::invalid_argument("must be a size string such as \"512M\"");
      node.memory_bytes = units::parse_bytes(memory.as_string()->get());
    } catch (const std::invalid_argument& e) {
      fail(path, memory, std::string("'memory' ") + e.what());
    }
    const toml::node& distances = required(path, table, "distances", "[[node]]");
    const toml::array* row = distances.as_array();
    if (!row) fail(path, distances, "'distances' must be a list of integers, one per node");
    for (const toml::node& d : *row) {
      if (!d.is_integer()) fail(path, d, "'distances' must be a list of integers, one per node");
      node.distances.push_back(static_cast<int>(std::clamp<std::int64_t>(d.as_integer()->get(), INT_MIN, INT_MAX)));
    }
    t.nodes.push_back(std::move(node));
  }
  validate(t, path);
  return t;
}

Topology detect(const std::string& sysfs_root) {
  namespace fs = std::filesystem;
  Topology t;
  t.name = "detected";
  t.source = "sysfs:" + sysfs_root;
  fs::path base = fs::path(sysfs_root) / "devices/system/node";
  std::vector<int> online;
  try {
    online = parse_list(read_text(base / "online"));
  } catch (const std::invalid_argument&) {
  }
  if (online.empty()) {
    Node only;
    try {
      only.cpus = parse_list(read_text(fs::path(sysfs_root) / "devices/system/cpu/online"));
    } catch (const std::invalid_argument&) {
    }
    only.memory_bytes = meminfo_total_bytes(os::read_text("/proc/meminfo"), "MemTotal:");
    only.distances = {kLocalDistance};
    t.nodes.push_back(only);
    return t;
  }
  for (int id : online) {
    fs::path dir = base / ("node" + std::to_string(id));
    Node n;
    n.id = id;
    try {
      n.cpus = parse_list(read_text(dir / "cpulist"));
    } catch (const std::invalid_argument&) {
    }
    n.memory_bytes = meminfo_total_bytes(read_text(dir / "meminfo"), "MemTotal:");
    std::istringstream row(read_text(dir / "distance"));
    for (std::size_t k = 0; k < 4096; ++k) {  // the kernel lists distances to every possible node
      int d;
      if (!(row >> d)) break;
      n.distances.push_back(d);
    }
    t.nodes.push_back(std::move(n));
  }
  // sysfs' distance rows cover every node id up to the highest online one; keep the online columns.
  for (Node& n : t.nodes) {
    std::vector<int> kept;
    for (const Node& to : t.nodes)
      kept.push_back(to.id < static_cast<int>(n.distances.size()) ? n.distances[to.id] : 0);
    n.distances = std::move(kept);
  }
  return t;
}

nlohmann::json to_json(const Topology& t) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const Node& n : t.nodes)
    nodes.push_back({{"id", n.id}, {"cpus", format_list(n.cpus)}, {"memory_bytes", n.memory_bytes}, {"distances", n.distances}});
  return {{json_key::kName, t.name}, {json_key::kSource, t.source}, {json_key::kNodes, nodes}};
}

std::string to_toml(const Topology& t) {
  std::ostringstream out;
  out << "name = " << toml::value<std::string>(t.name) << "\n";
  if (!t.description.empty()) out << "description = " << toml::value<std::string>(t.description) << "\n";
  for (const Node& n : t.nodes) {
    out << "\n[[node]]\nid = " << n.id << "\ncpus = \"" << format_list(n.cpus) << "\"\n";
    out << "memory = \"" << (n.memory_bytes % (1 << 20) == 0 ? std::to_string(n.memory_bytes >> 20) + "M" : std::to_string(n.memory_bytes))
        << "\"\ndistances = [";
    for (std::size_t j = 0; j < n.distances.size(); ++j) out << (j ? ", " : "") << n.distances[j];
    out << "]\n";
  }
  return out.str();
}

}  // namespace allocmark::topology
