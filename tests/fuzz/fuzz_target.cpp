#include "fuzz_target.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace kpipe::fuzz {

namespace {

// Never destroyed: the exit handler that removes it runs after static destructors.
const std::filesystem::path& scratch_directory() {
  static const auto* directory = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/kpipe-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) fail("cannot create a scratch directory", pattern);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_directory(), ignored);
    });
    return new std::filesystem::path(pattern);
  }();
  return *directory;
}

}  // namespace

std::string scratch_file(const std::uint8_t* data, std::size_t size, std::string_view name) {
  const std::string path = (scratch_directory() / name).string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot write the scratch file", path);
  for (std::size_t written = 0; written < size;) {
    const ssize_t n = ::write(fd, data + written, size - written);
    if (n <= 0) fail("cannot write the scratch file", path);
    written += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return path;
}

void fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "kpipe fuzz: %.*s: %.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

void check_one_line(std::string_view message) {
  if (message.empty()) fail("an input error with no message", "");
  if (message.find('\n') != std::string_view::npos) fail("an input error of more than one line", message);
}

}  // namespace kpipe::fuzz
