#pragma once
// The deck's kernel choices in kernels' own enums: the one translation, made
// where the model's specs are built from the configuration (spec.cpp, trainer.cpp).

#include "kpipe/config/run_config.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/choices.hpp"

namespace kpipe::model::detail {

inline kernels::GemmPath gemm_path(config::GemmKind kind) {
  switch (kind) {
    case config::GemmKind::vendor:
      return kernels::GemmPath::vendor;
    case config::GemmKind::packed:
      return kernels::GemmPath::packed;
    case config::GemmKind::portable:
      return kernels::GemmPath::portable;
  }
  throw runtime_error("compute.gemm: a value without a GEMM path");
}

inline kernels::AttentionPath attention_path(config::AttentionKind kind) {
  switch (kind) {
    case config::AttentionKind::gemm:
      return kernels::AttentionPath::gemm;
    case config::AttentionKind::fused:
      return kernels::AttentionPath::fused;
  }
  throw runtime_error("compute.attention: a value without an attention path");
}

inline kernels::Activation activation(config::ActivationKind kind) {
  switch (kind) {
    case config::ActivationKind::gelu:
      return kernels::Activation::gelu;
    case config::ActivationKind::gelu_tanh:
      return kernels::Activation::gelu_tanh;
    case config::ActivationKind::relu:
      return kernels::Activation::relu;
    case config::ActivationKind::tanh:
      return kernels::Activation::tanh;
  }
  throw runtime_error("model.activation: a value without a kernel");
}

inline kernels::Precision precision(config::Precision precision) {
  switch (precision) {
    case config::Precision::fp32:
      return kernels::Precision::fp32;
    case config::Precision::bf16:
      return kernels::Precision::bf16;
    case config::Precision::fp16:
      return kernels::Precision::fp16;
  }
  throw runtime_error("compute.precision: a value without a kernel precision");
}

}  // namespace kpipe::model::detail
