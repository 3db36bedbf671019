#include "catch.hpp"
#include "kpipe/core/error.hpp"

using namespace kpipe;

TEST_CASE("error kinds map to the documented exit codes", "[core]") {
  CHECK(input_error("bad deck").exit_code() == 2);
  CHECK(runtime_error("rank died").exit_code() == 1);
  CHECK(input_error("x").kind() == ErrorKind::input);
}

TEST_CASE("error messages are a single line", "[core]") {
  const Error e = input_error("first\nsecond\r\nthird");
  CHECK(std::string(e.what()).find('\n') == std::string::npos);
  CHECK(std::string(e.what()).find('\r') == std::string::npos);
  CHECK(std::string(e.what()) == "first second  third");
}

TEST_CASE("error messages carry no control characters to the terminal", "[core]") {
  CHECK(std::string(input_error("bad token '\x1b[2J'").what()) == "bad token '\\x1b[2J'");
}

TEST_CASE("a failed allocation is an input error naming the phase and the keys that lower it", "[core]") {
  const kpipe::Error oom = kpipe::error_of_failure(std::bad_alloc(), "set-up");
  CHECK(oom.exit_code() == 2);
  CHECK(
      std::string(oom.what()).rfind("out of memory during set-up: an allocation failed; lower what the deck asks", 0) ==
      0);
  CHECK(std::string(oom.what()).find("train.microbatch_size") != std::string::npos);
  const kpipe::Error other = kpipe::error_of_failure(std::logic_error("broken invariant"), "step 3");
  CHECK(other.exit_code() == 1);
  CHECK(std::string(other.what()) == "internal error during step 3: broken invariant");
}
