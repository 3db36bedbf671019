#pragma once
// The kernels a layer computes with: the deck's compute.gemm,
// compute.attention and compute.precision, carried to every layer a kind builds.

#include "kpipe/config/run_config.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/kernels/gemm.hpp"

namespace kpipe::model {

// The kernels a layer computes with (compute.gemm, compute.attention,
// compute.precision).
struct KernelChoice {
  kernels::GemmPath gemm = kernels::GemmPath::vendor;
  kernels::AttentionPath attention = kernels::AttentionPath::gemm;
  config::Precision precision = config::Precision::fp32;
};

}  // namespace kpipe::model
