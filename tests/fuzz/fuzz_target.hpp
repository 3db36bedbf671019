#pragma once
// What every harness asserts about a reader given arbitrary bytes: it either
// accepts them or refuses them with kpipe's input error, one non-empty line
// (README, "Reliability"). Any other outcome (another exception, a runtime
// error, a multi-line message) aborts, so libFuzzer or the corpus replay
// reports the input; crashes, hangs, leaks and oversized allocations are
// caught by the sanitizers and libFuzzer's own limits.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "kpipe/core/error.hpp"

namespace kpipe::fuzz {

// The bytes as a string (readers of text take string_view).
inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Writes the bytes to a file in this process's private scratch directory
// (created 0700 on first use, removed at exit) and returns its path: the
// HDF5 readers take a path, as kpipe's commands do.
std::string scratch_file(const std::uint8_t* data, std::size_t size, std::string_view name);

// Reports an unexpected outcome for the current input and aborts.
[[noreturn]] void fail(std::string_view what, std::string_view detail);

// Checks one error message: non-empty and a single line.
void check_one_line(std::string_view message);

// Runs `read`, which calls one reader; returns normally when the reader
// accepted the input or refused it as an input error.
template <class Read>
void expect_accepted_or_refused(Read&& read) {
  try {
    read();
  } catch (const Error& error) {
    if (error.kind() != ErrorKind::input) fail("a runtime error (exit code 1) for an input", error.what());
    check_one_line(error.what());
  } catch (const std::exception& other) {
    fail("an exception that is not kpipe's input error", other.what());
  }
}

}  // namespace kpipe::fuzz
