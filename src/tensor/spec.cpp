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

TensorSpec::TensorSpec(std::initializer_list<std::int64_t> shape, DType dtype) : dtype_(dtype) {
  assign(shape.begin(), shape.size());
}

TensorSpec::TensorSpec(const std::vector<std::int64_t>& shape, DType dtype) : dtype_(dtype) {
  assign(shape.data(), shape.size());
}

void TensorSpec::assign(const std::int64_t* extents, std::size_t rank) {
  const auto shape = [&] { return fmt::format("[{}]", fmt::join(extents, extents + rank, ", ")); };
  if (rank > static_cast<std::size_t>(max_rank)) {
    throw input_error(fmt::format("a tensor of shape {} has {} dimensions; at most {} are allowed", shape(), rank,
                                  static_cast<int>(max_rank)));
  }
  for (std::size_t d = 0; d < rank; ++d) {
    if (extents[d] < 0) {
      throw input_error(fmt::format("a tensor of shape {} has a negative extent; extents must be 0 or more", shape()));
    }
    extents_[d] = extents[d];
  }
  rank_ = static_cast<int>(rank);
}

void TensorSpec::throw_no_dimension(int dim) const {
  throw runtime_error(fmt::format("dimension {} of a tensor of {} was asked for; it has dimensions 0 to {}", dim,
                                  to_string(), rank_ - 1));
}

std::int64_t TensorSpec::elements() const {
  std::int64_t count = 1;
  for (int d = 0; d < rank_; ++d) count *= extents_[static_cast<std::size_t>(d)];
  return count;
}

std::string TensorSpec::to_string() const {
  const std::string dims =
      rank_ == 0 ? "scalar" : fmt::format("{}", fmt::join(extents_.begin(), extents_.begin() + rank_, "x"));
  return dims + " " + name_of(dtype_);
}

}  // namespace kpipe::tensor
