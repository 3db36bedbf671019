#include "kpipe/model/layers/sequential.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include "kpipe/kernels/precision.hpp"
#include "kpipe/tensor/compat.hpp"
#include "kpipe/tensor/host_threads.hpp"

namespace kpipe::model {

namespace {

// A microbatch's rows below which a part is not worth a thread of its own.
constexpr int min_rows_per_part = 4;

// The largest parameter matrix for which F and B split rows. Each thread of a
// row split reads a Linear's whole weight, where a split of the product's
// columns reads its share: the regions saved outweigh the extra traffic for
// the quickstart's 256 x 256 float32 weights, not for compute_bound's
// 512 x 512 (docs/performance.md, "AMD EPYC, Zen 4, a second host").
constexpr std::size_t max_row_split_weight_bytes = std::size_t{256} << 10;

constexpr bool on_host = std::is_same_v<tensor::ExecutionSpace, Kokkos::DefaultHostExecutionSpace>;

// Polls of a layer run's progress before its waiting thread yields the core.
constexpr int spins_before_yield = 1 << 14;

}  // namespace

template <class Scalar>
void Sequential<Scalar>::round_between(const tensor::Tensor& between, RowRange rows,
                                       const tensor::ExecutionSpace& space) const {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (between_ == BetweenLayers::kept) return;
    kernels::round_through(space, rows.of(between.matrix<float>()), kernels::operand_dtype(env_.precision));
  }
}

template <class Scalar>
Sequential<Scalar>::Sequential(std::vector<std::unique_ptr<Layer<Scalar>>> layers, LayerEnvironment env,
                               BetweenLayers between, int row_parts)
    : env_(env),
      layers_(std::move(layers)),
      between_(between),
      weight_threads_(spread_weight_gradients()),
      row_wise_(std::all_of(layers_.begin(), layers_.end(), [](const auto& layer) { return layer->row_wise(); })),
      row_spaces_(row_spaces(row_parts)),
      lane_spaces_(lane_spaces(row_parts)),
      layer_runs_(layer_runs(lane_spaces_.size())),
      run_progress_(std::make_unique<RunProgress[]>(layer_runs_.size())) {}

template <class Scalar>
std::vector<tensor::ExecutionSpace> Sequential<Scalar>::row_spaces(int parts) const {
  if (parts == 0) parts = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
  if (!on_host || !row_wise_ || parts < 2) return {};
  for (const auto& parameter : parameters()) {
    if (parameter.value.span() * sizeof(Scalar) > max_row_split_weight_bytes) return {};
  }
  const auto& instances = env_.exec.thread_instances(parts);
  return {instances.begin(), instances.begin() + parts};
}

template <class Scalar>
std::vector<tensor::ExecutionSpace> Sequential<Scalar>::lane_spaces(int threads) const {
  if (threads == 0) threads = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
  if (!on_host || !row_wise_) return {};
  const auto& instances = env_.exec.thread_instances(threads);
  return {instances.begin(), instances.begin() + threads};
}

template <class Scalar>
template <class Lane>
void Sequential<Scalar>::on_lanes(const char* label, std::size_t lanes, const Lane& lane) const {
  if (tensor::compat::in_host_parallel_region() || tensor::compat::observed_by_tool()) {
    for (std::size_t l = 0; l < lanes; ++l) lane(l, env_.exec.space());
    return;
  }
  const std::size_t threads = std::min(lanes, lane_spaces_.size());
  tensor::on_host_threads(Kokkos::DefaultHostExecutionSpace(), label, static_cast<int>(threads), [&](int t) {
    const auto thread = static_cast<std::size_t>(t);
    for (std::size_t l = thread; l < lanes; l += threads) lane(l, lane_spaces_[thread]);
  });
}

template <class Scalar>
void Sequential<Scalar>::no_layer_runs() {
  throw std::logic_error(
      "Sequential: lanes split by layers, which splits_layers() refuses; ask for them only where it allows them");
}

