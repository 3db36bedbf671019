#pragma once
// The layer interface. A layer is a host-side object whose methods launch
// Kokkos kernels; what a microbatch needs between its forward (F), input
// gradient (B) and weight gradient (W) lives in a Context the caller owns, so
// one layer serves any number of microbatches in flight (DESIGN.md §1, §3).

#include <cstddef>
#include <string>
#include <vector>

#include "kpipe/kernels/tensor.hpp"

namespace kpipe::model {

template <class Scalar>
using Matrix = kernels::Matrix<Scalar>;
template <class Scalar>
using ConstMatrix = kernels::ConstMatrix<Scalar>;

// A trainable matrix and its gradient buffer (same shape). Biases and norm
// scales are 1 x n rows. Names start with the global layer, "layer3.weight".
template <class Scalar>
struct Parameter {
  std::string name;
  Matrix<Scalar> value;
  Matrix<Scalar> grad;
};

// What one layer keeps for one microbatch, like autograd's saved tensors.
// Composite layers keep one child context per sub-layer.
template <class Scalar>
struct Context {
  std::vector<ConstMatrix<Scalar>> saved;
  std::vector<Context> children;

  std::size_t bytes() const {
    std::size_t total = 0;
    for (const auto& m : saved) total += kernels::bytes(m);
    for (const auto& child : children) total += child.bytes();
    return total;
  }
};

template <class Scalar>
class Layer {
 public:
  virtual ~Layer() = default;

  virtual int input_dim() const = 0;
  virtual int output_dim() const = 0;

  // Y = f(X) for a rows x input_dim X. With a context, keeps there what
  // backward_input needs; with nullptr (inference, recomputation) keeps nothing.
  virtual void forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const = 0;

  // B: dX from dY, leaving in ctx only what backward_weight needs. dY must
  // stay unchanged until backward_weight. An empty dX (no gradient wanted,
  // the first stage's input) skips computing it.
  virtual void backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX, Context<Scalar>& ctx) const = 0;

  // W: grad = grad + dW of this microbatch for every parameter; empties ctx.
  virtual void backward_weight(Context<Scalar>& ctx) = 0;

  virtual std::vector<Parameter<Scalar>> parameters() const { return {}; }
};

// Every parameter of `parameters`, flattened row-major one after the other,
// copied to the host: for bitwise comparisons and I/O.
template <class Scalar>
std::vector<Scalar> parameters_to_host(const std::vector<Parameter<Scalar>>& parameters) {
  std::vector<Scalar> values;
  for (const auto& p : parameters) {
    const auto host = kernels::to_host<Scalar>(p.value);
    values.insert(values.end(), host.begin(), host.end());
  }
  return values;
}

}  // namespace kpipe::model
