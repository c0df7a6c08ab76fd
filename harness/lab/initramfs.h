// The guest's root file system: host files carried to the same absolute paths (so the driver's
// built-in paths to its worker, libnumap, the preload companion and configs/ hold in the guest),
// with the shared libraries they need, packed as an initramfs cpio.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace allocmark::lab {

class RootTree {
 public:
  // `dir` is an empty host folder that becomes the guest's "/".
  explicit RootTree(std::string dir);

  // Copies the host file `path` to the same path in the tree. Symbolic links on the way (merged
  // /usr's /lib -> usr/lib, libfoo.so.4 -> libfoo.so.4.5.9) become the same links, so the guest
  // resolves every name the host does. ELF files lose their debug sections: the initramfs lives in
  // the guest's memory, on the first node. Throws LabError when the file cannot be read.
  void carry(const std::string& path);
  // carry(elf) and every shared library the dynamic loader would map for it (ldd), the loader itself included.
  void carry_with_libraries(const std::string& elf);
  // Only the shared libraries of `elf` (nothing for a static binary).
  void carry_libraries_of(const std::string& elf);
  // Every file under a host folder (configs/), same paths.
  void carry_folder(const std::string& dir);
  // A file written into the tree; `guest_path` is absolute.
  void write(const std::string& guest_path, const std::string& text, mode_t mode);
  // The host file `host_path` at another place in the guest.
  void install(const std::string& host_path, const std::string& guest_path);
  // An empty folder.
  void make_folder(const std::string& guest_path);

  const std::string& dir() const { return dir_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void copy_file(const std::string& from, const std::string& to);
  std::string dir_;
  std::set<std::string> carried_;
  std::uint64_t bytes_ = 0;
};

// The absolute paths of the libraries in `ldd` output, the loader included ("=> not found" is a
// LabError naming the library and `what`).
std::vector<std::string> libraries_in_ldd_output(const std::string& ldd_output, const std::string& what);

// Packs `dir` as a newc cpio archive (the format the kernel unpacks as its initramfs) into `out`,
// every file owned by root.
void pack_cpio(const std::string& dir, const std::string& out);

}  // namespace allocmark::lab
