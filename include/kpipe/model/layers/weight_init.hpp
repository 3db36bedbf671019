#pragma once
// How a weight matrix starts (model.init), drawn from a counter-based
// stream, so every partition and every t starts from the same model.

#include <cstdint>

#include "kpipe/config/run_config.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::model {

// How a weight matrix starts (model.init), drawn from a counter-based stream:
// uniform in +-scale or normal(0, scale).
struct WeightInit {
  bool normal = false;
  double scale = 0.0;

  // model.init for a fan_in x fan_out weight: uniform +-1/sqrt(fan_in), he
  // normal(0, sqrt(2/fan_in)), xavier uniform +-sqrt(6/(fan_in+fan_out)),
  // gpt2 normal(0, gpt2_std) (0.02, less for residual projections).
  // `automatic` must be resolved by the caller (the model kind decides).
  static WeightInit of(config::InitKind kind, int fan_in, int fan_out, double gpt2_std = 0.02);
};

// Fills `weight` as `init` says from the stream `key`.
template <class Scalar>
void initialise(const tensor::ExecutionSpace& space, const WeightInit& init, std::uint64_t key,
                const tensor::Matrix<Scalar>& weight);

}  // namespace kpipe::model
