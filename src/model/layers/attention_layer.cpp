#include <fmt/format.h>

#include <type_traits>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/attention_cached.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/model/kv_cache.hpp"
#include "kpipe/model/layers/transformer_layers.hpp"

namespace kpipe::model {

using kernels::AttentionPath;
using tensor::TensorSpec;

template <class Scalar>
CausalSelfAttention<Scalar>::CausalSelfAttention(int heads, int context, int dim, int layer, KernelChoice kernels,
                                                 LayerEnvironment env)
    : env_(env), heads_(heads), context_(context), dim_(dim), layer_(layer), kernels_(kernels) {}

template <class Scalar>
kernels::AttentionShape CausalSelfAttention<Scalar>::shape(int rows) const {
  if (rows % context_ != 0) {
    throw runtime_error(
        fmt::format("attention got {} positions, not a multiple of the context T = {}", rows, context_));
  }
  kernels::AttentionShape shape{rows / context_ * heads_, context_, dim_ / heads_};
  if (env_.documents) shape.documents = {env_.documents->positions_of(rows, "attention"), heads_};
  return shape;
}

template <class Scalar>
std::vector<TensorDecl> CausalSelfAttention<Scalar>::saved(int rows) const {
  const auto s = shape(rows);
  const std::int64_t stacked = static_cast<std::int64_t>(s.batch_heads) * s.tokens;
  const tensor::DType stored = kernels::stored_dtype<Scalar>(env_.precision);
  if (kernels_.attention == AttentionPath::gemm) {
    const TensorSpec projection({rows, 3 * dim_}, stored), probabilities({stacked, s.tokens}, stored);
    std::vector<TensorDecl> out{TensorDecl{"qkv", projection}};
    if (!env_.selective_recompute) out.push_back(TensorDecl{"p", probabilities});
    return out;
  }
  std::vector<TensorDecl> out;
  // A named spec, not braces inside the loop's braces: nvcc's front end misparses those.
  const TensorSpec stack({stacked, s.head_dim}, stored);
  for (const char* name : {"q", "k", "v", "o"}) out.push_back(TensorDecl{name, stack});
  // The log-sum-exp is a per-row statistic: float32 in every precision.
  out.push_back({"lse", TensorSpec::matrix<Scalar>(stacked, 1)});
  return out;
}

template <class Scalar>
void CausalSelfAttention<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::attention::forward");
  const auto& space = env_.exec.space();
  auto& pool = env_.exec.pool();
  const auto X = inputs.at(0).matrix<Scalar>();
  const auto Y = outputs.at(0).matrix<Scalar>();
  const auto s = shape(X.extent_int(0));
  if (kernels_.attention == AttentionPath::gemm) {
    // The products read Q, K and V in the projection and write O in Y: backward needs the projection as it is.
    const int stacked = s.batch_heads * s.tokens;
    const auto P = pool.take<Scalar>("kpipe::model::attention_p", stacked, s.tokens);
    kernels::with_stored_type<Scalar>(env_.precision, [&](auto element) {
      using Stored = decltype(element);
      if constexpr (std::is_same_v<Stored, Scalar>) {
        kernels::attention_forward_gemm(space, s, X, P, Y, kernels_.gemm);
        if (ctx) {
          ctx->save("qkv", inputs.at(0));
          if (!env_.selective_recompute) ctx->save("p", P);
        }
      } else {
        // The products take the rounded projection and probabilities, which are also what backward keeps.
        const tensor::Tensor qkv = keep(inputs.at(0), "kpipe::model::attention_qkv_stored");
        const auto P_kept = pool.take<Stored>("kpipe::model::attention_p_stored", stacked, s.tokens);
        kernels::attention_forward_gemm<Stored>(space, s, qkv.matrix<Stored>(), P, P_kept, Y, kernels_.gemm);
        if (ctx) {
          ctx->save("qkv", qkv);
          if (!env_.selective_recompute) ctx->save("p", P_kept);
        }
      }
    });
    return;
  }
  // The fused kernels take heads-major stacks.
  const int stacked = s.batch_heads * s.tokens;
  // Distinct labels: all three stay saved together, so one pool would hand out three buffers anyway.
  const auto Q = pool.take<Scalar>("kpipe::model::attention_q", stacked, s.head_dim);
  const auto K = pool.take<Scalar>("kpipe::model::attention_k", stacked, s.head_dim);
  const auto V = pool.take<Scalar>("kpipe::model::attention_v", stacked, s.head_dim);
  const auto O = pool.take<Scalar>("kpipe::model::attention_o", stacked, s.head_dim);
  const auto L = pool.take<Scalar>("kpipe::model::attention_lse", stacked, 1);
  kernels::split_heads(space, X, 0, heads_, context_, Q);
  kernels::split_heads(space, X, dim_, heads_, context_, K);
  kernels::split_heads(space, X, 2 * dim_, heads_, context_, V);
  kernels::attention_forward_fused(space, s, Q, K, V, O, L);
  kernels::merge_heads(space, O, 0, heads_, context_, Y);
  if (ctx) {
    ctx->save("q", keep(Q, "kpipe::model::attention_q_stored"));
    ctx->save("k", keep(K, "kpipe::model::attention_k_stored"));
    ctx->save("v", keep(V, "kpipe::model::attention_v_stored"));
    ctx->save("o", keep(O, "kpipe::model::attention_o_stored"));
    ctx->save("lse", L);
  }
}

