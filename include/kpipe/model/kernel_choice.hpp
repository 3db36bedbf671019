#pragma once
// The kernels a layer computes with: the deck's compute.gemm,
// compute.attention and compute.precision, carried to every layer a kind builds.

#include "kpipe/kernels/choices.hpp"

namespace kpipe::model {

// The kernels a layer computes with (compute.gemm, compute.attention,
// compute.precision).
struct KernelChoice {
  kernels::GemmPath gemm = kernels::GemmPath::vendor;
  kernels::AttentionPath attention = kernels::AttentionPath::gemm;
  kernels::Precision precision = kernels::Precision::fp32;
};

}  // namespace kpipe::model
