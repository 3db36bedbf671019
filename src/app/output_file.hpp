#pragma once
// Output files of the commands (--json, --svg, --trace). Their directories are
// checked before any work, so a typo costs a second, not a run; files are
// written under a temporary name and renamed into place, so a failed write
// never leaves a truncated file where a good one was.

#include <fstream>
#include <string>

namespace kpipe::app {

// An input error "cannot write the <option> file '<path>': ..." when the
// file's directory is missing or not writable; nothing for an empty path.
void require_writable(const std::string& path, const char* option);

// Moves a finished temporary file into place (a runtime error on failure).
void commit_output(const std::string& temporary, const std::string& path, const char* option, bool written);

// Writes `path` with `write(std::ostream&)`; nothing for an empty path.
template <class Write>
void write_output(const std::string& path, const char* option, Write&& write) {
  if (path.empty()) return;
  const std::string temporary = path + ".tmp";
  bool written = false;
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (out) {
      write(out);
      out.close();
      written = static_cast<bool>(out);
    }
  }
  commit_output(temporary, path, option, written);
}

}  // namespace kpipe::app
