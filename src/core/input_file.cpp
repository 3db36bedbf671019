#include "kpipe/core/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe {

namespace {

// Closes the descriptor on every path out of read_input_file.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

std::string open_failure(const std::string& path, const InputFile& kind, int error) {
  const std::string where = fmt::format("cannot open {} '{}'", kind.what, printable(path));
  switch (error) {
    case ENOENT:
      return fmt::format("{}: no such file{}", where, kind.hint);
    case ENOTDIR:
      return fmt::format("{}: a part of the path is not a directory{}", where, kind.hint);
    case ELOOP:
      return fmt::format("{}: too many levels of symbolic links (a symlink loop?); fix the link", where);
    case ENAMETOOLONG:
      return fmt::format("{}: the file name is too long; check the path", where);
    case EACCES:
      return fmt::format("{}: permission denied; check the file's permissions", where);
    default:
      return fmt::format("{}: {}", where, std::strerror(error));
  }
}

}  // namespace

std::size_t first_non_text_byte(const std::string& text) {
  const auto control = std::find_if(text.begin(), text.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == 0 || c == 0x7f || (c < 0x20 && c != '\t' && c != '\n' && c != '\r');
  });
  const std::size_t at = control == text.end() ? std::string::npos : static_cast<std::size_t>(control - text.begin());
  return std::min(at, invalid_utf8_offset(text));
}

std::string read_input_bytes(const std::string& path, const InputFile& kind) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it next.
  const Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) throw input_error(open_failure(path, kind, errno));
  struct stat info {};
  if (::fstat(file.fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw input_error(fmt::format("cannot read {} '{}': it is {}, not a regular file", kind.what, printable(path),
                                  S_ISDIR(info.st_mode) ? "a directory" : "a device, pipe or socket"));
  }
  const auto too_large = [&](std::uintmax_t size) {
    return input_error(fmt::format("{} '{}' is {} bytes; a {} is a small file (at most {} bytes)", kind.what,
                                   printable(path), size, kind.what, kind.max_bytes));
  };
  if (static_cast<std::uintmax_t>(info.st_size) > kind.max_bytes) throw too_large(info.st_size);
  // Stop once past the limit: the file may grow while it is read.
  std::string text;
  text.reserve(static_cast<std::size_t>(info.st_size) + 1);
  char chunk[1 << 16];
  std::size_t length = 0;
  while (length <= kind.max_bytes) {
    const ssize_t got = ::read(file.fd, chunk, sizeof chunk);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      throw input_error(fmt::format("cannot read {} '{}': {}", kind.what, printable(path), std::strerror(errno)));
    }
    text.append(chunk, static_cast<std::size_t>(got));
    length += static_cast<std::size_t>(got);
  }
  if (length > kind.max_bytes) throw too_large(length);
  return text;
}

std::string read_input_file(const std::string& path, const InputFile& kind) {
  std::string text = read_input_bytes(path, kind);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  if (const auto at = first_non_text_byte(text); at != std::string::npos) {
    throw input_error(fmt::format("{} '{}' is not a UTF-8 text file (byte 0x{:02x} at offset {}); pass a text {}",
                                  kind.what, printable(path), static_cast<unsigned char>(text[at]), at, kind.what));
  }
  return text;
}

}  // namespace kpipe
