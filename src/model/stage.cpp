#include "kpipe/model/stage.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "kpipe/model/layers.hpp"

namespace kpipe::model {

namespace {

template <class Scalar>
std::unique_ptr<Layer<Scalar>> build_body(const ModelSpec& model, LayerRange layers, kernels::GemmPath gemm) {
  const int total = model.layer_count();
  if (layers.count < 1 || layers.first < 0 || layers.end() > total) {
    throw input_error(fmt::format("a stage of layers [{}, {}) does not fit a model of {} layers", layers.first,
                                  layers.end(), total));
  }
  std::vector<std::unique_ptr<Layer<Scalar>>> body;
  for (int index = layers.first; index < layers.end(); ++index) body.push_back(make_layer<Scalar>(model, index, gemm));
  return std::make_unique<Sequential<Scalar>>(std::move(body));
}

std::string stage_name(LayerRange layers) { return fmt::format("stage of layers [{}, {})", layers.first, layers.end()); }

}  // namespace

template <class Scalar>
Stage<Scalar>::Stage(const ModelSpec& model, LayerRange layers, StageOptions options)
    : layers_(layers), options_(options), body_(build_body<Scalar>(model, layers, options.gemm)) {}

template <class Scalar>
void Stage<Scalar>::forward(int mb, const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y) {
  if (stash_.count(mb) != 0) {
    throw runtime_error(fmt::format("{}: forward of microbatch {} while it is still stashed; run its backward first",
                                    stage_name(layers_), mb));
  }
  const int rows = static_cast<int>(X.extent(0));
  kernels::require_shape("stage input", X, rows, input_dim());
  kernels::require_shape("stage output", Y, rows, output_dim());
  Stashed entry;
  entry.rows = rows;
  // Our own copy: the layers keep references to their inputs until W.
  const auto input = kernels::clone<Scalar>("kpipe::model::stage_input", X);
  if (options_.recompute) {
    body_->forward(input, Y, nullptr);
    entry.input = input;
  } else {
    body_->forward(input, Y, &entry.context);
  }
  stash_.emplace(mb, std::move(entry));
  update_peaks();
}

template <class Scalar>
void Stage<Scalar>::backward_input(int mb, const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX) {
  // W runs later, and the layers read dY then: keep a copy the caller cannot overwrite.
  run_backward_input(mb, kernels::clone<Scalar>("kpipe::model::stage_output_grad", dY), dX);
}

template <class Scalar>
void Stage<Scalar>::backward(int mb, const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX) {
  run_backward_input(mb, dY, dX);
  backward_weight(mb);
}

template <class Scalar>
void Stage<Scalar>::run_backward_input(int mb, const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX) {
  Stashed& entry = stashed(mb, false, "backward_input");
  kernels::require_shape("stage output gradient", dY, entry.rows, output_dim());
  if (dX.size() != 0) kernels::require_shape("stage input gradient", dX, entry.rows, input_dim());
  if (options_.recompute) {
    const auto output = kernels::uninitialized_matrix<Scalar>("kpipe::model::recomputed_output", entry.rows,
                                                              output_dim());
    body_->forward(entry.input, output, &entry.context);
    entry.input = {};
    update_peaks();
  }
  body_->backward_input(dY, dX, entry.context);
  entry.input_gradient_done = true;
  update_peaks();
}

template <class Scalar>
void Stage<Scalar>::backward_weight(int mb) {
  body_->backward_weight(stashed(mb, true, "backward_weight").context);
  stash_.erase(mb);
}

template <class Scalar>
void Stage<Scalar>::forward_no_grad(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y) const {
  kernels::require_shape("stage input", X, X.extent(0), input_dim());
  kernels::require_shape("stage output", Y, X.extent(0), output_dim());
  body_->forward(X, Y, nullptr);
}

template <class Scalar>
void Stage<Scalar>::zero_grad() {
  for (const auto& p : parameters()) Kokkos::deep_copy(p.grad, Scalar(0));
}

template <class Scalar>
int Stage<Scalar>::stashed_microbatches() const {
  return static_cast<int>(std::count_if(stash_.begin(), stash_.end(),
                                        [](const auto& entry) { return !entry.second.input_gradient_done; }));
}

template <class Scalar>
std::size_t Stage<Scalar>::stashed_bytes() const {
  std::size_t total = 0;
  for (const auto& [mb, entry] : stash_) total += kernels::bytes(entry.input) + entry.context.bytes();
  return total;
}

template <class Scalar>
typename Stage<Scalar>::Stashed& Stage<Scalar>::stashed(int mb, bool input_gradient_done, const char* action) {
  const auto it = stash_.find(mb);
  const char* needed = input_gradient_done ? "backward_input" : "forward";
  if (it == stash_.end() || it->second.input_gradient_done != input_gradient_done) {
    throw runtime_error(fmt::format("{}: {} of microbatch {} before its {}, or twice; each microbatch runs F, B, W "
                                    "once, in that order",
                                    stage_name(layers_), action, mb, needed));
  }
  return it->second;
}

template <class Scalar>
void Stage<Scalar>::update_peaks() {
  peak_microbatches_ = std::max(peak_microbatches_, stashed_microbatches());
  peak_bytes_ = std::max(peak_bytes_, stashed_bytes());
}

template class Stage<float>;
template class Stage<double>;

}  // namespace kpipe::model
