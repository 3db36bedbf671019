#pragma once
// The message of the input error (exit code 2) that `f` throws; a failed
// check when it throws none or another kind of error.

#include <string>
#include <utility>

#include "catch.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::test {

template <class F>
std::string input_error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& error) {
    CHECK(error.exit_code() == 2);
    return error.what();
  }
  FAIL("no error was thrown");
  return "";
}

}  // namespace kpipe::test
