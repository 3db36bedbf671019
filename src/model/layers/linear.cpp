#include "kpipe/model/layers/linear.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/layers/weight_init.hpp"
#include "kpipe/model/tensor_parallel.hpp"

namespace kpipe::model {

using kernels::Trans;
using tensor::TensorSpec;

WeightInit WeightInit::of(config::InitKind kind, int fan_in, int fan_out, double gpt2_std) {
  switch (kind) {
    case config::InitKind::automatic:
    case config::InitKind::uniform:
      return {false, 1.0 / std::sqrt(static_cast<double>(fan_in))};
    case config::InitKind::he:
      return {true, std::sqrt(2.0 / fan_in)};
    case config::InitKind::xavier:
      return {false, std::sqrt(6.0 / (fan_in + fan_out))};
    case config::InitKind::gpt2:
      return {true, gpt2_std};
  }
  return {};
}

template <class Scalar>
void initialise(const tensor::ExecutionSpace& space, const WeightInit& init, std::uint64_t key,
                const tensor::Matrix<Scalar>& weight) {
  if (init.normal) {
    kernels::fill_normal(space, key, 0, 0.0, init.scale, weight);
  } else {
    kernels::fill_uniform(space, key, -init.scale, init.scale, weight);
  }
}

namespace {

// This rank's shard of a matrix that `split` cuts along `axis`, or whole when unsplit or replicated.
Shard shard_of(TensorSplit split, int axis, int blocks, const Collectives& collectives) {
  if (split == TensorSplit::none || split == TensorSplit::replicated) return Shard::whole();
  return Shard::along(axis, collectives.rank(Group::tensor), collectives.size(Group::tensor), blocks);
}

// `extent` of an axis split into `shard`: the shard's share.
int local_extent(int extent, const Shard& shard, int axis) {
  return shard.axis == axis ? extent / shard.count : extent;
}

// `weight` as `init` would fill the whole rows x cols matrix, cut to the
// slice `shard`: the shard of the unsharded initialisation. A padded shard's
// real entries are filled as an unpadded matrix's, the padding is zero.
template <class Scalar>
void initialise_shard(const tensor::ExecutionSpace& space, const WeightInit& init, std::uint64_t key, int rows,
                      int cols, const Shard& shard, const tensor::Matrix<Scalar>& weight) {
  if (shard.full() && !shard.padded()) {
    initialise(space, init, key, weight);
    return;
  }
  const bool padded = shard.padded();
  const auto real = tensor::uninitialized_matrix<Scalar>("kpipe::model::linear::whole_weight",
                                                         padded && shard.axis == 0 ? shard.valid : rows,
                                                         padded && shard.axis == 1 ? shard.valid : cols);
  initialise(space, init, key, real);
  copy_real_shard<Scalar>(space, real, shard, weight);
  space.fence();  // `real` goes out of scope
}

}  // namespace

template <class Scalar>
Linear<Scalar>::Linear(int input, int output, const std::string& name, std::uint64_t init_key, WeightInit init,
                       KernelChoice kernels, LayerEnvironment env, TensorSplit split, int blocks, int real_outputs,
                       bool bias, WeightLayout layout)
    : env_(env),
      split_(env.collectives.size(Group::tensor) == 1 ? TensorSplit::none : split),
      has_bias_(bias),
      transposed_(layout == WeightLayout::output_by_input),
      sequence_parallel_(env.sequence_parallel),
      ranks_(env.collectives.size(Group::tensor)),
      gemm_(kernels.gemm),
      precision_(kernels.precision) {
  if (reduced() && !std::is_same_v<Scalar, float>) {
    throw input_error(fmt::format("Linear {}: {} GEMMs need a float32 layer", name, kernels::name_of(precision_)));
  }
  if (precision_ == kernels::Precision::fp16 && gemm_ == kernels::GemmPath::packed) {
    throw input_error(
        fmt::format("Linear {}: no packed backend packs float16 weights; fp16 GEMMs run on the vendor or "
                    "portable path",
                    name));
  }
  if (real_outputs == -1) real_outputs = output;
  if (real_outputs < 1 || real_outputs > output ||
      (real_outputs < output && (split_ == TensorSplit::row || blocks > 1))) {
    throw runtime_error(
        fmt::format("Linear {}: {} real of {} outputs; only a whole or column-parallel Linear of "
                    "one block masks outputs",
                    name, real_outputs, output));
  }
  if (transposed_ && gemm_ == kernels::GemmPath::packed) gemm_ = kernels::GemmPath::vendor;
  if (gemm_ == kernels::GemmPath::packed) packed_ = std::make_unique<kernels::PackedWeight<Scalar>>();
  // The axes of W that hold the inputs and the outputs.
  const int in_axis = transposed_ ? 1 : 0, out_axis = 1 - in_axis;
  Shard weight_shard = shard_of(split_, split_ == TensorSplit::row ? in_axis : out_axis, blocks, env.collectives);
  Shard bias_shard = split_ == TensorSplit::column ? shard_of(split_, 1, blocks, env.collectives) : Shard::whole();
  if (real_outputs < output) {
    weight_shard = weight_shard.padded_after(out_axis, real_outputs);
    bias_shard = bias_shard.padded_after(1, real_outputs);
  }
  const int whole_rows = transposed_ ? output : input, whole_columns = transposed_ ? input : output;
  const int rows = local_extent(whole_rows, weight_shard, 0);
  const int columns = local_extent(whole_columns, weight_shard, 1);
  const int bias_columns = local_extent(output, bias_shard, 1);
  weight_ = {name + ".weight", tensor::uninitialized_matrix<Scalar>("kpipe::model::" + name + ".weight", rows, columns),
             tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".weight.grad", rows, columns), weight_shard, true};
  bias_ = {name + ".bias", tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".bias", 1, bias_columns),
           tensor::zero_matrix<Scalar>("kpipe::model::" + name + ".bias.grad", 1, bias_columns), bias_shard};
  // Between the pairs a Linear sees only this rank's rows, a replicated one
  // only this rank's share of the output gradient: its gradients are partial.
  weight_.row_partial = bias_.row_partial =
      (sequence_parallel_ && split_ == TensorSplit::none) || split_ == TensorSplit::replicated;
  initialise_shard(env_.exec.space(), init, init_key, whole_rows, whole_columns, weight_shard, weight_.value);
  if (reduced()) {
    weight_reduced_ = tensor::with_element_type(operand_dtype(), [&](auto type) {
      return tensor::Tensor(tensor::uninitialized_matrix<decltype(type)>(
          "kpipe::model::" + name + ".weight." + std::string(kernels::name_of(precision_)), rows, columns));
    });
    weights_changed();
  }
}

