#include "output_file.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"

namespace kpipe::app {

void require_writable(const std::string& path, const char* option) {
  if (path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? "." : parent.string();
  if (::access(directory.c_str(), W_OK) != 0) {
    throw input_error(fmt::format("cannot write the {} file '{}': directory '{}': {}", option, path, directory,
                                  std::strerror(errno)));
  }
  if (std::filesystem::is_directory(path)) {
    throw input_error(fmt::format("cannot write the {} file '{}': it is a directory; name a file", option, path));
  }
}

void commit_output(const std::string& temporary, const std::string& path, const char* option, bool written) {
  if (!written || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw runtime_error(fmt::format("writing the {} file '{}' failed: {}", option, path, reason));
  }
  log::info("wrote {} {}", option, path);
}

}  // namespace kpipe::app
