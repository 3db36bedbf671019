#include <cmath>

#include "kpipe/kernels/random.hpp"
#include "kpipe/model/layer_kinds.hpp"

namespace kpipe::model {

using kernels::Trans;
using tensor::TensorSpec;

WeightInit WeightInit::of(config::InitKind kind, int fan_in, int fan_out, double gpt2_std) {
  switch (kind) {
    case config::InitKind::automatic:
    case config::InitKind::uniform:
      return {false, 1.0 / std::sqrt(static_cast<double>(fan_in))};
    case config::InitKind::he:
      return {true, std::sqrt(2.0 / fan_in)};
    case config::InitKind::xavier:
      return {false, std::sqrt(6.0 / (fan_in + fan_out))};
    case config::InitKind::gpt2:
      return {true, gpt2_std};
  }
  return {};
}

template <class Scalar>
void initialise(const tensor::ExecutionSpace& space, const WeightInit& init, std::uint64_t key,
                const tensor::Matrix<Scalar>& weight) {
  if (init.normal) {
    kernels::fill_normal(space, key, 0, 0.0, init.scale, weight);
  } else {
    kernels::fill_uniform(space, key, -init.scale, init.scale, weight);
  }
}

template <class Scalar>
Linear<Scalar>::Linear(int input, int output, const std::string& name, std::uint64_t init_key, WeightInit init,
                       kernels::GemmPath gemm, LayerEnvironment env)
    : env_(env),
      weight_{
          name + ".weight", tensor::uninitialized_matrix<Scalar>("kpipe::model::" + name + ".weight", input, output),
          tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".weight.grad", input, output), Shard::whole(), true},
      bias_{name + ".bias", tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".bias", 1, output),
            tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".bias.grad", 1, output)},
      gemm_(gemm) {
  initialise(env_.exec.space(), init, init_key, weight_.value);
}

template <class Scalar>
std::vector<TensorDecl> Linear<Scalar>::saved(int rows) const {
  return {{"x", TensorSpec::matrix<Scalar>(rows, input_dim())}};
}

template <class Scalar>
void Linear<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::linear::forward");
  const auto& space = env_.exec.space();
  const auto X = inputs.at(0).matrix<Scalar>();
  const auto Y = outputs.at(0).matrix<Scalar>();
  if (gemm_ == kernels::GemmPath::packed) {
    packed_.linear_forward(space, X, weight_.value, bias_.value, Y);
  } else {
    kernels::gemm(space, Trans::no, Trans::no, 1, X, weight_.value, 0, Y, gemm_);
    kernels::add_row(space, bias_.value, Y);
  }
  if (ctx) ctx->save("x", inputs.at(0));
}

template <class Scalar>
void Linear<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                    Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::linear::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    const auto dY = output_grads.at(0).matrix<Scalar>();
    if (gemm_ == kernels::GemmPath::packed) {
      packed_.input_gradient(env_.exec.space(), dY, weight_.value, dX);
    } else {
      kernels::gemm(env_.exec.space(), Trans::no, Trans::yes, 1, dY, weight_.value, 0, dX, gemm_);
    }
  }
  ctx.save("dy", output_grads.at(0));
}

template <class Scalar>
void Linear<Scalar>::backward_weight(Context& ctx) {
  const auto region = env_.exec.region("kpipe::model::linear::backward_weight");
  const auto X = ctx.saved("x").matrix<Scalar>();
  const auto dY = ctx.saved("dy").matrix<Scalar>();
  const auto& space = env_.exec.space();
  // beta = 1: the gradient buffer accumulates microbatches in the order W runs.
  if (gemm_ == kernels::GemmPath::packed) {
    packed_.weight_gradient(space, X, dY, weight_.grad);
  } else {
    kernels::gemm(space, Trans::yes, Trans::no, 1, X, dY, 1, weight_.grad, gemm_);
  }
  kernels::add_column_sums(space, dY, bias_.grad);
  ctx.clear();
}

template void initialise<float>(const tensor::ExecutionSpace&, const WeightInit&, std::uint64_t,
                                const tensor::Matrix<float>&);
template void initialise<double>(const tensor::ExecutionSpace&, const WeightInit&, std::uint64_t,
                                 const tensor::Matrix<double>&);
template class Linear<float>;
template class Linear<double>;

}  // namespace kpipe::model
