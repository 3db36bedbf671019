#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "skip.hpp"

using namespace kpipe;

namespace {

const InputFile kind{"deck", 64, "; check the path"};

std::string error_of(const std::string& path) {
  try {
    read_input_file(path, kind);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    return e.what();
  }
  return "";
}

// A fresh directory per test case, removed at the end.
struct Scratch {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kpipe_input_file_" + std::to_string(::getpid()));
  Scratch() { std::filesystem::create_directories(dir); }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  }
};

}  // namespace

TEST_CASE("an input file is read as text without its byte order mark", "[core]") {
  const Scratch scratch;
  CHECK(read_input_file(scratch.write("a.toml", "\xEF\xBB\xBFx = 1\n"), kind) == "x = 1\n");
  CHECK(read_input_file(scratch.write("b.toml", "ünï = 1\n"), kind) == "ünï = 1\n");
}

TEST_CASE("an unreadable input file says why", "[core]") {
  const Scratch scratch;
  const std::string dir = scratch.dir.string();
  CHECK(error_of(dir + "/missing.toml") == "cannot open deck '" + dir + "/missing.toml': no such file; check the path");
  CHECK(error_of(dir) == "cannot read deck '" + dir + "': it is a directory, not a regular file");
  std::filesystem::create_symlink("loop.toml", scratch.dir / "loop.toml");
  CHECK(error_of(dir + "/loop.toml").find("too many levels of symbolic links") != std::string::npos);
  CHECK(error_of(dir + "/" + std::string(5000, 'a')).find("the file name is too long") != std::string::npos);
  CHECK(error_of(scratch.write("big.toml", std::string(65, '#'))).find("is 65 bytes") != std::string::npos);
  CHECK(error_of(scratch.write("bin.toml", "x = \x1b[31m")) ==
        "deck '" + dir + "/bin.toml' is not a UTF-8 text file (byte 0x1b at offset 4); pass a text deck");
  CHECK(error_of("/dev/null") == "cannot read deck '/dev/null': it is a device, pipe or socket, not a regular file");
}

TEST_CASE("a file without read permission says so", "[core][non_root]") {
  if (::geteuid() == 0) return kpipe::test::skip("root reads every file: run the tests as another user");
  const Scratch scratch;
  const std::string path = scratch.write("secret.toml", "x = 1\n");
  std::filesystem::permissions(path, std::filesystem::perms::none);
  CHECK(error_of(path) == "cannot open deck '" + path + "': permission denied; check the file's permissions");
}
