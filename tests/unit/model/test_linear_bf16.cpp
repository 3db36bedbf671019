// compute.precision = bf16: a float32 Linear whose GEMMs take bfloat16
// operands, against finite differences in float64 of the exact layer
// Y = X W + b, within the bfloat16 bound: each product of rounded operands
// is within (2^-8 + 2^-18) |x||w| of the exact one and float32 sums add
// (k + 2) 2^-24 (test_gemm_bf16.cpp), so every output and gradient entry is
// within (2^-8 + 2^-18 + (k + 2) 2^-24) of the sum of its terms' magnitudes,
// k the length of its sum; finite differences of this linear function are
// exact but for float64 rounding (1e-9 covers it).
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "kpipe/model/collectives.hpp"
#include "kpipe/model/linear.hpp"

using namespace kpipe;
using namespace kpipe::model;
using kpipe::test::numeric_gradient;
using kpipe::test::random_matrix;

namespace {

double bound(int k) { return 0x1p-8 + 0x1p-18 + (k + 2) * 0x1p-24; }

tensor::Matrix<double> to_double(const tensor::Matrix<float>& X) {
  auto Y = tensor::uninitialized_matrix<double>("test::double", X.extent_int(0), X.extent_int(1));
  const auto values = tensor::to_host<float>(X);
  const std::vector<double> wide(values.begin(), values.end());
  Kokkos::deep_copy(Y, tensor::HostRows<double>(const_cast<double*>(wide.data()), Y.extent(0), Y.extent(1)));
  return Y;
}

// Entry e of `got` within bound(k) * scale[e] (+ 1e-9) of `truth`.
void check_within(const std::vector<float>& got, const std::vector<double>& truth, const std::vector<double>& scale,
                  int k) {
  REQUIRE(got.size() == truth.size());
  for (std::size_t e = 0; e < got.size(); ++e) {
    INFO("entry " << e << ": " << got[e] << " against " << truth[e]);
    CHECK(std::abs(got[e] - truth[e]) <= bound(k) * scale[e] + 1e-9);
  }
}

// sum over r of |a(r, i)| |b(r, j)| for a rows x n_a and b rows x n_b: the
// magnitude of entry (i, j) of a^T b.
std::vector<double> magnitudes(const std::vector<double>& a, const std::vector<double>& b, int rows, int n_a, int n_b) {
  std::vector<double> out(static_cast<std::size_t>(n_a) * n_b);
  for (int i = 0; i < n_a; ++i) {
    for (int j = 0; j < n_b; ++j) {
      for (int r = 0; r < rows; ++r) out[i * n_b + j] += std::abs(a[r * n_a + i]) * std::abs(b[r * n_b + j]);
    }
  }
  return out;
}

std::vector<double> transposed(const std::vector<double>& x, int rows, int cols) {
  std::vector<double> t(x.size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  }
  return t;
}

}  // namespace

