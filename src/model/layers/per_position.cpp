#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model {

template <class Scalar>
PerPosition<Scalar>::PerPosition(std::unique_ptr<Layer<Scalar>> inner, int positions)
    : inner_(std::move(inner)), positions_(positions) {}

template <class Scalar>
tensor::Tensor PerPosition<Scalar>::by_position(const tensor::Tensor& tensor, int width) const {
  if (tensor.empty()) return tensor;
  return tensor.reshaped(tensor::TensorSpec::matrix<Scalar>(tensor.spec().extent(0) * positions_, width));
}

template <class Scalar>
void PerPosition<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  inner_->forward({by_position(inputs.at(0), inner_->input_dim())}, {by_position(outputs.at(0), inner_->output_dim())},
                  ctx);
}

template <class Scalar>
void PerPosition<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                         Context& ctx) const {
  inner_->backward_input({by_position(output_grads.at(0), inner_->output_dim())},
                         {by_position(input_grads.at(0), inner_->input_dim())}, ctx);
}

template class PerPosition<float>;
template class PerPosition<double>;

}  // namespace kpipe::model
