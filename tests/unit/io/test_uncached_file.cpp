#include "catch.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/io/uncached_file.hpp"

using kpipe::io::UncachedFile;

namespace {

std::string scratch(const std::string& name) {
  return "kpipe-test-uncached-" + std::to_string(::getpid()) + "-" + name;
}

// Distinct bytes everywhere (a byte out of place shows), and not a multiple
// of any page or staging size.
std::vector<unsigned char> pattern(std::size_t size) {
  std::vector<unsigned char> bytes(size);
  std::uint32_t state = 2463534242u;
  for (auto& byte : bytes) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    byte = static_cast<unsigned char>(state);
  }
  return bytes;
}

std::vector<unsigned char> contents(const std::string& name) {
  std::ifstream in(name, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

// Ranges that start and end inside pages and span more than one staging
// piece (8 MiB), written in an order that leaves holes to be filled later, by
// either route; the file must hold exactly the bytes, read back by ifstream
// and by UncachedFile.
TEST_CASE("uncached file: unaligned ranges round-trip by either route", "[io]") {
  const std::size_t size = (std::size_t{19} << 20) + 12345;
  const auto expected = pattern(size);
  struct Range {
    std::size_t offset, bytes;
  };
  const std::vector<Range> ranges = {
      {4096 * 3 + 17, (std::size_t{17} << 20) + 999},  // head, two whole pieces and more, tail
      {0, 4096 * 3 + 17},                              // the start, ending mid-page
      {4096 * 3 + 17 + (std::size_t{17} << 20) + 999, 0},
  };
  for (const auto route : {UncachedFile::Route::automatic, UncachedFile::Route::page_cache}) {
    const auto name = scratch(route == UncachedFile::Route::automatic ? "automatic" : "page-cache");
    std::ofstream(name, std::ios::binary | std::ios::trunc).close();
    {
      UncachedFile file(name, UncachedFile::Access::write, route);
      if (route == UncachedFile::Route::page_cache) CHECK_FALSE(file.direct());
      for (const auto& range : ranges) file.write(range.offset, range.bytes, expected.data() + range.offset);
      const std::size_t rest = ranges.back().offset;
      file.write(rest, size - rest, expected.data() + rest);
    }
    CHECK(contents(name) == expected);

    UncachedFile file(name, UncachedFile::Access::read);
    for (const auto& range : std::vector<Range>{{0, size},
                                                {1, 4095},
                                                {4095, 2},
                                                {(std::size_t{8} << 20) - 5, 11},
                                                {size - 7, 7},
                                                {12345, (std::size_t{9} << 20) + 3}}) {
      std::vector<unsigned char> got(range.bytes);
      file.read(range.offset, range.bytes, got.data());
      CHECK(std::equal(got.begin(), got.end(), expected.begin() + static_cast<std::ptrdiff_t>(range.offset)));
    }
    std::remove(name.c_str());
  }
}

TEST_CASE("uncached file: reading past the end names the truncated file", "[io]") {
  const auto name = scratch("short");
  const auto bytes = pattern(10000);
  std::ofstream(name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 10000);
  UncachedFile file(name, UncachedFile::Access::read);
  std::vector<unsigned char> got(200);
  try {
    file.read(9900, 200, got.data());
    FAIL("a read past the end returned");
  } catch (const kpipe::Error& error) {
    CHECK(error.kind() == kpipe::ErrorKind::input);
    CHECK(std::string(error.what()).find(name + ": ends at byte 10000") != std::string::npos);
    CHECK(std::string(error.what()).find("truncated") != std::string::npos);
  }
  CHECK_THROWS_AS(UncachedFile(scratch("absent"), UncachedFile::Access::read), kpipe::Error);
  std::remove(name.c_str());
}
