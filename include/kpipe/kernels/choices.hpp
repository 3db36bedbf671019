#pragma once
// The choices kernels offer, in kernels' own terms. The deck names them
// (compute.gemm, compute.attention, compute.precision, model.activation);
// model::TrainerSpec::from_config translates the deck's values once, and no
// kernel reads the configuration.

namespace kpipe::kernels {

// Which GEMM runs a product: the vendor library, weights packed in its
// layout (packed_gemm.hpp), or kpipe's portable Kokkos kernel.
enum class GemmPath { vendor, packed, portable };

// How attention forms its probabilities: batched GEMMs that materialise
// them, or the fused kernel that never does (attention.hpp).
enum class AttentionPath { gemm, fused };

// The elementwise activation of an MLP or a transformer block.
enum class Activation { gelu, gelu_tanh, relu, tanh };

// The operands of a float32 Linear's GEMMs and what layers keep between
// passes: float32, or bfloat16 or float16 with float32 sums (precision.hpp).
enum class Precision { fp32, bf16, fp16 };

// "fp32", "bf16", "fp16": as the deck writes them, for messages and labels.
constexpr const char* name_of(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
    case Precision::fp32:
      break;
  }
  return "fp32";
}

}  // namespace kpipe::kernels
