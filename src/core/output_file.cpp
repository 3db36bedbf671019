#include "kpipe/core/output_file.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe {

namespace {

struct ProtectedInput {
  std::string path;
  dev_t device;
  ino_t inode;
};

std::vector<ProtectedInput>& protected_inputs() {
  static std::vector<ProtectedInput> inputs;
  return inputs;
}

std::string directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

[[noreturn]] void refuse(const std::string& path, const char* option, const std::string& why) {
  throw input_error(fmt::format("cannot write the {} file '{}': {}", option, printable(path), why));
}

// Whether a file can be created in `directory`, tried with a probe file
// removed at once: root passes access() on /proc or a directory whose file
// system refuses new files. errno says why not.
bool file_can_be_created_in(const std::string& directory) {
  std::string probe = (std::filesystem::path(directory) / ".kpipe-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

}  // namespace

void protect_input(const std::string& path) {
  struct stat info {};
  if (!path.empty() && ::stat(path.c_str(), &info) == 0) protected_inputs().push_back({path, info.st_dev, info.st_ino});
}

void require_writable(const std::string& path, const char* option) {
  if (path.empty()) return;
  const std::string directory = directory_of(path);
  if (::access(directory.c_str(), W_OK) != 0) {
    refuse(path, option, fmt::format("directory '{}': {}", printable(directory), std::strerror(errno)));
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return;  // a new file
    refuse(path, option, std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) refuse(path, option, "it is a directory; name a file");
  if (!S_ISREG(info.st_mode)) {
    refuse(path, option,
           "it is a device, pipe or socket, not a regular file; kpipe writes only regular files (leave the option "
           "out to skip the file)");
  }
  for (const auto& input : protected_inputs()) {
    if (input.device == info.st_dev && input.inode == info.st_ino) {
      refuse(path, option, fmt::format("it is the input '{}'; name another output file", printable(input.path)));
    }
  }
}

void require_writable_directory(const std::string& path, const char* option, const char* what) {
  struct stat info {};
  std::string why;
  if (::stat(path.c_str(), &info) != 0)
    why = std::strerror(errno);
  else if (!S_ISDIR(info.st_mode))
    why = "not a directory";
  else if (::access(path.c_str(), W_OK | X_OK) != 0)
    why = std::strerror(errno);
  else if (!file_can_be_created_in(path))
    why = fmt::format("no file can be created there ({})", std::strerror(errno));
  if (!why.empty()) {
    throw input_error(
        fmt::format("cannot write {} into {} = \"{}\": {}; create the directory or name a "
                    "writable one",
                    what, option, printable(path), why));
  }
}

void create_writable_directory(const std::string& path, const char* option, const char* what) {
  std::error_code ignored;  // a failure shows in the check below, with its reason
  if (!path.empty()) std::filesystem::create_directories(path, ignored);
  require_writable_directory(path, option, what);
}

std::string create_temporary(const std::string& path, const char* option) {
  const std::filesystem::path target(path);
  std::string name =
      (std::filesystem::path(directory_of(path)) / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    throw runtime_error(fmt::format("writing the {} file '{}' failed: cannot create a temporary file in '{}': {}",
                                    option, printable(path), printable(directory_of(path)), std::strerror(errno)));
  }
  // mkstemp makes the file private (0600); give it the mode an ordinary new
  // file would have, or the mode of the file it replaces.
  struct stat existing {};
  mode_t mode = 0;
  if (::stat(path.c_str(), &existing) == 0) {
    mode = existing.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  ::fchmod(fd, mode);
  ::close(fd);
  return name;
}

void commit_output(const std::string& temporary, const std::string& path, const char* option, bool written) {
  if (!written || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = written ? std::strerror(errno) : "the write did not complete (disk full?)";
    ::unlink(temporary.c_str());
    throw runtime_error(fmt::format("writing the {} file '{}' failed: {}", option, printable(path), reason));
  }
  log::info("wrote {} {}", option, printable(path));
}

}  // namespace kpipe