TEST_CASE("a bf16 Linear matches float64 finite differences within the bfloat16 bound", "[model][gradients][bf16]") {
  constexpr int rows = 16, in = 96, out = 40;
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  const auto path = GENERATE(kernels::GemmPath::vendor, kernels::GemmPath::portable, kernels::GemmPath::packed);
  Linear<float> layer(in, out, "linear", kernels::stream_key(1, 2), WeightInit::of(config::InitKind::uniform, in, out),
                      KernelChoice{path, kernels::AttentionPath::gemm, config::Precision::bf16}, {exec, collectives});
  const auto W = layer.parameters()[0], b = layer.parameters()[1];
  kernels::fill_uniform(exec.space(), 99, -1, 1, b.value);
  layer.weights_changed();
  const auto X = random_matrix<float>(rows, in, 1, -2, 2);
  const auto R = random_matrix<float>(rows, out, 2);
  auto Y = tensor::uninitialized_matrix<float>("test::y", rows, out);
  auto dX = tensor::uninitialized_matrix<float>("test::dx", rows, in);

  Context ctx;
  layer.forward({X}, {Y}, &ctx);
  // What F saves is the bfloat16 copy, as declared: half of float32's bytes.
  CHECK(ctx.saved_specs() == layer.saved(rows));
  CHECK(ctx.bytes() == rows * in * sizeof(tensor::BFloat16));
  layer.backward_input({R}, {dX}, ctx);
  layer.backward_weight(ctx);
  CHECK(ctx.bytes() == 0);

  // The exact layer in float64, on float64 copies of the same values.
  const auto X64 = to_double(X), W64 = to_double(W.value), b64 = to_double(b.value), R64 = to_double(R);
  const auto objective = [&] {
    auto Y64 = tensor::uninitialized_matrix<double>("test::y64", rows, out);
    kernels::gemm(exec.space(), kernels::Trans::no, kernels::Trans::no, 1.0, X64, W64, 0.0, Y64);
    double sum = 0;
    const auto y = tensor::to_host<double>(Y64);
    const auto r = tensor::to_host<double>(R64);
    const auto bias = tensor::to_host<double>(b64);
    for (std::size_t e = 0; e < y.size(); ++e) sum += (y[e] + bias[e % out]) * r[e];
    return sum;
  };
  const auto x = tensor::to_host<double>(X64);
  const auto w = tensor::to_host<double>(W64);
  const auto r = tensor::to_host<double>(R64);
  {
    INFO("output");
    std::vector<double> exact(rows * out), scale(rows * out);
    const auto bias = tensor::to_host<double>(b64);
    const auto xt = transposed(x, rows, in);
    const auto magnitude = magnitudes(xt, w, in, rows, out);  // sum over i of |x(r, i)| |w(i, j)|
    for (int e = 0; e < rows * out; ++e) {
      for (int i = 0; i < in; ++i) exact[e] += x[e / out * in + i] * w[i * out + e % out];
      exact[e] += bias[e % out];
      scale[e] = magnitude[e] + std::abs(bias[e % out]);
    }
    check_within(tensor::to_host<float>(Y), exact, scale, in);
  }
  {
    INFO("input gradient dX = dY W^T");
    const auto wt = transposed(w, in, out);
    check_within(tensor::to_host<float>(dX), numeric_gradient(X64, objective),
                 magnitudes(transposed(r, rows, out), wt, out, rows, in), out);
  }
  {
    INFO("weight gradient dW = X^T dY");
    check_within(tensor::to_host<float>(W.grad), numeric_gradient(W64, objective), magnitudes(x, r, rows, in, out),
                 rows);
  }
  {
    INFO("bias gradient: column sums of the bfloat16 dY");
    std::vector<double> scale(out);
    for (int e = 0; e < rows * out; ++e) scale[e % out] += std::abs(r[e]);
    check_within(tensor::to_host<float>(b.grad), numeric_gradient(b64, objective), scale, rows);
  }
}

TEST_CASE("a bf16 Linear follows its float32 master weights only through weights_changed", "[model][bf16]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  Linear<float> layer(8, 4, "linear", kernels::stream_key(3, 4), WeightInit::of(config::InitKind::uniform, 8, 4),
                      KernelChoice{kernels::GemmPath::vendor, kernels::AttentionPath::gemm, config::Precision::bf16},
                      {exec, collectives});
  const auto X = random_matrix<float>(2, 8, 5);
  auto before = tensor::uninitialized_matrix<float>("test::y", 2, 4);
  auto after = tensor::uninitialized_matrix<float>("test::y", 2, 4);
  layer.forward({X}, {before}, nullptr);
  Kokkos::deep_copy(layer.parameters()[0].value, 0.5f);
  layer.forward({X}, {after}, nullptr);
  CHECK(tensor::to_host<float>(after) == tensor::to_host<float>(before));  // the bfloat16 copy is stale
  layer.weights_changed();
  layer.forward({X}, {after}, nullptr);
  // Every weight 0.5 (exact in bfloat16), bias 0: y = 0.5 · (sum of the row's rounded x).
  const auto y = tensor::to_host<float>(after);
  CHECK(y != tensor::to_host<float>(before));
  CHECK(y[0] == y[1]);
}
