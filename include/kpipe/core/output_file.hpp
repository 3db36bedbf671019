#pragma once
// Output files of the commands (--json, --svg, --trace). Their paths are
// checked before any work, so a typo costs a second, not a run. kpipe writes
// only regular files (or new ones), never over a device such as /dev/null,
// a directory or one of its own inputs. Each file is written under a fresh
// temporary name (mkstemp) in its directory and renamed into place, so a
// failed write never leaves a truncated file where a good one was and never
// touches a file kpipe did not create.

#include <fstream>
#include <string>

namespace kpipe {

// Remembers an input file (the deck, a schedule file): no output may replace it.
void protect_input(const std::string& path);

// An input error "cannot write the <option> file '<path>': ..." when the
// file's directory is missing or not writable, or the path names a
// directory, a device or other non-regular file, or a protected input;
// nothing for an empty path.
void require_writable(const std::string& path, const char* option);

// An input error "cannot write <what> into <option> = '<path>': ..."
// unless `path` is an existing directory this process may write into.
void require_writable_directory(const std::string& path, const char* option, const char* what = "checkpoints");
// The same after creating `path` and its parents where they are missing (a
// run's checkpoint.path: every rank may call it, a shared file system sees
// one directory).
void create_writable_directory(const std::string& path, const char* option, const char* what = "checkpoints");

// A new, empty file next to `path` that only this process knows of.
std::string create_temporary(const std::string& path, const char* option);

// Moves a finished temporary file into place, or removes it (a runtime error
// when the write or the rename failed).
void commit_output(const std::string& temporary, const std::string& path, const char* option, bool written);

// Writes `path` with `write(std::ostream&)`; nothing for an empty path.
template <class Write>
void write_output(const std::string& path, const char* option, Write&& write) {
  if (path.empty()) return;
  require_writable(path, option);  // again: the path may have changed during the run
  const std::string temporary = create_temporary(path, option);
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

}  // namespace kpipe