template <class Scalar>
std::vector<std::vector<std::size_t>> Sequential<Scalar>::layer_runs(std::size_t threads) const {
  if (threads < 2) return {};
  std::vector<std::size_t> elements;
  std::size_t total = 0;
  for (const auto& layer : layers_) {
    std::size_t count = 0;
    for (const auto& parameter : layer->parameters()) count += parameter.value.size();
    elements.push_back(count);
    total += count;
  }
  // Each layer to the thread its middle element falls on, were the
  // elements of all the layers dealt out in equal consecutive shares.
  std::vector<std::vector<std::size_t>> runs(threads);
  std::size_t before = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::size_t middle = 2 * before + elements[i];  // twice the middle, in elements
    runs[std::min(threads - 1, middle * threads / std::max<std::size_t>(2 * total, 1))].push_back(i);
    before += elements[i];
  }
  // A run without parameters does no work of its own: its layers join the next run (or the last).
  std::vector<std::vector<std::size_t>> weighted;
  std::vector<std::size_t> pending;
  for (auto& run : runs) {
    pending.insert(pending.end(), run.begin(), run.end());
    const bool holds = std::any_of(pending.begin(), pending.end(), [&](std::size_t i) { return elements[i] > 0; });
    if (holds) weighted.push_back(std::exchange(pending, {}));
  }
  if (weighted.size() < 2) return {};
  weighted.back().insert(weighted.back().end(), pending.begin(), pending.end());
  return weighted;
}

template <class Scalar>
template <class Run>
void Sequential<Scalar>::on_layer_runs(const char* label, std::size_t microbatches, bool forward,
                                       const Run& run) const {
  const std::size_t runs = layer_runs_.size();
  const auto in_flow = [&](std::size_t k) { return forward ? k : runs - 1 - k; };
  // One iteration per thread (on_host_threads) is what lets a run wait on
  // another: iterations sharing a thread would wait on each other for ever.
  const bool inline_launch = tensor::compat::in_host_parallel_region() || tensor::compat::observed_by_tool();
  if (inline_launch ||
      static_cast<std::size_t>(tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace())) < runs) {
    for (std::size_t k = 0; k < runs; ++k) {
      const std::size_t r = in_flow(k);
      for (std::size_t l = 0; l < microbatches; ++l) run(r, l, inline_launch ? env_.exec.space() : lane_spaces_[r]);
    }
    return;
  }
  for (std::size_t r = 0; r < runs; ++r) run_progress_[r].done.store(0, std::memory_order_relaxed);
  run_failed_.store(false, std::memory_order_relaxed);
  tensor::on_host_threads(Kokkos::DefaultHostExecutionSpace(), label, static_cast<int>(runs), [&](int t) {
    const auto r = static_cast<std::size_t>(t);
    // The run this one waits on (none for the flow's first).
    const bool first = forward ? r == 0 : r + 1 == runs;
    const std::atomic<std::size_t>* before = first ? nullptr : &run_progress_[forward ? r - 1 : r + 1].done;
    try {
      for (std::size_t l = 0; l < microbatches; ++l) {
        // A wait is one run's share of a microbatch at most: spin, then
        // give the core away should the waited-on thread be off it.
        for (int spins = 0; before && before->load(std::memory_order_acquire) <= l;) {
          if (run_failed_.load(std::memory_order_relaxed)) return;
          if (spins < spins_before_yield) {
            ++spins;
          } else {
            std::this_thread::yield();
          }
        }
        run(r, l, lane_spaces_[r]);
        run_progress_[r].done.store(l + 1, std::memory_order_release);
      }
    } catch (...) {
      run_failed_.store(true, std::memory_order_relaxed);
      throw;
    }
  });
}

template <class Scalar>
std::vector<tensor::Tensor>& Sequential<Scalar>::open_pass(const Context* ctx) const {
  // A pass of the same context that never ended (a layer threw) begins again.
  std::size_t p = 0;
  while (p < open_ && passes_[p].ctx != ctx) ++p;
  if (p == open_) {
    if (open_ == passes_.size()) passes_.emplace_back();
    ++open_;
  }
  Pass& pass = passes_[p];
  pass.ctx = ctx;
  pass.tensors.clear();
  return pass.tensors;
}

template <class Scalar>
const std::vector<tensor::Tensor>& Sequential<Scalar>::pass_of(const Context* ctx) const {
  for (std::size_t p = 0; p < open_; ++p) {
    if (passes_[p].ctx == ctx) return passes_[p].tensors;
  }
  throw std::logic_error("Sequential: the rows of a pass that has not begun; call its begin first");
}

