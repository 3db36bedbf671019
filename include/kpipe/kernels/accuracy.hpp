#pragma once
// Classification accuracy: how many rows of logits have their largest entry
// at the row's label (the first one on ties, like argmax).

#include <cstdint>

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

template <class Scalar>
std::int64_t count_correct(const tensor::ExecutionSpace& space,
                           const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                           const tensor::ConstLabels& labels);

}  // namespace kpipe::kernels
