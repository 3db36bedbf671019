#include "kpipe/io/safetensors.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"

using namespace kpipe;
using Catch::Matchers::Contains;

namespace {

std::string scratch(const std::string& name) {
  const auto directory = std::filesystem::temp_directory_path() / ("kpipe-safetensors-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  return (directory / name).string();
}

// A file as the format lays it out: the 8-byte little-endian length, the header, the data.
std::string raw_file(const std::string& name, std::uint64_t claimed_length, const std::string& header,
                     const std::vector<unsigned char>& data) {
  const std::string path = scratch(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(claimed_length >> (8 * i)));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path;
}
std::string raw_file(const std::string& name, const std::string& header, const std::vector<unsigned char>& data) {
  return raw_file(name, header.size(), header, data);
}

std::vector<unsigned char> bytes_of(const std::vector<float>& values) {
  std::vector<unsigned char> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::string refusal(const std::string& path) {
  return test::input_error_of([&] { io::read_safetensors(path); });
}

}  // namespace

TEST_CASE("safetensors round trip: shapes, values and metadata as written", "[io][safetensors]") {
  std::map<std::string, io::HostTensor> tensors;
  tensors["a.weight"] = {{2, 3}, {1, -2, 3.5f, 0, 1e-30f, -7}};
  tensors["b"] = {{4}, {0.25f, 0.5f, 0.75f, 1}};
  tensors["empty"] = {{0, 5}, {}};
  const std::string path = scratch("round-trip.safetensors");
  io::write_safetensors(path, tensors, {{"format", "pt"}});
  const io::SafetensorsFile file = io::read_safetensors(path);
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(file.tensors.size() == 3);
  for (const auto& [name, tensor] : tensors) {
    INFO(name);
    CHECK(file.tensors.at(name).shape == tensor.shape);
    CHECK(file.tensors.at(name).values == tensor.values);
  }
  // The data starts 8-byte aligned.
  std::ifstream in(path, std::ios::binary);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  CHECK(length % 8 == 0);
}

TEST_CASE("safetensors F16 and BF16 tensors widen to float32 exactly", "[io][safetensors]") {
  // F16: 1.0 = 0x3c00, -2.0 = 0xc000, the smallest subnormal 2^-24 = 0x0001, 65504 = 0x7bff.
  // BF16: 1.0 = 0x3f80, -0.5 = 0xbf00.
  const std::vector<unsigned char> data = {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b, 0x80, 0x3f, 0x00, 0xbf};
  const std::string header = R"({"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})";
  const auto file = io::read_safetensors(raw_file("half.safetensors", header, data));
  CHECK(file.tensors.at("h").values == std::vector<float>{1.0f, -2.0f, 5.9604644775390625e-08f, 65504.0f});
  CHECK(file.tensors.at("b").values == std::vector<float>{1.0f, -0.5f});
}

TEST_CASE("malformed safetensors files are refused with one line naming what is wrong", "[io][safetensors]") {
  const auto two = bytes_of({1, 2});
  const std::string good_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  // A 2 GB header claim is checked against the file's size before anything is read.
  CHECK_THAT(refusal(raw_file("huge-claim", 2'000'000'000ull, "{}", {})),
             Contains("the header claims 2000000000 bytes, more than safetensors' limit"));
  CHECK_THAT(refusal(raw_file("long-claim", 4096, "{}", {})),
             Contains("the header claims 4096 bytes but only 2 follow the length"));
  CHECK_THAT(refusal(scratch("absent.safetensors")), Contains("cannot be read"));
  {
    const std::string path = scratch("tiny");
    std::ofstream(path) << "abc";
    CHECK_THAT(refusal(path), Contains("is 3 bytes, shorter than the 8-byte header length"));
  }
  CHECK_THAT(refusal(raw_file("not-json", "{\"w\": [", two)), Contains("the header is not valid JSON"));
  CHECK_THAT(refusal(raw_file("deep", std::string(100, '[') + std::string(100, ']'), {})),
             Contains("nests JSON more than 32 deep"));
  CHECK_THAT(refusal(raw_file("array", "[1, 2]", {})), Contains("the header is not a JSON object"));
  // Headers over the 8 bytes of two floats, each wrong in one way, and what the refusal names.
  const std::pair<std::string, std::string> entries[] = {
      {R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]})",
       "tensor 'w' has data_offsets [0, 16], outside the data's 8 bytes"},
      {R"("w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]})", "tensor 'w' has data_offsets [8, 0]"},
      {R"("w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]})",
       "tensor 'w': dtype F32 and shape [3] need 12 bytes but data_offsets [0, 8] span 8"},
      {R"("w":{"dtype":"F16","shape":[2],"data_offsets":[0,8]})", "dtype F16 and shape [2] need 4 bytes"},
      {R"("w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]})",
       "tensor 'w' has dtype \"I64\"; kpipe reads F32, F16 and BF16"},
      {R"("w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]})",
       "tensor 'w''s shape entry is -2, not a non-negative integer"},
      {R"("w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})",
       "more elements than the 8 bytes of data hold"},
      {R"("w":{"dtype":"F32","shape":[2]})", "tensor 'w' has no \"data_offsets\""},
      {R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]})", "bytes [0, 4) of the data belong to no tensor"},
      {R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", "bytes [4, 8) of the data belong to no tensor"},
      {R"("v":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]})",
       "tensors 'v' and 'w' overlap in the data"},
  };
  for (const auto& [entry, expected] : entries) {
    INFO(entry);
    CHECK_THAT(refusal(raw_file("entry", "{" + entry + "}", two)), Contains(expected));
  }
  CHECK_THAT(refusal(raw_file("metadata", "{" + good_entry + R"(,"__metadata__":{"format":1}})", two)),
             Contains("__metadata__ 'format' is 1, not a string"));
  // The good entry alone reads.
  CHECK(io::read_safetensors(raw_file("good", "{" + good_entry + "}", two)).tensors.at("w").values ==
        std::vector<float>{1, 2});
}