template <class Scalar>
void Sequential<Scalar>::close_pass(const Context* ctx) const {
  for (std::size_t p = 0; p < open_; ++p) {
    if (passes_[p].ctx != ctx) continue;
    passes_[p].tensors.clear();
    std::swap(passes_[p], passes_[--open_]);
    return;
  }
}

template <class Scalar>
int Sequential<Scalar>::row_parts(int rows) const {
  // Inside another region, or with a tool attached, F and B stay whole.
  if (row_spaces_.empty() || tensor::compat::in_host_parallel_region() || tensor::compat::observed_by_tool()) return 1;
  return std::clamp(rows / min_rows_per_part, 1, static_cast<int>(row_spaces_.size()));
}

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
  const int rows = static_cast<int>(inputs.at(0).spec().extent(0));
  if (const int parts = row_parts(rows); parts > 1) {
    forward_begin(inputs, outputs, ctx);
    tensor::on_host_threads(
        Kokkos::DefaultHostExecutionSpace(), "kpipe::model::sequential::forward", parts,
        [&](int part) { forward_rows(inputs, outputs, ctx, RowRange::part_of(rows, part, parts), row_spaces_[part]); });
    forward_end();
    return;
  }
  if (ctx) ctx->reset_children(layers_.size());
  const auto width = [](const Layer<Scalar>& layer) { return layer.output_dim(); };
  chain(inputs, outputs, width, [&](std::size_t i, const tensor::Tensor& input, const tensor::Tensor& output) {
    layers_[i]->forward({input}, {output}, ctx ? &ctx->children[i] : nullptr);
    if (i + 1 < layers_.size()) round_between(output, RowRange::all_of(output), env_.exec.space());
  });
}

template <class Scalar>
void Sequential<Scalar>::forward_begin(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  if (ctx) ctx->reset_children(layers_.size());
  std::vector<tensor::Tensor>& pass = open_pass(ctx);
  pass.push_back(inputs.at(0));
  const auto width = [](const Layer<Scalar>& layer) { return layer.output_dim(); };
  chain(inputs, outputs, width, [&](std::size_t i, const tensor::Tensor& input, const tensor::Tensor& output) {
    layers_[i]->forward_begin({input}, {output}, ctx ? &ctx->children[i] : nullptr);
    pass.push_back(output);
  });
}

template <class Scalar>
void Sequential<Scalar>::forward_rows(tensor::TensorList, tensor::TensorList, const Context* ctx, RowRange rows,
                                      const tensor::ExecutionSpace& space) const {
  forward_layers(ctx, 0, layers_.size(), rows, space);
}

template <class Scalar>
void Sequential<Scalar>::forward_layers(const Context* ctx, std::size_t first, std::size_t end, RowRange rows,
                                        const tensor::ExecutionSpace& space) const {
  const std::vector<tensor::Tensor>& pass = pass_of(ctx);
  for (std::size_t i = first; i < end; ++i) {
    layers_[i]->forward_rows({&pass[i], 1}, {&pass[i + 1], 1}, ctx ? &ctx->children[i] : nullptr, rows, space);
    if (i + 1 < layers_.size()) round_between(pass[i + 1], rows, space);
  }
}

template <class Scalar>
void Sequential<Scalar>::forward_end() const {
  for (const auto& layer : layers_) layer->forward_end();
  // Every pass begun: lanes end theirs at once.
  for (std::size_t p = 0; p < open_; ++p) passes_[p].tensors.clear();
  open_ = 0;
}

template <class Scalar>
void Sequential<Scalar>::forward_lanes(tensor::TensorList inputs, tensor::TensorList outputs, Context* const* contexts,
                                       LaneSplit split) const {
  if (!runs_lanes()) not_row_wise(kind());
  if (split == LaneSplit::layers && !splits_layers()) no_layer_runs();
  for (std::size_t l = 0; l < inputs.size(); ++l) forward_begin({&inputs[l], 1}, {&outputs[l], 1}, contexts[l]);
  if (split == LaneSplit::layers) {
    on_layer_runs("kpipe::model::sequential::forward_layer_runs", inputs.size(), true,
                  [&](std::size_t r, std::size_t l, const tensor::ExecutionSpace& space) {
                    const std::vector<std::size_t>& run = layer_runs_[r];
                    forward_layers(contexts[l], run.front(), run.back() + 1, RowRange::all_of(inputs[l]), space);
                  });
  } else {
    on_lanes("kpipe::model::sequential::forward_lanes", inputs.size(),
             [&](std::size_t l, const tensor::ExecutionSpace& space) {
               forward_rows({&inputs[l], 1}, {&outputs[l], 1}, contexts[l], RowRange::all_of(inputs[l]), space);
             });
  }
  forward_end();
}

