#include "kpipe/model/layers.hpp"

namespace kpipe::model {

template <class Scalar>
Sequential<Scalar>::Sequential(std::vector<std::unique_ptr<Layer<Scalar>>> layers) : layers_(std::move(layers)) {}

template <class Scalar>
void Sequential<Scalar>::forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const {
  const int rows = static_cast<int>(X.extent(0));
  if (ctx) ctx->children.assign(layers_.size(), {});
  ConstMatrix<Scalar> input = X;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    // Fresh intermediates per call: a later microbatch must not overwrite what
    // an earlier one's context still holds.
    const auto output = i + 1 == layers_.size()
                            ? Y
                            : kernels::uninitialized_matrix<Scalar>("kpipe::model::activation", rows,
                                                                    layers_[i]->output_dim());
    layers_[i]->forward(input, output, ctx ? &ctx->children[i] : nullptr);
    input = output;
  }
}

template <class Scalar>
void Sequential<Scalar>::backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX,
                                        Context<Scalar>& ctx) const {
  const int rows = static_cast<int>(dY.extent(0));
  ConstMatrix<Scalar> gradient = dY;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const auto input_gradient = i == 0 ? dX
                                       : kernels::uninitialized_matrix<Scalar>("kpipe::model::activation_grad", rows,
                                                                               layers_[i]->input_dim());
    layers_[i]->backward_input(gradient, input_gradient, ctx.children.at(i));
    gradient = input_gradient;
  }
}

template <class Scalar>
void Sequential<Scalar>::backward_weight(Context<Scalar>& ctx) {
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->backward_weight(ctx.children.at(i));
  ctx.children.clear();
}

template <class Scalar>
std::vector<Parameter<Scalar>> Sequential<Scalar>::parameters() const {
  std::vector<Parameter<Scalar>> all;
  for (const auto& layer : layers_) {
    const auto own = layer->parameters();
    all.insert(all.end(), own.begin(), own.end());
  }
  return all;
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace kpipe::model
