#include "kpipe/model/layers/rotary_qkv.hpp"

#include "kpipe/model/kv_cache.hpp"

namespace kpipe::model {

template <class Scalar>
RotaryQKV<Scalar>::RotaryQKV(kernels::RotaryShape shape, double theta, LayerEnvironment env)
    : env_(env),
      shape_(shape),
      cos_(tensor::uninitialized_matrix<Scalar>("kpipe::model::rotary_cos", shape.tokens, shape.head_dim / 2)),
      sin_(tensor::uninitialized_matrix<Scalar>("kpipe::model::rotary_sin", shape.tokens, shape.head_dim / 2)) {
  kernels::rotary_tables(env_.exec.space(), shape.head_dim, theta, cos_, sin_);
}

template <class Scalar>
Kokkos::View<const int*, tensor::MemorySpace> RotaryQKV<Scalar>::positions(const tensor::Tensor& rows) const {
  if (!env_.documents) return {};
  return env_.documents->positions_of(static_cast<int>(rows.spec().extent(0)), "rotary_qkv");
}

template <class Scalar>
void RotaryQKV<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context*) const {
  const auto region = env_.exec.region("kpipe::model::rotary_qkv::forward");
  kernels::rotary_qkv_forward(env_.exec.space(), shape_, inputs.at(0).matrix<Scalar>(), cos_, sin_,
                              positions(inputs.at(0)), outputs.at(0).matrix<Scalar>());
}

template <class Scalar>
void RotaryQKV<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                       Context&) const {
  const auto region = env_.exec.region("kpipe::model::rotary_qkv::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() == 0) return;
  kernels::rotary_qkv_backward(env_.exec.space(), shape_, output_grads.at(0).matrix<Scalar>(), cos_, sin_,
                               positions(output_grads.at(0)), dX);
}

template <class Scalar>
void RotaryQKV<Scalar>::infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const {
  const auto region = env_.exec.region("kpipe::model::rotary_qkv::infer");
  kernels::rotary_qkv_forward(env_.exec.space(), shape_, inputs.at(0).matrix<Scalar>(), cos_, sin_,
                              batch.paged().position, outputs.at(0).matrix<Scalar>());
}

template class RotaryQKV<float>;
template class RotaryQKV<double>;

}  // namespace kpipe::model
