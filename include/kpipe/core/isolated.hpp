#pragma once
// Runs a piece of work in a child process, so that a crash or a hang inside
// third-party code that parses a damaged input (libhdf5 on a corrupted file)
// ends the child, never the run: the caller learns how the child ended and
// refuses the input in one line. The child is a fork: it sees the caller's
// memory as it was, shares nothing it writes afterwards, sends its outcome
// through a pipe and leaves with _exit (no atexit handler, no stdio flush,
// nothing of the caller's open files closed or flushed twice).

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kpipe {

struct IsolatedOutcome {
  enum class End {
    finished,   // `work` returned
    refused,    // `work` threw kpipe's input error: `message` is its line
    failed,     // `work` threw anything else: `message` says what
    crashed,    // the child died: `message` names the signal or exit status
    timed_out,  // the child was still running after `seconds` and was killed
    not_run,    // no child could be started (fork failed): `message` says why
  };
  End end = End::not_run;
  std::string message;
};

// Runs `work` in a child with `seconds` to finish. The child's standard
// output and error are discarded: a crash there would print the backtraces of
// Open MPI's or a sanitizer's signal handler, and the caller's one line is
// what the user sees.
IsolatedOutcome run_isolated(const std::function<void()>& work, double seconds);

// Memory the children forked while it lives do not get: the whole pages
// inside each range are left out of every fork (MADV_DONTFORK) until it is
// destroyed. A fork write-protects the caller's pages to share them with the
// child; a caller that then writes many of them (a checkpoint read into its
// tensors) takes a fault per page. The children must not touch the ranges:
// they are not mapped there.
class KeptFromChildren {
 public:
  // (address, bytes) of memory no one else frees while this lives.
  explicit KeptFromChildren(const std::vector<std::pair<void*, std::size_t>>& ranges);
  KeptFromChildren(const KeptFromChildren&) = delete;
  KeptFromChildren& operator=(const KeptFromChildren&) = delete;
  ~KeptFromChildren();

 private:
  std::vector<std::pair<void*, std::size_t>> pages_;
};

}  // namespace kpipe
