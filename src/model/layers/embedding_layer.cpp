#include <algorithm>
#include <utility>

#include "kpipe/kernels/embedding.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/kv_cache.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model {

using tensor::TensorSpec;

namespace {

constexpr double gpt2_embedding_std = 0.02;

// `shard` of a rows x cols table.
template <class Scalar>
Parameter<Scalar> table(const std::string& name, int rows, int cols, Shard shard = Shard::whole()) {
  rows /= shard.count;
  return {name, tensor::uninitialized_matrix<Scalar>("kpipe::model::" + name, rows, cols),
          tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".grad", rows, cols), shard, true};
}

}  // namespace

template <class Scalar>
TokenEmbedding<Scalar>::TokenEmbedding(int vocab, int padded_vocab, int context, int dim, const std::string& name,
                                       std::uint64_t init_key, LayerEnvironment env, bool tied, bool learned_positions)
    : env_(env),
      token_(table<Scalar>(name + ".token", padded_vocab, dim,
                           Shard::along(0, env.collectives.rank(Group::tensor), env.collectives.size(Group::tensor))
                               .padded_after(0, vocab))),
      position_(table<Scalar>(name + ".position", learned_positions ? context : 0, dim)),
      context_(context),
      first_(token_.shard.index * static_cast<int>(token_.value.extent(0))) {
  const auto& space = env_.exec.space();
  // The counter-based stream gives the shard's rows as they are in the whole
  // table, whatever the padding; the padding rows are zero and never looked up.
  kernels::fill_normal(space, kernels::stream_key(init_key, 0), first_, 0.0, gpt2_embedding_std, token_.value);
  const int rows = token_.value.extent_int(0), real_rows = std::clamp(vocab - first_, 0, rows);
  Kokkos::deep_copy(space, Kokkos::subview(token_.value, std::make_pair(real_rows, rows), Kokkos::ALL), Scalar(0));
  kernels::fill_normal(space, kernels::stream_key(init_key, 1), 0, 0.0, gpt2_embedding_std, position_.value);
  if (tied) token_.tie = Parameter<Scalar>::Tie::owner;
  // Vocabulary-parallel: the shards' lookups are summed, and the position must count once.
  if (token_.shard.index == 0) added_position_ = position_.value;
}

template <class Scalar>
std::vector<Parameter<Scalar>> TokenEmbedding<Scalar>::parameters() const {
  if (position_.value.size() == 0) return {token_};
  return {token_, position_};
}

template <class Scalar>
std::vector<TensorDecl> TokenEmbedding<Scalar>::saved(int rows) const {
  return {{"ids", TensorSpec::matrix<Scalar>(rows, input_dim())}};
}

template <class Scalar>
void TokenEmbedding<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::embedding::forward");
  const auto ids = inputs.at(0).matrix<Scalar>();
  if (env_.sequence_parallel) {
    // Each rank keeps its rows of the summed lookups.
    const auto whole =
        env_.exec.pool().take<Scalar>("kpipe::model::embedding::lookups", ids.extent_int(0), output_dim());
    kernels::embedding_forward(env_.exec.space(), ids, token_.value, added_position_, whole, first_, separator());
    env_.collectives.reduce_scatter_sum(Group::tensor, whole, outputs.at(0));
  } else {
    kernels::embedding_forward(env_.exec.space(), ids, token_.value, added_position_, outputs.at(0).matrix<Scalar>(),
                               first_, separator());
    env_.collectives.all_reduce_sum(Group::tensor, outputs.at(0));
  }
  if (ctx) ctx->save("ids", inputs.at(0));
}

template <class Scalar>
void TokenEmbedding<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList, Context& ctx) const {
  // Token ids have no gradient: only the tables learn. With sequence
  // parallelism every id's row of the gradient is needed: the group's rows.
  const tensor::DType stored = kernels::stored_dtype<Scalar>(env_.precision);
  const tensor::Tensor dY = output_grads.at(0);
  if (!env_.sequence_parallel) {
    ctx.save("dy", kernels::rounded(env_.exec, dY, stored, "kpipe::model::embedding::dy_stored"));
    return;
  }
  const int rows = static_cast<int>(dY.spec().extent(0)) * env_.collectives.size(Group::tensor);
  const tensor::Tensor whole =
      env_.exec.pool().take<Scalar>("kpipe::model::embedding::gathered_dy", rows, output_dim());
  env_.collectives.all_gather(Group::tensor, dY, whole);
  ctx.save("dy", kernels::rounded(env_.exec, whole, stored, "kpipe::model::embedding::dy_stored"));
}

template <class Scalar>
void TokenEmbedding<Scalar>::backward_weight(Context& ctx) {
  const auto region = env_.exec.region("kpipe::model::embedding::backward_weight");
  const tensor::Tensor dy = kernels::widened(env_.exec, ctx.saved("dy"), "kpipe::model::embedding::dy_widened");
  kernels::embedding_backward(env_.exec.space(), ctx.saved("ids").matrix<Scalar>(), dy.matrix<Scalar>(), token_.grad,
                              position_.grad, first_, separator());
  ctx.clear();
}

template <class Scalar>
void TokenEmbedding<Scalar>::infer(tensor::TensorList inputs, tensor::TensorList outputs,
                                   CachedBatch<Scalar>& batch) const {
  const auto region = env_.exec.region("kpipe::model::embedding::infer");
  kernels::embedding_forward_at(env_.exec.space(), inputs.at(0).matrix<Scalar>(), batch.paged().position, token_.value,
                                added_position_, outputs.at(0).matrix<Scalar>(), first_);
  env_.collectives.all_reduce_sum(Group::tensor, outputs.at(0));
}

template class TokenEmbedding<float>;
template class TokenEmbedding<double>;

}  // namespace kpipe::model
