#include "kpipe/tensor/spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kpipe/core/error.hpp"

namespace kpipe::tensor {

std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 4;
    case DType::float64:
      return 8;
    case DType::bfloat16:
    case DType::float16:
      return 2;
  }
  return 0;
}

const char* name_of(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return "float32";
    case DType::float64:
      return "float64";
    case DType::bfloat16:
      return "bfloat16";
    case DType::float16:
      return "float16";
  }
  return "unknown";
}

TensorSpec::TensorSpec(std::vector<std::int64_t> shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  for (const auto extent : shape_) {
    if (extent < 0) {
      throw input_error(fmt::format("a tensor of shape [{}] has a negative extent; extents must be 0 or more",
                                    fmt::join(shape_, ", ")));
    }
  }
}

std::int64_t TensorSpec::elements() const {
  std::int64_t count = 1;
  for (const auto extent : shape_) count *= extent;
  return count;
}

std::string TensorSpec::to_string() const {
  const std::string dims = shape_.empty() ? "scalar" : fmt::format("{}", fmt::join(shape_, "x"));
  return dims + " " + name_of(dtype_);
}

}  // namespace kpipe::tensor
