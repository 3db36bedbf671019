#pragma once
// Classification accuracy: how many rows of logits have their largest entry
// at the row's label (the first one on ties, like argmax).

#include <cstdint>

#include "kpipe/kernels/tensor.hpp"

namespace kpipe::kernels {

template <class Scalar>
std::int64_t count_correct(const ExecutionSpace& space, const ConstMatrix<identity_t<Scalar>>& logits,
                           const ConstLabels& labels);

}  // namespace kpipe::kernels
