// The one check before a user-named file is read, against real files: a fifo (nothing opens it,
// so the test would block on the old readers), a folder, a missing file; and SHA-256's test vectors.
#include "units/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace allocmark::units;
namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "input_file_test.XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
};
}  // namespace

TEST(InputFile, AFifoAFolderAndAMissingFileAreNamedAndNeverOpened) {
  TempDir d;
  const std::string fifo = (d.path / "f").string(), folder = (d.path / "dir").string(), file = (d.path / "ok").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(folder);
  std::ofstream(file) << "x";
  EXPECT_EQ(input_file_problem(fifo), fifo + " is a fifo, not a regular file");
  EXPECT_EQ(input_file_problem(folder), folder + " is a folder, not a regular file");
  EXPECT_EQ(input_file_problem("/dev/null"), "/dev/null is a device, not a regular file");
  EXPECT_EQ(input_file_problem(file + ".missing"), file + ".missing does not exist");
  EXPECT_EQ(input_file_problem(""), "the file name is empty");
  EXPECT_EQ(input_file_problem(file), "");
  try {
    check_input_file(fifo, "--confirm-matrix");
    FAIL() << "a fifo was accepted";
  } catch (const InputFileError& e) {
    EXPECT_EQ(std::string(e.what()), "--confirm-matrix: " + fifo + " is a fifo, not a regular file");
  }
  EXPECT_THROW(file_sha256(fifo, "replay.trace"), InputFileError);
}

TEST(InputFile, Sha256OfTheStandardVectorsAndOfAFile) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  TempDir d;
  const std::string file = (d.path / "a").string();
  std::string big(200000, 'a');
  std::ofstream(file, std::ios::binary) << big;
  EXPECT_EQ(file_sha256(file, "x"), sha256_hex(big));
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
