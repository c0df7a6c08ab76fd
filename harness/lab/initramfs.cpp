#include "harness/lab/initramfs.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/lab/vm.h"
#include "harness/runner/process.h"

namespace allocmark::lab {
namespace fs = std::filesystem;

RootTree::RootTree(std::string dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }

namespace {

bool is_elf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

std::vector<fs::path> components(const fs::path& p) {
  std::vector<fs::path> out;
  for (const auto& c : p.relative_path()) out.push_back(c);
  return out;
}

}  // namespace

void RootTree::copy_file(const std::string& from, const std::string& to) {
  fs::create_directories(fs::path(to).parent_path());
  // Debug sections are most of a RelWithDebInfo binary and never read at run time.
  bool stripped = false;
  if (is_elf(from)) {
    static const bool have_strip = runner::find_on_path("strip").has_value();
    if (have_strip) stripped = runner::run_tool({"strip", "--strip-debug", "-o", to, from}).status == 0;
  }
  if (!stripped) fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::permissions(to, fs::status(from).permissions());
  bytes_ += fs::file_size(to);
}

void RootTree::carry(const std::string& path) {
  fs::path wanted = fs::absolute(path).lexically_normal();
  if (!carried_.insert(wanted.string()).second) return;
  std::error_code ec;
  if (!fs::exists(wanted, ec)) throw LabError("cannot carry " + wanted.string() + " into the guest: it does not exist");
  // Walk the path one component at a time, reproducing each symbolic link met and continuing at
  // its target, so /lib64/ld-linux-x86-64.so.2 arrives as /lib64 -> usr/lib64 plus the real file.
  std::vector<fs::path> rest = components(wanted);
  fs::path at = "/";
  for (int links = 0; !rest.empty();) {
    fs::path next = at / rest.front();
    rest.erase(rest.begin());
    const fs::path in_tree = fs::path(dir_) / next.relative_path();
    if (fs::is_symlink(fs::symlink_status(next))) {
      if (++links > 40) throw LabError("cannot carry " + wanted.string() + ": too many symbolic links");
      const fs::path target = fs::read_symlink(next);
      fs::create_directories(in_tree.parent_path());
      if (!fs::exists(fs::symlink_status(in_tree))) fs::create_symlink(target, in_tree);
      std::vector<fs::path> resolved = components((target.is_absolute() ? target : at / target).lexically_normal());
      resolved.insert(resolved.end(), rest.begin(), rest.end());
      rest = std::move(resolved);
      at = "/";
      continue;
    }
    if (rest.empty()) {
      if (fs::is_directory(next)) fs::create_directories(in_tree);
      else if (!fs::exists(in_tree)) copy_file(next.string(), in_tree.string());
    } else {
      fs::create_directories(in_tree);
      at = next;
    }
  }
}

std::vector<std::string> libraries_in_ldd_output(const std::string& ldd_output, const std::string& what) {
  std::vector<std::string> out;
  std::istringstream in(ldd_output);
  std::string line;
  while (std::getline(in, line)) {
    // "\tlibnuma.so.1 => /lib/x86_64-linux-gnu/libnuma.so.1 (0x...)", "\t/lib64/ld-linux-x86-64.so.2 (0x...)",
    // "\tlinux-vdso.so.1 (0x...)" (in the kernel, nothing to carry), "\tlibx.so => not found".
    std::istringstream words(line);
    std::string first, arrow, target;
    words >> first >> arrow >> target;
    if (arrow == "=>") {
      if (target == "not")
        throw LabError(fmt::format("{} needs {}, which the dynamic loader cannot find on this host", what, first));
      if (!target.empty() && target[0] == '/') out.push_back(target);
    } else if (!first.empty() && first[0] == '/') {
      out.push_back(first);
    }
  }
  return out;
}

void RootTree::carry_with_libraries(const std::string& elf) {
  carry(elf);
  carry_libraries_of(elf);
}

void RootTree::carry_libraries_of(const std::string& elf) {
  runner::ToolResult r = runner::run_tool({"ldd", elf});
  // ldd says "not a dynamic executable" (exit 1) for a static binary such as busybox-static.
  if (r.status != 0 && r.output.find("not a dynamic executable") != std::string::npos) return;
  if (r.status != 0) throw LabError("ldd " + elf + " failed: " + r.output);
  for (const auto& lib : libraries_in_ldd_output(r.output, elf)) carry(lib);
}

void RootTree::carry_folder(const std::string& dir) {
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) carry(entry.path().string());
}

void RootTree::write(const std::string& guest_path, const std::string& text, mode_t mode) {
  const fs::path in_tree = fs::path(dir_) / fs::path(guest_path).relative_path();
  fs::create_directories(in_tree.parent_path());
  std::ofstream out(in_tree, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + in_tree.string());
  fs::permissions(in_tree, static_cast<fs::perms>(mode));
  bytes_ += text.size();
}

void RootTree::install(const std::string& host_path, const std::string& guest_path) {
  copy_file(host_path, (fs::path(dir_) / fs::path(guest_path).relative_path()).string());
}

void RootTree::make_folder(const std::string& guest_path) {
  fs::create_directories(fs::path(dir_) / fs::path(guest_path).relative_path());
}

void pack_cpio(const std::string& dir, const std::string& out) {
  runner::ToolResult r = runner::run_tool(
      {"sh", "-c",
       "cd " + runner::shell_quoted(dir) + " && find . -print0 | cpio --null --quiet -o -H newc -R 0:0 > " + runner::shell_quoted(out)});
  if (r.status != 0) throw std::runtime_error("cannot pack the guest's initramfs (cpio): " + r.output);
}

}  // namespace allocmark::lab
