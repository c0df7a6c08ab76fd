// `allocmark list [--json]`: backends with their library, version and availability; variants;
// workloads with their parameters; allocator releases built and buildable (docs/versions.md).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "allocators/releases/releases.h"
#include "harness/cli/common.h"
#include "harness/results/safe_text.h"
#include "harness/runner/probe.h"
#include "workloads/workload.h"

namespace allocmark::cli {
namespace {

using nlohmann::json;
namespace wl = allocmark::workloads;

std::string param_type(wl::ParamType t) {
  switch (t) {
    case wl::ParamType::Int: return "int";
    case wl::ParamType::Float: return "float";
    case wl::ParamType::Bytes: return "bytes";
    case wl::ParamType::String: return "string";
  }
  return "?";
}

// What the release cache holds for the current recipes and compiler, and the sources that could be
// built besides. A broken recipe or a missing compiler is said here, never fails the whole list.
json releases_json() {
  namespace rel = allocmark::allocators::releases;
  json out{{"cache", rel::cache_root()}, {"sources", rel::sources_dir()}, {"built", json::array()}, {"buildable", json::array()}};
  try {
    std::vector<std::string> built;
    for (const auto& b : rel::built_releases()) {
      out["built"].push_back({{"release", b.release.name()}, {"backend", b.backend}, {"library", b.library},
                              {"source_sha256", b.source_sha256}, {"dir", b.dir}});
      built.push_back(b.release.name());
    }
    for (const auto& r : rel::buildable_releases())
      if (std::find(built.begin(), built.end(), r.name()) == built.end()) out["buildable"].push_back(r.name());
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  return out;
}

json list_json() {
  json out;
  auto variants = load_variants();
  out["allocators"] = runner::describe_backends(worker_path());
  for (const auto& [name, def] : variants.allocator_defs)
    out["allocators"].push_back({{"name", name}, {"kind", "variant"}, {"backend", def.backend}, {"env", def.env},
                                 {"library", def.library}, {"summary", def.description}});
  for (const auto& w : wl::registered_workloads()) {
    json entry{{"name", w.name}, {"summary", w.summary}, {"phases", w.phases}, {"diagnostic", w.diagnostic},
                {"named_only", w.named_only}, {"own_threads", static_cast<bool>(w.own_threads)}, {"live_bytes", w.tracks_live_bytes}};
    for (const auto& p : w.params)
      entry["params"].push_back({{"name", p.name}, {"type", param_type(p.type)}, {"quick", p.quick}, {"full", p.full}, {"help", p.help}});
    out["workloads"].push_back(entry);
  }
  out["releases"] = releases_json();
  return out;
}

std::string releases_text(const json& r) {
  std::string out = fmt::format("\nReleases (allocmark build FAMILY@VERSION; cache {}, sources {}):\n",
                                r["cache"].get<std::string>(), r["sources"].get<std::string>());
  if (r.contains("error")) return out + "  unavailable: " + r["error"].get<std::string>() + "\n";
  out += r["built"].empty() ? "  built: none\n" : "  built:\n";
  for (const auto& b : r["built"])
    out += fmt::format("    {:<20} {}  source {}\n", b["release"].get<std::string>(), b["library"].get<std::string>(),
                       b["source_sha256"].get<std::string>().substr(0, 12));
  std::string can;
  for (const auto& name : r["buildable"]) can += " " + name.get<std::string>();
  // Buildable lists only sources not built yet: none left is not the same as no sources at all.
  const char* none = r["built"].empty() ? " none (no release tarball in the sources folder)" : " none besides those built";
  return out + "  can be built:" + (can.empty() ? std::string(none) : can) + "\n";
}

// Library paths and versions (probed), variants' descriptions (configs/variants.toml): shown, never
// obeyed by the terminal.
std::string list_text(const json& l) {
  std::ostringstream out;
  out << "Allocators (backends, then variants from " << matrix::config_dir() << "/variants.toml):\n";
  for (const auto& a : l["allocators"]) {
    if (a["kind"] == "backend") {
      std::string state = a.value("available", false)
                              ? fmt::format("{} {}", a.value("library", ""), a.value("version", ""))
                              : "unavailable: " + a.value("why_not", std::string());
      if (a.contains("note")) state = a.value("note", "");
      out << fmt::format("  {:<20} {}\n  {:<20}   {}\n", a["name"].get<std::string>(), a.value("summary", ""), "", state);
    } else {
      std::string env;
      for (const auto& [k, v] : a["env"].items()) env += fmt::format("{}{}={}", env.empty() ? "" : " ", k, v.get<std::string>());
      if (!a.value("library", "").empty()) env += (env.empty() ? "" : " ") + std::string("library=") + a.value("library", "");
      out << fmt::format("  {:<20} [{}] {}\n  {:<20}   {}\n", a["name"].get<std::string>(), a["backend"].get<std::string>(),
                         a.value("summary", ""), "", env);
    }
  }
  out << "\nWorkloads (parameters: quick default / full default):\n";
  for (const auto& w : l["workloads"]) {
    out << fmt::format("  {}{}: {}\n    phases: ", w["name"].get<std::string>(), w["diagnostic"].get<bool>()   ? " (diagnostic)"
                       : w.value("named_only", false) ? " (only where named)"
                                                      : "",
                       w["summary"].get<std::string>());
    for (const auto& p : w["phases"]) out << p.get<std::string>() << " ";
    out << "\n";
    for (const auto& p : w["params"])
      out << fmt::format("    {:<14} {:<7} {} / {}  {}\n", p["name"].get<std::string>(), p["type"].get<std::string>(),
                         p["quick"].get<std::string>(), p["full"].get<std::string>(), p["help"].get<std::string>());
  }
  out << releases_text(l["releases"]);
  return out.str();
}

}  // namespace

Subcommand add_list_command(CLI::App& app) {
  auto as_json = std::make_shared<bool>(false);
  auto* list = app.add_subcommand("list", "backends and variants with availability; workloads with parameters");
  list->add_flag("--json", *as_json, "machine-readable output");
  return {list, [as_json] {
            json l = list_json();
            if (*as_json)
              std::cout << l.dump(2) << "\n";
            else
              std::cout << results::terminal_text(list_text(l));
            return kExitOk;
          }};
}

}  // namespace allocmark::cli
