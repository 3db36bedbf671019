#include "catch.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/io/checkpoint.hpp"

using namespace kpipe;

// The checkpoint checksum is XXH3 64-bit with seed 0, as `xxhsum -H3`
// (xxHash 0.8.1, Debian's xxhash package) prints it for the same bytes.
TEST_CASE("checksum64 is XXH3-64 as xxhsum computes it") {
  CHECK(io::checksum64("", 0) == 0x2d06800538d394c2ull);
  const std::string word = "kpipe";
  CHECK(io::checksum64(word.data(), word.size()) == 0x638d0d8348b5d015ull);
  // 1,000,003 bytes (i * 7 mod 251): long input, through XXH3's striped loop and a tail.
  std::vector<unsigned char> pattern(1000003);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 7 % 251);
  CHECK(io::checksum64(pattern.data(), pattern.size()) == 0x316dab04c07feac3ull);
}
