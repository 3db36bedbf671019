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
