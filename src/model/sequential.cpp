#include "kpipe/model/sequential.hpp"

#include <algorithm>
#include <exception>
#include <type_traits>
#include <utility>

#include "kpipe/kernels/precision.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::model {

template <class Scalar>
void Sequential<Scalar>::round_between(const tensor::Tensor& between) const {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (between_ == BetweenLayers::kept) return;
    kernels::round_through(env_.exec.space(), between.matrix<float>(), kernels::operand_dtype(env_.precision));
  }
}

template <class Scalar>
Sequential<Scalar>::Sequential(std::vector<std::unique_ptr<Layer<Scalar>>> layers, LayerEnvironment env,
                               BetweenLayers between)
    : env_(env), layers_(std::move(layers)), between_(between), weight_threads_(spread_weight_gradients()) {}

template <class Scalar>
template <class Width, class Step>
void Sequential<Scalar>::chain(tensor::TensorList inputs, tensor::TensorList outputs, const Width& width,
                               const Step& step) const {
  int rows = static_cast<int>(inputs.at(0).spec().extent(0));
  tensor::Tensor input = inputs.at(0);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    rows = layers_[i]->output_rows(rows);
    // A pooled intermediate per call: a buffer some microbatch's context
    // still saves is not free, so a later microbatch gets another one.
    const tensor::Tensor output =
        i + 1 == layers_.size()
            ? outputs.at(0)
            : tensor::Tensor(env_.exec.pool().take<Scalar>("kpipe::model::activation", rows, width(*layers_[i])));
    step(i, input, output);
    if (i + 1 < layers_.size()) round_between(output);
    input = output;
  }
}

template <class Scalar>
int Sequential<Scalar>::output_rows(int rows) const {
  for (const auto& layer : layers_) rows = layer->output_rows(rows);
  return rows;
}

template <class Scalar>
int Sequential<Scalar>::input_rows(int rows) const {
  for (auto layer = layers_.rbegin(); layer != layers_.rend(); ++layer) rows = (*layer)->input_rows(rows);
  return rows;
}

template <class Scalar>
void Sequential<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  if (ctx) ctx->reset_children(layers_.size());
  const auto width = [](const Layer<Scalar>& layer) { return layer.output_dim(); };
  chain(inputs, outputs, width, [&](std::size_t i, const tensor::Tensor& input, const tensor::Tensor& output) {
    layers_[i]->forward({input}, {output}, ctx ? &ctx->children[i] : nullptr);
  });
}

template <class Scalar>
void Sequential<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                        Context& ctx) const {
  int rows = static_cast<int>(output_grads.at(0).spec().extent(0));
  tensor::Tensor gradient = output_grads.at(0);
  for (std::size_t i = layers_.size(); i-- > 0;) {
    rows = layers_[i]->input_rows(rows);
    const tensor::Tensor input_gradient = i == 0 ? input_grads.at(0)
                                                 : tensor::Tensor(env_.exec.pool().take<Scalar>(
                                                       "kpipe::model::activation_grad", rows, layers_[i]->input_dim()));
    layers_[i]->backward_input({gradient}, {input_gradient}, ctx.children.at(i));
    if (i > 0) round_between(input_gradient);
    gradient = input_gradient;
  }
}

template <class Scalar>
void Sequential<Scalar>::backward_weight(Context& ctx, const std::function<void(int)>& after_layer) {
  // Inside another region (a parent Sequential spreading its W) or with a
  // tool recording regions, W stays on the calling thread.
  const auto& threads = weight_threads_;
  if (!threads.empty() && !tensor::compat::in_host_parallel_region() && !tensor::compat::regions_observed()) {
    // Each layer's W whole on one thread, the threads' shares at once: one
    // parallel region for the stage's W instead of a few per layer, and each
    // product computed as on a single thread, whatever the thread count.
    std::vector<std::exception_ptr> failed(threads.size());
    Kokkos::parallel_for(tensor::compat::kernel_label("kpipe::model::sequential::backward_weight"),
                         Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, static_cast<int>(threads.size())),
                         [&](int t) {
                           try {
                             for (const std::size_t i : threads[t]) layers_[i]->backward_weight(ctx.children.at(i));
                           } catch (...) {
                             failed[t] = std::current_exception();
                           }
                         });
    for (const auto& failure : failed) {
      if (failure) std::rethrow_exception(failure);
    }
    if (after_layer) {
      for (std::size_t i = 0; i < layers_.size(); ++i) after_layer(static_cast<int>(i));
    }
  } else {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->backward_weight(ctx.children.at(i));
      if (after_layer) after_layer(static_cast<int>(i));
    }
  }
  ctx.clear();
}

template <class Scalar>
bool Sequential<Scalar>::backward_weight_on_any_thread() const {
  return std::all_of(layers_.begin(), layers_.end(),
                     [](const auto& layer) { return layer->backward_weight_on_any_thread(); });
}

template <class Scalar>
std::vector<std::vector<std::size_t>> Sequential<Scalar>::spread_weight_gradients() const {
  const int threads = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
  const bool on_host = std::is_same_v<tensor::ExecutionSpace, Kokkos::DefaultHostExecutionSpace>;
  if (!on_host || threads < 2) return {};
  // Layers by their parameters' elements (a Linear's W costs in proportion),
  // largest first, each to the least loaded thread: a fixed assignment.
  // Layers without parameters still get their W, at no cost.
  std::vector<std::pair<std::size_t, std::size_t>> sizes;  // elements, layer
  std::size_t weighted = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i]->backward_weight_on_any_thread()) return {};
    std::size_t elements = 0;
    for (const auto& parameter : layers_[i]->parameters()) elements += parameter.value.size();
    sizes.emplace_back(elements, i);
    if (elements > 0) ++weighted;
  }
  if (weighted < 2) return {};
  std::stable_sort(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::vector<std::size_t>> assigned(static_cast<std::size_t>(std::min<std::size_t>(threads, weighted)));
  std::vector<std::size_t> load(assigned.size(), 0);
  for (const auto& [elements, layer] : sizes) {
    const std::size_t t = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    assigned[t].push_back(layer);
    load[t] += elements;
  }
  for (auto& layers : assigned) std::sort(layers.begin(), layers.end());
  return assigned;
}

template <class Scalar>
void Sequential<Scalar>::infer(tensor::TensorList inputs, tensor::TensorList outputs,
                               CachedBatch<Scalar>& batch) const {
  const auto width = [](const Layer<Scalar>& layer) { return layer.token_output_dim(); };
  chain(inputs, outputs, width, [&](std::size_t i, const tensor::Tensor& input, const tensor::Tensor& output) {
    layers_[i]->infer({input}, {output}, batch);
  });
}

template <class Scalar>
std::vector<Parameter<Scalar>> Sequential<Scalar>::parameters() const {
  return parameters_of(layers_);
}

template <class Scalar>
void Sequential<Scalar>::weights_changed() {
  for (auto& layer : layers_) layer->weights_changed();
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace kpipe::model
