#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

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
