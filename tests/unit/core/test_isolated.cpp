#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/isolated.hpp"

using kpipe::IsolatedOutcome;
using kpipe::run_isolated;

TEST_CASE("run_isolated reports how the child ended", "[core]") {
  int touched = 0;
  const auto finished = run_isolated([&] { touched = 1; }, 10.0);
  CHECK(finished.end == IsolatedOutcome::End::finished);
  CHECK(touched == 0);  // the child's memory is its own

  const auto refused = run_isolated([] { throw kpipe::input_error("file.h5: bad header"); }, 10.0);
  CHECK(refused.end == IsolatedOutcome::End::refused);
  CHECK(refused.message == "file.h5: bad header");

  const auto failed = run_isolated([] { throw std::length_error("vector too long"); }, 10.0);
  CHECK(failed.end == IsolatedOutcome::End::failed);
  CHECK(failed.message == "vector too long");
}

TEST_CASE("run_isolated survives a child that crashes or hangs", "[core]") {
  // SIGKILL, not SIGSEGV: a sanitizer would report (and exit) instead of dying of the signal.
  const auto crashed = run_isolated([] { std::raise(SIGKILL); }, 10.0);
  CHECK(crashed.end == IsolatedOutcome::End::crashed);
  CHECK(crashed.message.rfind("signal 9 (", 0) == 0);

  const auto exited = run_isolated([] { std::_Exit(3); }, 10.0);
  CHECK(exited.end == IsolatedOutcome::End::crashed);
  CHECK(exited.message == "exit status 3");

  const auto started = std::chrono::steady_clock::now();
  const auto hung = run_isolated([] { std::this_thread::sleep_for(std::chrono::seconds(60)); }, 0.5);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK(hung.end == IsolatedOutcome::End::timed_out);
  CHECK(waited >= 0.5);
  CHECK(waited < 5.0);
}

namespace {
long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Minor page faults the caller takes writing all of `buffer` after a child
// was forked, and whether that child could read it.
std::pair<long, bool> write_after_fork(std::vector<char>& buffer, bool keep) {
  std::vector<std::pair<void*, std::size_t>> ranges;
  if (keep) ranges.emplace_back(buffer.data(), buffer.size());
  const kpipe::KeptFromChildren kept(ranges);
  volatile char seen = 0;
  const auto outcome = run_isolated([&] { seen = buffer[buffer.size() / 2]; }, 10.0);
  const long before = minor_faults();
  std::memset(buffer.data(), 7, buffer.size());
  return {minor_faults() - before, outcome.end == IsolatedOutcome::End::finished};
}
}  // namespace

// A fork write-protects the caller's pages; KeptFromChildren leaves whole
// pages out of the child instead, so writing them afterwards costs no fault
// per page (a checkpoint read into the tensors), and the child cannot see them.
TEST_CASE("KeptFromChildren: the child does not get the pages, the caller writes them without faults", "[core]") {
  const std::size_t pages = 4096;
  std::vector<char> buffer(pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), 1);
  const auto [shared_faults, shared_seen] = write_after_fork(buffer, false);
  const auto [kept_faults, kept_seen] = write_after_fork(buffer, true);
  CHECK(shared_seen);
  CHECK_FALSE(kept_seen);  // not mapped in the child: reading it crashed there
  CHECK(shared_faults >= static_cast<long>(pages) / 2);
  CHECK(kept_faults < static_cast<long>(pages) / 8);
  // Destroyed, it hands the pages to children again.
  CHECK(write_after_fork(buffer, false).second);
}
