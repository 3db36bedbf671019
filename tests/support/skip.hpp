#pragma once
// A case that cannot run here (the CPU lacks the path it tests, root reads
// every file) says why and returns; the test's main then exits with
// skip_exit_code, which ctest reports as skipped (SKIP_RETURN_CODE), never as
// passed. Such cases carry a tag that kpipe_add_unit_test registers as a
// ctest entry of its own (SKIPPING), so the cases that did run are not
// reported skipped with them.
#include <string>

#include "catch.hpp"

namespace kpipe::test {

inline constexpr int skip_exit_code = 77;

inline bool& skipped() {
  static bool any = false;
  return any;
}

inline void skip(const std::string& why) {
  WARN("skipped: " << why);
  skipped() = true;
}

// What main returns after Catch's session counted `failures`.
inline int exit_code(int failures) { return failures == 0 && skipped() ? skip_exit_code : failures; }

}  // namespace kpipe::test
