#include "kpipe/io/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/tensor/spec.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian, read by memcpy");

namespace kpipe::io {

namespace fs = std::filesystem;
using nlohmann::json;

std::int64_t HostTensor::elements() const {
  std::int64_t n = 1;
  for (const std::int64_t extent : shape) n *= extent;
  return n;
}

namespace {

struct DTypeInfo {
  const char* name;
  std::uint64_t bytes;
};
constexpr DTypeInfo dtypes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}};

void widen(const std::string& dtype, const char* bytes, std::vector<float>& values) {
  const std::size_t n = values.size();
  if (dtype == "F32") {
    std::memcpy(values.data(), bytes, n * sizeof(float));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t half = 0;
    std::memcpy(&half, bytes + 2 * i, sizeof half);
    values[i] = dtype == "F16" ? tensor::to_float(tensor::Half{half}) : tensor::to_float(tensor::BFloat16{half});
  }
}

// One header entry, checked against the data's size.
struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw input_error(fmt::format("safetensors file '{}': {}", path_, what));
  }

  std::uint64_t count(const json& value, const std::string& what) const {
    if (!value.is_number_unsigned()) fail(fmt::format("{} is {}, not a non-negative integer", what, value.dump()));
    return value.get<std::uint64_t>();
  }

  Entry entry(const std::string& name, const json& value, std::uint64_t data_bytes) const {
    const std::string where = fmt::format("tensor '{}'", name);
    if (!value.is_object()) fail(fmt::format("{} is {}, not an object", where, value.dump()));
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(key)) fail(fmt::format("{} has no \"{}\"", where, key));
    }
    Entry e;
    e.name = name;
    if (!value["dtype"].is_string()) fail(fmt::format("{} has dtype {}, not a string", where, value["dtype"].dump()));
    e.dtype = value["dtype"].get<std::string>();
    const auto type =
        std::find_if(std::begin(dtypes), std::end(dtypes), [&](const DTypeInfo& d) { return e.dtype == d.name; });
    if (type == std::end(dtypes)) {
      fail(
          fmt::format("{} has dtype \"{}\"; kpipe reads F32, F16 and BF16 (convert the file with "
                      "safetensors in Python)",
                      where, e.dtype));
    }
    const json& shape = value["shape"];
    if (!shape.is_array()) fail(fmt::format("{} has shape {}, not an array", where, shape.dump()));
    // Elements, with the product kept below the data's size: no overflow.
    std::uint64_t elements = 1;
    bool empty = false;
    for (const json& extent : shape) {
      const std::uint64_t n = count(extent, where + "'s shape entry");
      if (n == 0) empty = true;
      if (!empty && n > data_bytes / elements + 1) {
        fail(fmt::format("{} has shape {}, more elements than the {} bytes of data hold", where, shape.dump(),
                         data_bytes));
      }
      elements = empty ? 0 : elements * n;
      e.shape.push_back(static_cast<std::int64_t>(n));
    }
    const json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      fail(fmt::format("{} has data_offsets {}, not [begin, end]", where, offsets.dump()));
    }
    e.begin = count(offsets[0], where + "'s data_offsets[0]");
    e.end = count(offsets[1], where + "'s data_offsets[1]");
    if (e.begin > e.end || e.end > data_bytes) {
      fail(fmt::format("{} has data_offsets [{}, {}], outside the data's {} bytes", where, e.begin, e.end, data_bytes));
    }
    if (elements > data_bytes / type->bytes || e.end - e.begin != elements * type->bytes) {
      fail(fmt::format("{}: dtype {} and shape [{}] need {} bytes but data_offsets [{}, {}] span {}", where, e.dtype,
                       fmt::join(e.shape, ", "), elements * type->bytes, e.begin, e.end, e.end - e.begin));
    }
    return e;
  }

  // The tensors must tile the data: sorted by offset, each starts where the last ended.
  void check_coverage(std::vector<Entry>& entries, std::uint64_t data_bytes) const {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].begin < at) {
        fail(fmt::format("tensors '{}' and '{}' overlap in the data", entries[i - 1].name, entries[i].name));
      }
      if (entries[i].begin > at)
        fail(fmt::format("bytes [{}, {}) of the data belong to no tensor", at, entries[i].begin));
      at = entries[i].end;
    }
    if (at != data_bytes) fail(fmt::format("bytes [{}, {}) of the data belong to no tensor", at, data_bytes));
  }

  SafetensorsFile read() const {
    std::error_code error;
    const std::uintmax_t size = fs::file_size(path_, error);
    if (error) fail(fmt::format("cannot be read ({}); check the path", error.message()));
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail(fmt::format("cannot be opened ({})", std::strerror(errno)));
    if (size < 8) fail(fmt::format("is {} bytes, shorter than the 8-byte header length; not a safetensors file", size));
    unsigned char length[8] = {};
    in.read(reinterpret_cast<char*>(length), 8);
    std::uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | length[i];
    if (header_bytes > safetensors_max_header_bytes) {
      fail(
          fmt::format("the header claims {} bytes, more than safetensors' limit of {}; the file is corrupt or not "
                      "safetensors",
                      header_bytes, safetensors_max_header_bytes));
    }
    if (header_bytes > size - 8) {
      fail(
          fmt::format("the header claims {} bytes but only {} follow the length; the file is truncated or not "
                      "safetensors",
                      header_bytes, size - 8));
    }
    std::string header(header_bytes, '\0');
    in.read(header.data(), static_cast<std::streamsize>(header_bytes));
    if (json_depth(header) > limits::json_depth) {
      fail(fmt::format("the header nests JSON more than {} deep; a safetensors header nests 3", limits::json_depth));
    }
    const json root = json::parse(header, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) fail("the header is not valid JSON; the file is corrupt or not safetensors");
    if (!root.is_object()) fail("the header is not a JSON object");
    const std::uint64_t data_bytes = size - 8 - header_bytes;
    SafetensorsFile file;
    std::vector<Entry> entries;
    for (const auto& [name, value] : root.items()) {
      if (name == "__metadata__") {
        if (!value.is_object()) fail("__metadata__ is not an object of strings");
        for (const auto& [key, text] : value.items()) {
          if (!text.is_string()) fail(fmt::format("__metadata__ '{}' is {}, not a string", key, text.dump()));
          file.metadata[key] = text.get<std::string>();
        }
        continue;
      }
      entries.push_back(entry(name, value, data_bytes));
    }
    check_coverage(entries, data_bytes);
    std::vector<char> bytes;
    for (const Entry& e : entries) {
      HostTensor& tensor = file.tensors[e.name];
      tensor.shape = e.shape;
      tensor.values.resize(static_cast<std::size_t>(tensor.elements()));
      if (tensor.values.empty()) continue;  // an empty tensor has no bytes to read
      bytes.resize(e.end - e.begin);
      in.seekg(static_cast<std::streamoff>(8 + header_bytes + e.begin));
      in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!in) fail(fmt::format("tensor '{}' could not be read ({})", e.name, std::strerror(errno)));
      widen(e.dtype, bytes.data(), tensor.values);
    }
    return file;
  }

 private:
  std::string path_;
};

}  // namespace

void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (tensor.elements() != static_cast<std::int64_t>(tensor.values.size())) {
      throw runtime_error(fmt::format("write_safetensors: tensor '{}' holds {} values for {} elements", name,
                                      tensor.values.size(), tensor.elements()));
    }
    const std::uint64_t bytes = tensor.values.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as safetensors pads it
  // A fresh temporary renamed into place, never over a device, a directory or an input (core/output_file.hpp).
  write_output(path, "safetensors", [&](std::ostream& out) {
    unsigned char length[8] = {};
    for (int i = 0; i < 8; ++i)
      length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(length), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, tensor] : tensors) {
      out.write(reinterpret_cast<const char*>(tensor.values.data()),
                static_cast<std::streamsize>(tensor.values.size() * sizeof(float)));
    }
  });
}

SafetensorsFile read_safetensors(const std::string& path) { return Reader(path).read(); }

}  // namespace kpipe::io
