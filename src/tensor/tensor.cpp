#include "kpipe/tensor/tensor.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"

namespace kpipe::tensor {

namespace detail {
void throw_wrong_access(const TensorSpec& spec, int rank, DType dtype) {
  throw runtime_error(fmt::format("a tensor of {} was read as a rank-{} {} view; rank and dtype must match",
                                  spec.to_string(), rank, name_of(dtype)));
}
}  // namespace detail

Tensor Tensor::reshaped(const TensorSpec& spec) const {
  if (!owner_) return {};
  if (spec.dtype() != spec_.dtype() || spec.elements() != spec_.elements()) {
    throw runtime_error(fmt::format("a tensor of {} cannot be reshaped to {}; dtype and element count must match",
                                    spec_.to_string(), spec.to_string()));
  }
  Tensor out = *this;
  out.spec_ = spec;
  return out;
}

const Tensor& TensorList::at(std::size_t i) const {
  if (i >= size_) {
    throw runtime_error(fmt::format("tensor {} of a list of {} was asked for; positions run from 0 to {}", i, size_,
                                    size_ == 0 ? 0 : size_ - 1));
  }
  return first_[i];
}

}  // namespace kpipe::tensor