template <class Scalar>
void Linear<Scalar>::weights_changed() {
  if (packed_) packed_->invalidate();
  if constexpr (std::is_same_v<Scalar, float>) {
    if (!reduced()) return;
    kernels::with_reduced_type(operand_dtype(), "a Linear's weight", [&](auto type) {
      kernels::round_to(env_.exec.space(), weight_.value, weight_reduced_.matrix<decltype(type)>());
    });
  }
}

template <class Scalar>
std::vector<TensorDecl> Linear<Scalar>::saved(int rows) const {
  return {{"x", TensorSpec({rows, input_dim()}, operand_dtype())}};
}

template <class Scalar>
tensor::Tensor Linear<Scalar>::gathered_rows(const tensor::Tensor& local, const char* label) const {
  const auto rows = static_cast<int>(local.spec().extent(0)), columns = static_cast<int>(local.spec().extent(1));
  const tensor::Tensor whole = env_.exec.pool().take(label, local.spec().dtype(), ranks_ * rows, columns);
  env_.collectives.all_gather(Group::tensor, local, whole);
  return whole;
}

template <class Scalar>
tensor::Tensor Linear<Scalar>::operand(const tensor::Tensor& x, const char* label) const {
  return kernels::rounded(env_.exec, x, operand_dtype(), label);
}

template <class Scalar>
tensor::Tensor Linear<Scalar>::weight_operand() const {
  return reduced() ? weight_reduced_ : tensor::Tensor(weight_.value);
}

template <class Scalar>
void Linear<Scalar>::multiply(Trans trans_a, Trans trans_b, const tensor::Tensor& A, const tensor::Tensor& B,
                              Scalar beta, const tensor::Matrix<Scalar>& C,
                              const kernels::ColumnEpilogue<Scalar>& then) const {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (reduced()) {
      kernels::with_reduced_type(operand_dtype(), "a Linear's operands", [&](auto type) {
        using T = decltype(type);
        kernels::gemm_mixed(env_.exec.space(), trans_a, trans_b, 1, A.matrix<T>(), B.matrix<T>(), beta, C, gemm_);
      });
      kernels::apply_epilogue(env_.exec.space(), then, C);
      return;
    }
  }
  kernels::gemm(env_.exec.space(), trans_a, trans_b, 1, A.matrix<Scalar>(), B.matrix<Scalar>(), beta, C, then, gemm_);
}

