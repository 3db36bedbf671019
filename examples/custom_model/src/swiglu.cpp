#include "swiglu.hpp"

#include "kpipe/kernels/precision.hpp"
#include "kpipe/model/layers/layer_norm_layer.hpp"
#include "kpipe/model/layers/linear.hpp"
#include "kpipe/model/layers/residual.hpp"
#include "kpipe/model/layers/sequential.hpp"
#include "kpipe/tensor/compat.hpp"

namespace custom {

using kpipe::model::FootprintBuilder;
using kpipe::model::FootprintQuery;
using kpipe::model::Layer;
using kpipe::model::LayerBuild;
using kpipe::model::LayerSpec;
using kpipe::model::ModelSpec;
using kpipe::model::TensorSplit;

namespace {

template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar sigmoid(Scalar a) {
  return Scalar(1) / (Scalar(1) + kpipe::tensor::compat::math::exp(-a));
}

// model.swiglu_hidden: a key of the swiglu_mlp family (swiglu_family.hpp); a
// deck of another family that names this block is told so in one line.
int hidden_width(const ModelSpec& model, const LayerSpec&) {
  return static_cast<int>(model.integer("model.swiglu_hidden"));
}

}  // namespace

template <class Scalar>
std::vector<kpipe::model::TensorDecl> SwiGLU<Scalar>::saved(int rows) const {
  // compute.precision = bf16 or fp16: kept in that type, as the built-in layers keep theirs.
  return {{"x", kpipe::tensor::TensorSpec({rows, 2 * width_}, kpipe::kernels::stored_dtype<Scalar>(env_.precision))}};
}

template <class Scalar>
void SwiGLU<Scalar>::forward(kpipe::tensor::TensorList inputs, kpipe::tensor::TensorList outputs,
                             kpipe::model::Context* ctx) const {
  const auto region = env_.exec.region("custom::swiglu::forward");
  const auto X = inputs.at(0).matrix<Scalar>();
  const auto Y = outputs.at(0).matrix<Scalar>();
  const int n = width_;
  Kokkos::parallel_for(
      "custom::swiglu::forward", Kokkos::RangePolicy<kpipe::tensor::ExecutionSpace>(env_.exec.space(), 0, Y.size()),
      KOKKOS_LAMBDA(int i) {
        const int r = i / n, c = i % n;
        const Scalar a = X(r, c);
        Y(r, c) = a * sigmoid(a) * X(r, n + c);
      });
  if (ctx) {
    ctx->save("x",
              kpipe::kernels::rounded(env_.exec, inputs.at(0), kpipe::kernels::stored_dtype<Scalar>(env_.precision),
                                      "custom::swiglu::x_stored"));
  }
}

// d/dA = dY ⊙ B ⊙ silu'(A), silu'(a) = s + a·s·(1 - s); d/dB = dY ⊙ silu(A).
template <class Scalar>
void SwiGLU<Scalar>::backward_input(kpipe::tensor::TensorList output_grads, kpipe::tensor::TensorList input_grads,
                                    kpipe::model::Context& ctx) const {
  const auto region = env_.exec.region("custom::swiglu::backward_input");
  const auto dX = input_grads.at(0).matrix<Scalar>();
  if (dX.size() != 0) {
    const auto X = kpipe::kernels::widened(env_.exec, ctx.saved("x"), "custom::swiglu::x_widened").matrix<Scalar>();
    const auto dY = output_grads.at(0).matrix<Scalar>();
    const int n = width_;
    Kokkos::parallel_for(
        "custom::swiglu::backward_input",
        Kokkos::RangePolicy<kpipe::tensor::ExecutionSpace>(env_.exec.space(), 0, dY.size()), KOKKOS_LAMBDA(int i) {
          const int r = i / n, c = i % n;
          const Scalar a = X(r, c), b = X(r, n + c), s = sigmoid(a);
          dX(r, c) = dY(r, c) * b * (s + a * s * (Scalar(1) - s));
          dX(r, n + c) = dY(r, c) * a * s;
        });
  }
  ctx.clear();
}

template class SwiGLU<float>;
template class SwiGLU<double>;

namespace {

template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_block(const LayerBuild& build) {
  using namespace kpipe::model;
  const int width = build.spec.input_dim, hidden = hidden_width(build.model, build.spec);
  const std::string name = build.name();
  std::vector<std::unique_ptr<Layer<Scalar>>> branch;
  branch.push_back(std::make_unique<LayerNorm<Scalar>>(width, name + ".norm", build.env));
  // W1 | W3 as one column-parallel projection of two blocks: this rank's h/t gate and up columns.
  auto gate_up =
      std::make_unique<Linear<Scalar>>(width, 2 * hidden, name + ".gate_up", build.weight_stream(0),
                                       build.init(width, hidden), build.kernels, build.env, TensorSplit::column, 2);
  const int columns = gate_up->output_dim() / 2;
  branch.push_back(std::move(gate_up));
  branch.push_back(std::make_unique<SwiGLU<Scalar>>(columns, build.env));
  branch.push_back(std::make_unique<Linear<Scalar>>(hidden, width, name + ".down", build.weight_stream(1),
                                                    build.init(hidden, width), build.kernels, build.env,
                                                    TensorSplit::row));
  return std::make_unique<Residual<Scalar>>(std::make_unique<Sequential<Scalar>>(std::move(branch), build.env),
                                            build.env);
}

}  // namespace

kpipe::model::LayerKind swiglu_block_kind() {
  kpipe::model::LayerKind kind;
  kind.name = "swiglu_block";
  kind.footprint = [](const ModelSpec& model, const LayerSpec& spec, const FootprintQuery& query) {
    const std::int64_t width = spec.input_dim, hidden = hidden_width(model, spec);
    FootprintBuilder f(query, query.rows);
    return f.layer_norm(width)
        .linear(width, 2 * hidden, TensorSplit::column)
        .elementwise(f.rows(), 2 * hidden / f.ranks())  // SwiGLU saves its input, both halves
        .linear(hidden, width, TensorSplit::row)
        .footprint();
  };
  kpipe::model::set_factories(kind,
                              [](auto scalar, const LayerBuild& build) { return make_block<decltype(scalar)>(build); });
  return kind;
}

}  // namespace custom