template <class Scalar>
void Sequential<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                        Context& ctx) const {
  int rows = static_cast<int>(output_grads.at(0).spec().extent(0));
  if (const int parts = row_parts(rows); parts > 1) {
    backward_input_begin(output_grads, input_grads, ctx);
    tensor::on_host_threads(
        Kokkos::DefaultHostExecutionSpace(), "kpipe::model::sequential::backward_input", parts, [&](int part) {
          backward_input_rows(output_grads, input_grads, ctx, RowRange::part_of(rows, part, parts), row_spaces_[part]);
        });
    backward_input_end(output_grads, ctx);
    return;
  }
  tensor::Tensor gradient = output_grads.at(0);
  for (std::size_t i = layers_.size(); i-- > 0;) {
    rows = layers_[i]->input_rows(rows);
    const tensor::Tensor input_gradient = i == 0 ? input_grads.at(0)
                                                 : tensor::Tensor(env_.exec.pool().take<Scalar>(
                                                       "kpipe::model::activation_grad", rows, layers_[i]->input_dim()));
    layers_[i]->backward_input({gradient}, {input_gradient}, ctx.children.at(i));
    if (i > 0) round_between(input_gradient, RowRange::all_of(input_gradient), env_.exec.space());
    gradient = input_gradient;
  }
}

template <class Scalar>
void Sequential<Scalar>::backward_input_begin(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                              Context& ctx) const {
  // Row-wise layers keep their rows: every gradient has the output's.
  const int rows = static_cast<int>(output_grads.at(0).spec().extent(0));
  const std::size_t n = layers_.size();
  std::vector<tensor::Tensor>& pass = open_pass(&ctx);
  pass.resize(n + 1);
  pass[n] = output_grads.at(0);
  pass[0] = input_grads.at(0);
  for (std::size_t i = n; i-- > 0;) {
    if (i > 0) pass[i] = env_.exec.pool().take<Scalar>("kpipe::model::activation_grad", rows, layers_[i]->input_dim());
    layers_[i]->backward_input_begin({&pass[i + 1], 1}, {&pass[i], 1}, ctx.children.at(i));
  }
}

template <class Scalar>
void Sequential<Scalar>::backward_input_rows(tensor::TensorList, tensor::TensorList, const Context& ctx, RowRange rows,
                                             const tensor::ExecutionSpace& space) const {
  backward_input_layers(ctx, 0, layers_.size(), rows, space);
}

template <class Scalar>
void Sequential<Scalar>::backward_input_layers(const Context& ctx, std::size_t first, std::size_t end, RowRange rows,
                                               const tensor::ExecutionSpace& space) const {
  const std::vector<tensor::Tensor>& pass = pass_of(&ctx);
  for (std::size_t i = end; i-- > first;) {
    layers_[i]->backward_input_rows({&pass[i + 1], 1}, {&pass[i], 1}, ctx.children.at(i), rows, space);
    if (i > 0) round_between(pass[i], rows, space);
  }
}

template <class Scalar>
void Sequential<Scalar>::backward_input_end(tensor::TensorList, Context& ctx) const {
  const std::vector<tensor::Tensor>& pass = pass_of(&ctx);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->backward_input_end({&pass[i + 1], 1}, ctx.children.at(i));
  }
  close_pass(&ctx);
}