template <class Scalar>
void Linear<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const {
  const auto region = env_.exec.region("kpipe::model::linear::forward");
  if (row_wise()) {
    forward_begin(inputs, outputs, ctx);
    forward_rows(inputs, outputs, ctx, RowRange::all_of(inputs.at(0)), env_.exec.space());
    return;
  }
  const auto& space = env_.exec.space();
  const tensor::Tensor local = operand(inputs.at(0), "kpipe::model::linear::x_reduced");
  // Sequence parallelism: a column-parallel Linear multiplies the group's rows (its own saved, gathered again in W).
  const tensor::Tensor input = row_factor() > 1 ? gathered_rows(local, "kpipe::model::linear::gathered_x") : local;
  const auto Y = outputs.at(0).matrix<Scalar>();
  if (split_ == TensorSplit::row) {
    // Partial products of this rank's inputs, summed over the group (each
    // rank keeping its rows with sequence parallelism); the bias once, after the sum.
    if (row_divisor() > 1) {
      const auto partial = env_.exec.pool().take<Scalar>("kpipe::model::linear::partial",
                                                         static_cast<int>(input.spec().extent(0)), output_dim());
      multiply(Trans::no, Trans::no, input, weight_operand(), 0, partial);
      env_.collectives.reduce_scatter_sum(Group::tensor, partial, outputs.at(0));
    } else {
      multiply(Trans::no, Trans::no, input, weight_operand(), 0, Y);
      env_.collectives.all_reduce_sum(Group::tensor, outputs.at(0));
    }
    if (has_bias_) kernels::add_row(space, bias_.value, Y);
  } else if (gemm_ == kernels::GemmPath::packed && bf16()) {
    if constexpr (std::is_same_v<Scalar, float>) {
      packed_->linear_forward(space, input.matrix<tensor::BFloat16>(), weight_reduced_.matrix<tensor::BFloat16>(),
                              bias_.value, Y);
    }
  } else if (gemm_ == kernels::GemmPath::packed) {
    packed_->linear_forward(space, input.matrix<Scalar>(), weight_.value, bias_.value, Y);
  } else {
    kernels::ColumnEpilogue<Scalar> bias;
    if (has_bias_) bias.bias = bias_.value;
    multiply(Trans::no, transposed_ ? Trans::yes : Trans::no, input, weight_operand(), 0, Y, bias);
  }
  mask_padding(Y);
  if (ctx) ctx->save("x", local);
}

template <class Scalar>
void Linear<Scalar>::mask_padding(const tensor::Matrix<Scalar>& Y) const {
  if (!weight_.shard.padded()) return;
  // This rank's columns are [first, first + n) of the outputs; those from `valid` on are padding.
  const int n = output_dim(), first = weight_.shard.index * n;
  const int real = std::clamp(weight_.shard.valid - first, 0, n);
  if (real == n) return;
  Kokkos::deep_copy(env_.exec.space(), Kokkos::subview(Y, Kokkos::ALL, std::make_pair(real, n)),
                    std::numeric_limits<Scalar>::lowest());
}

template <class Scalar>
bool Linear<Scalar>::row_wise() const {
  return split_ == TensorSplit::none && !reduced() && gemm_ != kernels::GemmPath::packed && !weight_.shard.padded() &&
         kernels::gemm_on_calling_thread(gemm_);
}

template <class Scalar>
void Linear<Scalar>::forward_begin(tensor::TensorList inputs, tensor::TensorList, Context* ctx) const {
  if (ctx) ctx->save("x", inputs.at(0));
}

template <class Scalar>
void Linear<Scalar>::forward_rows(tensor::TensorList inputs, tensor::TensorList outputs, const Context*, RowRange rows,
                                  const tensor::ExecutionSpace& space) const {
  kernels::ColumnEpilogue<Scalar> bias;
  if (has_bias_) bias.bias = bias_.value;
  kernels::gemm(space, Trans::no, transposed_ ? Trans::yes : Trans::no, 1, rows.of(inputs.at(0).matrix<Scalar>()),
                weight_.value, 0, rows.of(outputs.at(0).matrix<Scalar>()), bias, gemm_);
}

template <class Scalar>
void Linear<Scalar>::backward_input_rows(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                         const Context&, RowRange rows, const tensor::ExecutionSpace& space) const {
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() == 0) return;
  kernels::gemm(space, Trans::no, transposed_ ? Trans::no : Trans::yes, 1, rows.of(output_grads.at(0).matrix<Scalar>()),
                weight_.value, 0, rows.of(dX), gemm_);
}

template <class Scalar>
void Linear<Scalar>::backward_input_end(tensor::TensorList output_grads, Context& ctx) const {
  ctx.save("dy", output_grads.at(0));
}