template <class Scalar>
void CausalSelfAttention<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                                 Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::attention::backward_input");
  const auto& space = env_.exec.space();
  auto& pool = env_.exec.pool();
  const auto dY = output_grads.at(0).matrix<Scalar>();
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() == 0) {  // no weights, so nothing to do without an input gradient
    ctx.clear();
    return;
  }
  const auto s = shape(dY.extent_int(0));
  if (kernels_.attention == AttentionPath::gemm) {
    const int stacked = s.batch_heads * s.tokens;
    const auto dP = pool.take<Scalar>("kpipe::model::attention_dp", stacked, s.tokens);
    kernels::with_stored_type<Scalar>(env_.precision, [&](auto element) {
      using Stored = decltype(element);
      const auto qkv = ctx.saved("qkv").matrix<Stored>();
      if (env_.selective_recompute) rebuild_probabilities<Stored>(s, qkv, ctx);
      const auto P = ctx.saved("p").matrix<Stored>();
      if constexpr (std::is_same_v<Stored, Scalar>) {
        kernels::attention_backward_gemm(space, s, qkv, P, dY, dP, dX, kernels_.gemm);
      } else {
        const tensor::Tensor dO = keep(output_grads.at(0), "kpipe::model::attention_do_stored");
        const auto dS = pool.take<Stored>("kpipe::model::attention_ds_stored", stacked, s.tokens);
        kernels::attention_backward_gemm<Stored>(space, s, qkv, P, dO.matrix<Stored>(), dP, dS, dX, kernels_.gemm);
      }
    });
    ctx.clear();
    return;
  }
  const int stacked = s.batch_heads * s.tokens;
  const auto dO = pool.take<Scalar>("kpipe::model::attention_do", stacked, s.head_dim);
  const auto dQ = pool.take<Scalar>("kpipe::model::attention_dq", stacked, s.head_dim);
  const auto dK = pool.take<Scalar>("kpipe::model::attention_dk", stacked, s.head_dim);
  const auto dV = pool.take<Scalar>("kpipe::model::attention_dv", stacked, s.head_dim);
  const auto D = pool.take<Scalar>("kpipe::model::attention_delta", stacked, 1);
  kernels::split_heads(space, dY, 0, heads_, context_, dO);
  const auto Q = computable(ctx.saved("q"), "kpipe::model::attention_q_widened");
  const auto K = computable(ctx.saved("k"), "kpipe::model::attention_k_widened");
  const auto V = computable(ctx.saved("v"), "kpipe::model::attention_v_widened");
  const auto O = computable(ctx.saved("o"), "kpipe::model::attention_o_widened");
  kernels::attention_backward_fused(space, s, Q, K, V, O, ctx.saved("lse").matrix<Scalar>(), dO, D, dQ, dK, dV);
  kernels::merge_heads(space, dQ, 0, heads_, context_, dX);
  kernels::merge_heads(space, dK, dim_, heads_, context_, dX);
  kernels::merge_heads(space, dV, 2 * dim_, heads_, context_, dX);
  ctx.clear();
}

template <class Scalar>
template <class Stored>
void CausalSelfAttention<Scalar>::rebuild_probabilities(const kernels::AttentionShape& s,
                                                        const tensor::ConstMatrix<Stored>& qkv, Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::attention::recompute");
  auto& pool = env_.exec.pool();
  const int stacked = s.batch_heads * s.tokens;
  const auto P = pool.take<Scalar>("kpipe::model::attention_p", stacked, s.tokens);
  if constexpr (std::is_same_v<Stored, Scalar>) {
    kernels::attention_probabilities_gemm(env_.exec.space(), s, qkv, P, kernels_.gemm);
    ctx.save("p", P);
  } else {
    const auto P_kept = pool.take<Stored>("kpipe::model::attention_p_stored", stacked, s.tokens);
    kernels::attention_probabilities_gemm<Stored>(env_.exec.space(), s, qkv, P, P_kept, kernels_.gemm);
    ctx.save("p", P_kept);
  }
}

template <class Scalar>
tensor::Tensor CausalSelfAttention<Scalar>::keep(const tensor::Tensor& tensor, const char* label) const {
  return kernels::rounded(env_.exec, tensor, kernels::stored_dtype<Scalar>(env_.precision), label);
}

template <class Scalar>
tensor::Matrix<Scalar> CausalSelfAttention<Scalar>::computable(const tensor::Tensor& saved, const char* label) const {
  return kernels::widened(env_.exec, saved, label).template matrix<Scalar>();
}

template <class Scalar>
void CausalSelfAttention<Scalar>::infer(tensor::TensorList inputs, tensor::TensorList outputs,
                                        CachedBatch<Scalar>& batch) const {
  const auto region = env_.exec.region("kpipe::model::attention::infer");
  const KvCache<Scalar>& cache = batch.cache();
  kernels::with_stored_type<Scalar>(env_.precision, [&](auto element) {
    using Stored = decltype(element);
    kernels::attention_cached<Scalar, Stored>(env_.exec.space(), heads_, batch.paged(), inputs.at(0).matrix<Scalar>(),
                                              cache.keys(layer_).template matrix<Stored>(),
                                              cache.values(layer_).template matrix<Stored>(),
                                              outputs.at(0).matrix<Scalar>());
  });
}

template class CausalSelfAttention<float>;
template class CausalSelfAttention<double>;

}  // namespace kpipe::model
