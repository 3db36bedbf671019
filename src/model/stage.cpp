#include "kpipe/model/stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <type_traits>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/optimizer.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/model/layers/detail/sequence_edge.hpp"
#include "kpipe/model/layers/sequential.hpp"

namespace kpipe::model {

namespace {

// `layer` after (enter) or before (leave) the sequence-parallel edge.
template <class Scalar>
std::unique_ptr<Layer<Scalar>> with_edge(std::unique_ptr<Layer<Scalar>> layer, SequenceEdge edge,
                                         LayerEnvironment env) {
  const int width = edge == SequenceEdge::enter ? layer->input_dim() : layer->output_dim();
  std::vector<std::unique_ptr<Layer<Scalar>>> parts;
  parts.push_back(std::move(layer));
  parts.insert(edge == SequenceEdge::enter ? parts.begin() : parts.end(),
               std::make_unique<SequenceEdgeLayer<Scalar>>(edge, width, env));
  return std::make_unique<Sequential<Scalar>>(std::move(parts), env);
}

template <class Scalar>
std::unique_ptr<Sequential<Scalar>> build_body(const ModelSpec& model, LayerRange layers, KernelChoice kernels,
                                               LayerEnvironment env) {
  const int total = model.layer_count();
  if (layers.count < 1 || layers.first < 0 || layers.end() > total) {
    throw input_error(
        fmt::format("a stage of layers [{}, {}) does not fit a model of {} layers", layers.first, layers.end(), total));
  }
  const auto splits = tensor_splits(model, layers, env.collectives.size(Group::tensor));
  std::vector<std::unique_ptr<Layer<Scalar>>> body;
  for (int index = layers.first; index < layers.end(); ++index) {
    body.push_back(make_layer<Scalar>(model, index, kernels, env, splits[index - layers.first]));
  }
  // A sequence-parallel MLP enters the sharded rows at its first layer and
  // leaves them at its last, inside those layers, so a stage's children stay
  // its layers (the embedding and the LM head of a transformer do it themselves).
  if (env.sequence_parallel && !model.token_sequences()) {
    if (layers.first == 0) body.front() = with_edge(std::move(body.front()), SequenceEdge::enter, env);
    if (layers.end() == total) body.back() = with_edge(std::move(body.back()), SequenceEdge::leave, env);
  }
  return std::make_unique<Sequential<Scalar>>(std::move(body), env, BetweenLayers::rounded);
}

std::string stage_name(LayerRange layers) {
  return fmt::format("stage of layers [{}, {})", layers.first, layers.end());
}

}  // namespace

template <class Scalar>
Stage<Scalar>::Stage(const ModelSpec& model, LayerRange layers, StageOptions options, tensor::ExecContext& exec)
    : layers_(layers),
      options_(options),
      exec_(exec),
      serial_(std::make_unique<SerialCollectives>(exec)),
      env_{exec, *serial_, false, options.kernels.precision, options.selective_recompute, options.documents},
      body_(build_body<Scalar>(model, layers, options.kernels, env_)),
      last_(layers.end() == model.layer_count()),
      positions_(model.positions()),
      kv_width_(kv_width(model)),
      attention_layers_(decoder_blocks(model, layers)) {}

template <class Scalar>
Stage<Scalar>::Stage(const ModelSpec& model, LayerRange layers, StageOptions options, Collectives& collectives,
                     tensor::ExecContext& exec)
    : layers_(layers),
      options_(options),
      exec_(exec),
      env_{exec,
           collectives,
           options.sequence_parallel && collectives.size(Group::tensor) > 1,
           options.kernels.precision,
           options.selective_recompute,
           options.documents},
      body_(build_body<Scalar>(model, layers, options.kernels, env_)),
      last_(layers.end() == model.layer_count()),
      positions_(model.positions()),
      kv_width_(kv_width(model, collectives.size(Group::tensor))),
      attention_layers_(decoder_blocks(model, layers)) {}

template <class Scalar>
int Stage<Scalar>::input_rows(int microbatch_size) const {
  if (layers_.first == 0 || !env_.sequence_parallel) return microbatch_size;
  return microbatch_size / env_.collectives.size(Group::tensor);
}

namespace {
// A pooled copy of `source` for the stash, queued on the context's instance.
template <class Scalar>
tensor::Matrix<Scalar> pooled_copy(tensor::ExecContext& exec, const char* label,
                                   const tensor::ConstMatrix<Scalar>& source) {
  const auto copy = exec.pool().take<Scalar>(label, source.extent_int(0), source.extent_int(1));
  Kokkos::deep_copy(exec.space(), copy, source);
  return copy;
}
}  // namespace

template <class Scalar>
tensor::Tensor Stage<Scalar>::admit(int mb, const tensor::ConstMatrix<Scalar>& X, const tensor::Matrix<Scalar>& Y,
                                    typename Stash::node_type& entry) {
  if (stash_.count(mb) != 0) {
    throw runtime_error(fmt::format("{}: forward of microbatch {} while it is still stashed; run its backward first",
                                    stage_name(layers_), mb));
  }
  const int rows = static_cast<int>(X.extent(0));
  tensor::require_shape("stage input", X, rows, input_dim());
  tensor::require_shape("stage output", Y, output_rows(rows), output_dim());
  entry = fresh_entry(mb);
  entry.mapped().rows = rows;
  // Our own copy: the layers keep references to their inputs until W.
  const tensor::Tensor input = pooled_copy<Scalar>(exec_, "kpipe::model::stage_input", X);
  // Past the first stage the input is an activation between layers (already
  // rounded when it came from a stage; rounding again changes nothing).
  if (layers_.first > 0) round_boundary(input);
  return input;
}

template <class Scalar>
void Stage<Scalar>::stash(typename Stash::node_type entry, const tensor::Matrix<Scalar>& Y) {
  if (!last_) round_boundary(Y);
  if (options_.stash_store != nullptr) spill(entry.key(), entry.mapped());
  stash_.insert(std::move(entry));
  update_peaks();
}

template <class Scalar>
void Stage<Scalar>::forward(int mb, const tensor::ConstMatrix<Scalar>& X, const tensor::Matrix<Scalar>& Y) {
  const auto region = exec_.region("kpipe::F");
  typename Stash::node_type node;
  const tensor::Tensor input = admit(mb, X, Y, node);
  Stashed& entry = node.mapped();
  if (options_.recompute) {
    body_->forward({input}, {Y}, nullptr);
    // Exact in the stored type past the first stage; the data stays as given.
    entry.input = layers_.first > 0
                      ? kernels::rounded(exec_, input, boundary_dtype(), "kpipe::model::stage_input_stored")
                      : input;
  } else {
    body_->forward({input}, {Y}, &entry.context);
  }
  stash(std::move(node), Y);
}

template <class Scalar>
void Stage<Scalar>::forward_lanes(const std::vector<int>& mbs, const std::vector<tensor::Matrix<Scalar>>& X,
                                  const std::vector<tensor::Matrix<Scalar>>& Y, LaneSplit split) {
  const auto region = exec_.region("kpipe::F");
  lane_entries_.resize(mbs.size());
  for (std::size_t l = 0; l < mbs.size(); ++l) {
    lane_in_.push_back(admit(mbs[l], X[l], Y[l], lane_entries_[l]));
    lane_out_.emplace_back(Y[l]);
    lane_contexts_.push_back(&lane_entries_[l].mapped().context);
  }
  body_->forward_lanes(lane_in_, lane_out_, lane_contexts_.data(), split);
  for (std::size_t l = 0; l < mbs.size(); ++l) stash(std::move(lane_entries_[l]), Y[l]);
  lane_entries_.clear();
  lane_in_.clear();
  lane_out_.clear();
  lane_contexts_.clear();
}

namespace {
// The store's name of a tensor at `path` in a stage's context tree: the
// top-level children are the stage's layers, so "layer<global index>", then
// the child indices inside composite layers, then the saved name.
std::string spill_key(LayerRange layers, const std::vector<int>& path, const std::string& name) {
  std::string key;
  for (std::size_t depth = 0; depth < path.size(); ++depth) {
    key += depth == 0 ? fmt::format("layer{}.", layers.first + path[0]) : fmt::format("{}.", path[depth]);
  }
  return key + name;
}

// Every context of the tree with its path, parents before children.
void walk(Context& context, std::vector<int>& path,
          const std::function<void(Context&, const std::vector<int>&)>& visit) {
  visit(context, path);
  for (std::size_t i = 0; i < context.children.size(); ++i) {
    path.push_back(static_cast<int>(i));
    walk(context.children[i], path, visit);
    path.pop_back();
  }
}

Context& context_at(Context& root, const std::vector<int>& path) {
  Context* context = &root;
  for (const int i : path) context = &context->children.at(static_cast<std::size_t>(i));
  return *context;
}
}  // namespace

template <class Scalar>
void Stage<Scalar>::spill(int mb, Stashed& entry) {
  const auto region = exec_.region("kpipe::model::stage::spill");
  StashStore& store = *options_.stash_store;
  if (options_.recompute) {
    entry.spilled.push_back({{}, "input", "input", entry.input.spec(), -1});
    store.put(mb, "input", entry.input);
    entry.input = {};
    return;
  }
  std::map<const void*, int> first_of_buffer;
  std::vector<int> path;
  walk(entry.context, path, [&](Context& context, const std::vector<int>& at) {
    for (const TensorDecl& decl : context.saved_specs()) {
      const tensor::Tensor& tensor = context.saved(decl.name);
      Spilled spilled{at, decl.name, spill_key(layers_, at, decl.name), decl.spec, -1};
      const auto [it, first] = first_of_buffer.emplace(tensor.data(), static_cast<int>(entry.spilled.size()));
      if (first) {
        store.put(mb, spilled.key, tensor);
      } else {
        spilled.alias_of = it->second;
      }
      entry.spilled.push_back(std::move(spilled));
    }
    for (const TensorDecl& decl : context.saved_specs()) context.drop(decl.name);
  });
}

template <class Scalar>
void Stage<Scalar>::restore(int mb, Stashed& entry) {
  const auto region = exec_.region("kpipe::model::stage::restore");
  StashStore& store = *options_.stash_store;
  std::vector<tensor::Tensor> restored;
  for (const Spilled& spilled : entry.spilled) {
    if (spilled.alias_of >= 0) {
      restored.push_back(restored.at(static_cast<std::size_t>(spilled.alias_of)));
    } else {
      const tensor::DType dtype = spilled.spec.dtype();
      const bool reduced = dtype == tensor::DType::bfloat16 || dtype == tensor::DType::float16;
      if (spilled.spec.rank() != 2 || (dtype != tensor::dtype_of<Scalar>() && !reduced)) {
        throw runtime_error(
            fmt::format("{}: cannot take back the stashed {} \"{}\" of microbatch {}: the stash "
                        "store restores matrices of the stage's scalar type, bfloat16 or float16 only",
                        stage_name(layers_), spilled.spec.to_string(), spilled.key, mb));
      }
      // compute.precision = bf16 or fp16: a Linear's saved input is its reduced-precision copy.
      const tensor::Tensor into =
          exec_.pool().take("kpipe::model::restored_stash", dtype, static_cast<int>(spilled.spec.extent(0)),
                            static_cast<int>(spilled.spec.extent(1)));
      store.take(mb, spilled.key, into);
      restored.push_back(into);
    }
    if (options_.recompute) {
      entry.input = restored.back();
    } else {
      context_at(entry.context, spilled.path).save(spilled.name, restored.back());
    }
  }
  entry.spilled.clear();
}

template <class Scalar>
void Stage<Scalar>::backward_input(int mb, const tensor::ConstMatrix<Scalar>& dY, const tensor::Matrix<Scalar>& dX) {
  const auto region = exec_.region("kpipe::B");
  // W runs later, and the layers read dY then: keep a copy the caller cannot overwrite.
  run_backward_input(mb, pooled_copy<Scalar>(exec_, "kpipe::model::stage_output_grad", dY), dX);
}

template <class Scalar>
void Stage<Scalar>::backward(int mb, const tensor::ConstMatrix<Scalar>& dY, const tensor::Matrix<Scalar>& dX,
                             const LayerDone& after_layer) {
  const auto region = exec_.region("kpipe::BW");
  run_backward_input(mb, dY, dX);
  body_->backward_weight(stashed(mb, true, "backward").context, after_layer);
  retire(mb);
}

template <class Scalar>
typename Stage<Scalar>::Stashed& Stage<Scalar>::begin_backward_input(int mb, const tensor::Tensor& dY,
                                                                     const tensor::Matrix<Scalar>& dX) {
  Stashed& entry = stashed(mb, false, "backward_input");
  tensor::require_shape("stage output gradient", dY.matrix<Scalar>(), output_rows(entry.rows), output_dim());
  if (dX.size() != 0) tensor::require_shape("stage input gradient", dX, entry.rows, input_dim());
  if (!entry.spilled.empty()) {
    restore(mb, entry);
    update_peaks();
  }
  if (options_.recompute) {
    const auto output =
        exec_.pool().take<Scalar>("kpipe::model::recomputed_output", output_rows(entry.rows), output_dim());
    body_->forward({kernels::widened(exec_, entry.input, "kpipe::model::stage_input_widened")}, {output},
                   &entry.context);
    entry.input = {};
    update_peaks();
  }
  return entry;
}

template <class Scalar>
void Stage<Scalar>::end_backward_input(Stashed& entry, const tensor::Matrix<Scalar>& dX) {
  if (dX.size() != 0) round_boundary(dX);
  entry.input_gradient_done = true;
  update_peaks();
}

template <class Scalar>
void Stage<Scalar>::run_backward_input(int mb, const tensor::Tensor& dY, const tensor::Matrix<Scalar>& dX) {
  Stashed& entry = begin_backward_input(mb, dY, dX);
  body_->backward_input({dY}, {dX.size() != 0 ? tensor::Tensor(dX) : tensor::Tensor()}, entry.context);
  end_backward_input(entry, dX);
}

template <class Scalar>
void Stage<Scalar>::backward_input_lanes(const std::vector<int>& mbs, const std::vector<tensor::Matrix<Scalar>>& dY,
                                         const std::vector<tensor::Matrix<Scalar>>& dX, LaneSplit split) {
  const auto region = exec_.region("kpipe::B");
  for (std::size_t l = 0; l < mbs.size(); ++l) {
    // As backward_input: W reads dY later.
    lane_in_.push_back(pooled_copy<Scalar>(exec_, "kpipe::model::stage_output_grad", dY[l]));
    lane_out_.push_back(dX[l].size() != 0 ? tensor::Tensor(dX[l]) : tensor::Tensor());
    lane_contexts_.push_back(&begin_backward_input(mbs[l], lane_in_.back(), dX[l]).context);
  }
  body_->backward_input_lanes(lane_in_, lane_out_, lane_contexts_.data(), split);
  for (std::size_t l = 0; l < mbs.size(); ++l) end_backward_input(stashed(mbs[l], false, "backward_input"), dX[l]);
  lane_in_.clear();
  lane_out_.clear();
  lane_contexts_.clear();
}

template <class Scalar>
void Stage<Scalar>::backward_weight(int mb, const LayerDone& after_layer) {
  const auto region = exec_.region("kpipe::W");
  body_->backward_weight(stashed(mb, true, "backward_weight").context, after_layer);
  retire(mb);
}

template <class Scalar>
void Stage<Scalar>::backward_weight_lanes(const std::vector<int>& mbs, const LayerDone& after_layer) {
  const auto region = exec_.region("kpipe::W");
  for (const int mb : mbs) lane_contexts_.push_back(&stashed(mb, true, "backward_weight").context);
  body_->backward_weight(lane_contexts_.data(), lane_contexts_.size(), after_layer);
  for (const int mb : mbs) retire(mb);
  lane_contexts_.clear();
}

template <class Scalar>
void Stage<Scalar>::forward_no_grad(const tensor::ConstMatrix<Scalar>& X, const tensor::Matrix<Scalar>& Y) const {
  const auto region = exec_.region("kpipe::F");
  tensor::require_shape("stage input", X, X.extent(0), input_dim());
  tensor::require_shape("stage output", Y, output_rows(X.extent_int(0)), output_dim());
  body_->forward({X}, {Y}, nullptr);
  if (!last_) round_boundary(Y);
}

template <class Scalar>
void Stage<Scalar>::enable_kv_cache(int blocks, int block_tokens) {
  if (kv_width_ == 0) {
    throw input_error(
        fmt::format("{}: a KV cache serves language models; this model has no attention", stage_name(layers_)));
  }
  if (blocks < 1 || block_tokens < 1) {
    throw input_error(fmt::format("{}: a KV cache of {} blocks of {} tokens is empty; both must be at least 1",
                                  stage_name(layers_), blocks, block_tokens));
  }
  cache_ = std::make_unique<KvCache<Scalar>>(attention_layers_, blocks, block_tokens, kv_width_,
                                             kernels::stored_dtype<Scalar>(options_.kernels.precision));
}

template <class Scalar>
void Stage<Scalar>::infer(const KvBlockTable& table, const TokenBatch& tokens, const tensor::ConstMatrix<Scalar>& X,
                          const tensor::Matrix<Scalar>& Y) {
  const auto region = exec_.region("kpipe::F");
  if (!cache_) {
    throw runtime_error(fmt::format("{}: infer without a KV cache; call enable_kv_cache(blocks, block_tokens) first",
                                    stage_name(layers_)));
  }
  const auto n = static_cast<std::size_t>(tokens.size());
  tensor::require_shape("stage token input", X, n, static_cast<std::size_t>(token_input_width()));
  tensor::require_shape("stage token output", Y, n, static_cast<std::size_t>(token_output_width()));
  for (std::size_t i = 0; i < tokens.position.size(); ++i) {
    // The position table has T rows, and every stage must agree on the batch.
    if (tokens.position[i] >= positions_) {
      throw input_error(fmt::format("{}: token {} of the batch is at position {}, past the context T = {}",
                                    stage_name(layers_), i, tokens.position[i], positions_));
    }
  }
  CachedBatch<Scalar> batch(*cache_, table, tokens, exec_);
  body_->infer({X}, {Y}, batch);
  if (!last_) round_boundary(Y);
}

template <class Scalar>
void Stage<Scalar>::round_boundary(const tensor::Tensor& boundary) const {
  if constexpr (std::is_same_v<Scalar, float>) {
    kernels::round_through(exec_.space(), boundary.matrix<float>(), boundary_dtype());
  }
}

template <class Scalar>
void Stage<Scalar>::zero_grad() {
  std::vector<kernels::OwnedGradient<Scalar>> gradients;
  for (const auto& p : parameters()) gradients.push_back({p.grad, p.host_thread});
  kernels::zero_gradients(exec_.space(), gradients);
}

template <class Scalar>
void Stage<Scalar>::discard_stash() {
  for (const auto& [mb, entry] : stash_) {
    if (!entry.spilled.empty()) {
      throw runtime_error(fmt::format("{}: microbatch {} is in the stash store, which keeps no way to drop it",
                                      stage_name(layers_), mb));
    }
  }
  stash_.clear();
}

template <class Scalar>
int Stage<Scalar>::stashed_microbatches() const {
  return static_cast<int>(
      std::count_if(stash_.begin(), stash_.end(), [](const auto& entry) { return !entry.second.input_gradient_done; }));
}

template <class Scalar>
std::size_t Stage<Scalar>::stashed_bytes() const {
  std::size_t total = 0;
  for (const auto& [mb, entry] : stash_) total += entry.input.bytes() + entry.context.bytes();
  return total;
}

template <class Scalar>
typename Stage<Scalar>::Stash::node_type Stage<Scalar>::fresh_entry(int mb) {
  if (spare_.empty()) return Stash{{mb, Stashed{}}}.extract(mb);
  auto node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = mb;
  return node;
}

template <class Scalar>
void Stage<Scalar>::retire(int mb) {
  auto node = stash_.extract(mb);
  Stashed& entry = node.mapped();
  entry.input = {};
  entry.context.clear();
  entry.input_gradient_done = false;
  entry.spilled.clear();
  spare_.push_back(std::move(node));
}

template <class Scalar>
typename Stage<Scalar>::Stashed& Stage<Scalar>::stashed(int mb, bool input_gradient_done, const char* action) {
  const auto it = stash_.find(mb);
  const char* needed = input_gradient_done ? "backward_input" : "forward";
  if (it == stash_.end() || it->second.input_gradient_done != input_gradient_done) {
    throw runtime_error(
        fmt::format("{}: {} of microbatch {} before its {}, or twice; each microbatch runs F, B, W "
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