template <class Scalar>
void Sequential<Scalar>::backward_input_lanes(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                              Context* const* contexts, LaneSplit split) const {
  if (!runs_lanes()) not_row_wise(kind());
  if (split == LaneSplit::layers && !splits_layers()) no_layer_runs();
  for (std::size_t l = 0; l < output_grads.size(); ++l) {
    backward_input_begin({&output_grads[l], 1}, {&input_grads[l], 1}, *contexts[l]);
  }
  if (split == LaneSplit::layers) {
    on_layer_runs("kpipe::model::sequential::backward_input_layer_runs", output_grads.size(), false,
                  [&](std::size_t r, std::size_t l, const tensor::ExecutionSpace& space) {
                    const std::vector<std::size_t>& run = layer_runs_[r];
                    backward_input_layers(*contexts[l], run.front(), run.back() + 1, RowRange::all_of(output_grads[l]),
                                          space);
                  });
  } else {
    on_lanes("kpipe::model::sequential::backward_input_lanes", output_grads.size(),
             [&](std::size_t l, const tensor::ExecutionSpace& space) {
               backward_input_rows({&output_grads[l], 1}, {&input_grads[l], 1}, *contexts[l],
                                   RowRange::all_of(output_grads[l]), space);
             });
  }
  for (std::size_t l = 0; l < output_grads.size(); ++l) backward_input_end({&output_grads[l], 1}, *contexts[l]);
}

template <class Scalar>
void Sequential<Scalar>::backward_weight(Context& ctx, const std::function<void(int)>& after_layer) {
  Context* const one = &ctx;
  backward_weight(&one, 1, after_layer);
}

template <class Scalar>
void Sequential<Scalar>::weigh_by_layer_runs() {
  if (splits_layers() && backward_weight_on_any_thread()) weight_threads_ = layer_runs_;
}

template <class Scalar>
void Sequential<Scalar>::backward_weight(Context* const* contexts, std::size_t count,
                                         const std::function<void(int)>& after_layer) {
  // Layer i's W of every microbatch, in their order: the sums one
  // microbatch's W after the other's gives.
  const auto layer_weight = [&](std::size_t i) {
    for (std::size_t c = 0; c < count; ++c) layers_[i]->backward_weight(contexts[c]->children.at(i));
  };
  // Inside another region (a parent Sequential spreading its W) or with a
  // tool attached, W stays on the calling thread.
  const auto& threads = weight_threads_;
  if (!threads.empty() && !tensor::compat::in_host_parallel_region() && !tensor::compat::observed_by_tool()) {
    // Each layer's W whole on one thread, the threads' shares at once: one
    // parallel region for the stage's W instead of a few per layer, and each
    // product computed as on a single thread, whatever the thread count.
    tensor::on_host_threads(Kokkos::DefaultHostExecutionSpace(), "kpipe::model::sequential::backward_weight",
                            static_cast<int>(threads.size()), [&](int t) {
                              for (const std::size_t i : threads[t]) layer_weight(i);
                            });
    if (after_layer) {
      for (std::size_t i = 0; i < layers_.size(); ++i) after_layer(static_cast<int>(i));
    }
  } else {
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      layer_weight(i);
      if (after_layer) after_layer(static_cast<int>(i));
    }
  }
  for (std::size_t c = 0; c < count; ++c) contexts[c]->clear();
}

template <class Scalar>
bool Sequential<Scalar>::backward_weight_on_any_thread() const {
  return std::all_of(layers_.begin(), layers_.end(),
                     [](const auto& layer) { return layer->backward_weight_on_any_thread(); });
}

template <class Scalar>
std::vector<std::vector<std::size_t>> Sequential<Scalar>::spread_weight_gradients() const {
  const int threads = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
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
    if (i + 1 < layers_.size()) round_between(output, RowRange::all_of(output), env_.exec.space());
  });
}

template <class Scalar>
std::vector<Parameter<Scalar>> Sequential<Scalar>::parameters() const {
  if (weight_threads_.empty()) return parameters_of(layers_);
  std::vector<int> thread_of(layers_.size());
  for (std::size_t t = 0; t < weight_threads_.size(); ++t) {
    for (const std::size_t i : weight_threads_[t]) thread_of[i] = static_cast<int>(t);
  }
  std::vector<Parameter<Scalar>> all;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    for (auto& parameter : layers_[i]->parameters()) {
      parameter.host_thread = thread_of[i];
      all.push_back(std::move(parameter));
    }
  }
  return all;
}

template <class Scalar>
void Sequential<Scalar>::weights_changed() {
  for (auto& layer : layers_) layer->weights_changed();
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace kpipe::model
