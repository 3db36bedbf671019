#pragma once
// Safetensors files (huggingface/safetensors, docs/formats.md "Safetensors"):
// an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//
//   {"NAME": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]},
//    ..., "__metadata__": {"format": "pt"}}
//
// then the data, each tensor's bytes row-major and little-endian at
// [begin, end) of the data. Hugging Face's `from_pretrained` reads them;
// kpipe export and import (app/gpt2_interop) use them for GPT-2 weights.
//
// The reader trusts nothing in the file: the header length against the file
// size (before allocating it, so a 2 GB claim costs nothing), the JSON, every
// entry's dtype and shape, and every offset against the data, which the
// tensors must cover without gap or overlap (the format's own rule). Each
// failure is a one-line input error naming the file and the tensor.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kpipe::io {

// A tensor as float32 values, row-major, with its shape.
struct HostTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;

  std::int64_t elements() const;
};

// The header is at most this long: safetensors' own limit (100 MB).
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

// Writes `tensors` (in name order) as F32 with `metadata` (kpipe writes
// {"format": "pt"}, which transformers requires) to a fresh temporary file
// renamed to `path` once complete (core/output_file.hpp: never over a
// device, a directory or a protected input). A tensor whose values do not
// match its shape is a runtime error; an unwritable path is an input error.
void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

struct SafetensorsFile {
  std::map<std::string, HostTensor> tensors;  // F32 as stored; F16 and BF16 widened exactly
  std::map<std::string, std::string> metadata;
};

// Reads and checks a whole file (above); F32, F16 and BF16 tensors are read,
// any other dtype is an input error naming it.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace kpipe::io
