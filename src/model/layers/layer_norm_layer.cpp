#include "kpipe/model/layers/layer_norm_layer.hpp"

#include "kpipe/kernels/layer_norm.hpp"
#include "kpipe/kernels/precision.hpp"

namespace kpipe::model {

using tensor::TensorSpec;

template <class Scalar>
LayerNorm<Scalar>::LayerNorm(int dim, const std::string& name, LayerEnvironment env, NormSpec spec)
    : env_(env),
      spec_(spec),
      gamma_{name + ".gamma", tensor::uninitialized_matrix<Scalar>("kpipe::model::" + name + ".gamma", 1, dim),
             tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".gamma.grad", 1, dim)},
      beta_{name + ".beta", tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".beta", 1, centred() ? dim : 0),
            tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".beta.grad", 1, centred() ? dim : 0)} {
  Kokkos::deep_copy(env_.exec.space(), gamma_.value, Scalar(1));
  // Sequence parallelism: a LayerNorm sees this rank's rows only (Megatron sums these gradients over the group).
  gamma_.row_partial = beta_.row_partial = env.sequence_parallel;
}

template <class Scalar>
std::vector<Parameter<Scalar>> LayerNorm<Scalar>::parameters() const {
  if (!centred()) return {gamma_};
  return {gamma_, beta_};
}

template <class Scalar>
std::vector<TensorDecl> LayerNorm<Scalar>::saved(int rows) const {
  // 1/std is a per-row statistic: float32 in every precision.
  return {{"xhat", TensorSpec({rows, input_dim()}, stored())}, {"rstd", TensorSpec::matrix<Scalar>(rows, 1)}};
}

template <class Scalar>
void LayerNorm<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::layer_norm::forward");
  const auto X = inputs.at(0).matrix<Scalar>();
  const int rows = static_cast<int>(X.extent(0));
  auto& pool = env_.exec.pool();
  // x̂ is written in the type it is kept in.
  const tensor::Tensor xhat = pool.take("kpipe::model::layer_norm_xhat", stored(), rows, input_dim());
  const auto rstd = pool.take<Scalar>("kpipe::model::layer_norm_rstd", rows, 1);
  const auto Y = outputs.at(0).matrix<Scalar>();
  const auto epsilon = static_cast<Scalar>(spec_.epsilon);
  kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
    const auto normalised = xhat.matrix<decltype(type)>();
    if (centred()) {
      kernels::layer_norm_forward(env_.exec.space(), X, gamma_.value, beta_.value, epsilon, Y, normalised, rstd);
    } else {
      kernels::rms_norm_forward(env_.exec.space(), X, gamma_.value, epsilon, Y, normalised, rstd);
    }
  });
  if (ctx) {
    ctx->save("xhat", xhat);
    ctx->save("rstd", rstd);
  }
}

template <class Scalar>
void LayerNorm<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                       Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::layer_norm::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
      using Stored = decltype(type);
      const auto dY = output_grads.at(0).matrix<Scalar>();
      const auto xhat = ctx.saved("xhat").matrix<Stored>();
      const auto rstd = ctx.saved("rstd").matrix<Scalar>();
      if (centred()) {
        kernels::layer_norm_backward_input<Scalar, Stored>(env_.exec.space(), dY, xhat, rstd, gamma_.value, dX);
      } else {
        kernels::rms_norm_backward_input<Scalar, Stored>(env_.exec.space(), dY, xhat, rstd, gamma_.value, dX);
      }
    });
  }
  ctx.drop("rstd");
  ctx.save("dy", kernels::rounded(env_.exec, output_grads.at(0), stored(), "kpipe::model::layer_norm_dy_stored"));
}

template <class Scalar>
void LayerNorm<Scalar>::backward_weight(Context& ctx) {
  const auto region = env_.exec.region("kpipe::model::layer_norm::backward_weight");
  kernels::with_stored_type<Scalar>(env_.precision, [&](auto type) {
    using Stored = decltype(type);
    const auto dY = ctx.saved("dy").matrix<Stored>();
    const auto xhat = ctx.saved("xhat").matrix<Stored>();
    if (centred()) {
      kernels::layer_norm_backward_weight<Scalar, Stored>(env_.exec.space(), dY, xhat, gamma_.grad, beta_.grad);
    } else {
      kernels::rms_norm_backward_weight<Scalar, Stored>(env_.exec.space(), dY, xhat, gamma_.grad);
    }
  });
  ctx.clear();
}

template <class Scalar>
tensor::DType LayerNorm<Scalar>::stored() const {
  return kernels::stored_dtype<Scalar>(env_.precision);
}

template class LayerNorm<float>;
template class LayerNorm<double>;

}  // namespace kpipe::model