template <class Scalar>
void Linear<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                    Context& ctx) const {
  const auto region = env_.exec.region("kpipe::model::linear::backward_input");
  if (row_wise()) {
    backward_input_rows(output_grads, input_grads, ctx, RowRange::all_of(output_grads.at(0)), env_.exec.space());
    backward_input_end(output_grads, ctx);
    return;
  }
  const tensor::Tensor local = operand(output_grads.at(0), "kpipe::model::linear::dy_reduced");
  // Sequence parallelism: a row-parallel Linear's output gradient is this rank's rows; W needs the group's.
  const tensor::Tensor gradient = row_divisor() > 1 ? gathered_rows(local, "kpipe::model::linear::gathered_dy") : local;
  if (input_grads.at(0).matrix<Scalar>().size() != 0) {
    const int rows = static_cast<int>(gradient.spec().extent(0));
    // Column-parallel: each rank's outputs contribute to the whole input's
    // gradient, summed over the group (each rank keeping its rows with
    // sequence parallelism).
    const tensor::Tensor sum =
        row_factor() > 1
            ? tensor::Tensor(env_.exec.pool().take<Scalar>("kpipe::model::linear::partial_dx", rows, input_dim()))
            : input_grads.at(0);
    const auto dX = sum.matrix<Scalar>();
    if (gemm_ == kernels::GemmPath::packed && bf16()) {
      if constexpr (std::is_same_v<Scalar, float>) {
        packed_->input_gradient(env_.exec.space(), gradient.matrix<tensor::BFloat16>(),
                                weight_reduced_.matrix<tensor::BFloat16>(), dX);
      }
    } else if (gemm_ == kernels::GemmPath::packed) {
      packed_->input_gradient(env_.exec.space(), gradient.matrix<Scalar>(), weight_.value, dX);
    } else {
      multiply(Trans::no, transposed_ ? Trans::no : Trans::yes, gradient, weight_operand(), 0, dX);
    }
    if (row_factor() > 1) {
      env_.collectives.reduce_scatter_sum(Group::tensor, sum, input_grads.at(0));
    } else if (sums_input_gradient()) {
      env_.collectives.all_reduce_sum(Group::tensor, sum);
    }
  }
  ctx.save("dy", gradient);
}

template <class Scalar>
void Linear<Scalar>::backward_weight(Context& ctx) {
  const auto region = env_.exec.region("kpipe::model::linear::backward_weight");
  const tensor::Tensor input =
      row_factor() > 1 ? gathered_rows(ctx.saved("x"), "kpipe::model::linear::gathered_x") : ctx.saved("x");
  const tensor::Tensor& gradient = ctx.saved("dy");
  const auto& space = env_.exec.space();
  // beta = 1: the gradient buffer accumulates microbatches in the order W runs.
  // The bias gradient sums dY's columns, which are dW = X^T dY's: in float32
  // they run in the product's epilogue.
  const bool fused_bias = has_bias_ && !reduced() && !transposed_ && gemm_ != kernels::GemmPath::packed;
  kernels::ColumnEpilogue<Scalar> bias_sums;
  if (fused_bias) bias_sums = {{}, gradient.matrix<Scalar>(), bias_.grad};
  if (gemm_ == kernels::GemmPath::packed && !reduced()) {
    packed_->weight_gradient(space, input.matrix<Scalar>(), gradient.matrix<Scalar>(), weight_.grad);
  } else if (transposed_) {
    multiply(Trans::yes, Trans::no, gradient, input, 1, weight_.grad);
  } else {
    multiply(Trans::yes, Trans::no, input, gradient, 1, weight_.grad, bias_sums);
  }
  if (has_bias_ && !fused_bias) {
    if (!reduced()) {
      kernels::add_column_sums(space, gradient.matrix<Scalar>(), bias_.grad);
    } else if constexpr (std::is_same_v<Scalar, float>) {
      kernels::with_reduced_type(operand_dtype(), "a Linear's output gradient", [&](auto type) {
        kernels::add_column_sums(space, gradient.matrix<decltype(type)>(), bias_.grad);
      });
    }
  }
  ctx.clear();
}

template <class Scalar>
bool Linear<Scalar>::backward_weight_on_any_thread() const {
  // Gathered rows call a collective; reduced operands, the packed path and a
  // bias summed apart from the product (transposed weights) run kernels of
  // their own beside it.
  return row_factor() == 1 && !reduced() && !(has_bias_ && transposed_) && kernels::gemm_on_calling_thread(gemm_);
}

template void initialise<float>(const tensor::ExecutionSpace&, const WeightInit&, std::uint64_t,
                                const tensor::Matrix<float>&);
template void initialise<double>(const tensor::ExecutionSpace&, const WeightInit&, std::uint64_t,
                                 const tensor::Matrix<double>&);
template class Linear<float>;
template class Linear<double>;

}  // namespace kpipe::model
