// compute.precision = bf16 and fp16: a float32 Linear whose GEMMs take
// bfloat16 or float16 operands, against finite differences in float64 of the
// exact layer Y = X W + b, within the bound of the type: each product of
// rounded operands is within (2r + r^2) |x||w| of the exact one (r = 2^-9 for
// bfloat16, 2^-11 for float16) and float32 sums add (k + 2) 2^-24
// (test_gemm_mixed.cpp), so every output and gradient entry is within
// (2r + r^2 + (k + 2) 2^-24) of the sum of its terms' magnitudes, k the length
// of its sum. float16 adds an absolute term: below 2^-14 its spacing is
// 2^-24, so an operand rounded there moves by up to 2^-25 absolutely, at most
// 2^-25 times the other operand (|x| <= 2 here) per product. Finite
// differences of this linear function are exact but for float64 rounding
// (1e-9 covers it).
#include <cmath>
#include <type_traits>
#include <vector>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "input_error.hpp"
#include "kpipe/model/collectives.hpp"
#include "kpipe/model/layers/linear.hpp"

using namespace kpipe;
using namespace kpipe::model;
using kpipe::test::numeric_gradient;
using kpipe::test::random_matrix;

namespace {

template <class Reduced>
constexpr bool is_half = std::is_same_v<Reduced, tensor::Half>;

template <class Reduced>
double bound(int k) {
  constexpr double r = is_half<Reduced> ? 0x1p-11 : 0x1p-9;
  return 2 * r + r * r + (k + 2) * 0x1p-24;
}

tensor::Matrix<double> to_double(const tensor::Matrix<float>& X) {
  auto Y = tensor::uninitialized_matrix<double>("test::double", X.extent_int(0), X.extent_int(1));
  const auto values = tensor::to_host<float>(X);
  const std::vector<double> wide(values.begin(), values.end());
  Kokkos::deep_copy(Y, tensor::HostRows<double>(const_cast<double*>(wide.data()), Y.extent(0), Y.extent(1)));
  return Y;
}

// Entry e of `got` within bound(k) * scale[e] (+ float16's subnormal term
// and 1e-9) of `truth`.
template <class Reduced>
void check_within(const std::vector<float>& got, const std::vector<double>& truth, const std::vector<double>& scale,
                  int k) {
  const double absolute = (is_half<Reduced> ? k * 0x1p-24 : 0) + 1e-9;
  REQUIRE(got.size() == truth.size());
  for (std::size_t e = 0; e < got.size(); ++e) {
    INFO("entry " << e << ": " << got[e] << " against " << truth[e]);
    CHECK(std::abs(got[e] - truth[e]) <= bound<Reduced>(k) * scale[e] + absolute);
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

TEMPLATE_TEST_CASE("a reduced-precision Linear matches float64 finite differences within the bound of its type",
                   "[model][gradients][bf16][fp16]", tensor::BFloat16, tensor::Half) {
  constexpr int rows = 16, in = 96, out = 40;
  constexpr auto precision = is_half<TestType> ? kernels::Precision::fp16 : kernels::Precision::bf16;
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  // No backend packs float16: fp16 runs the vendor and portable paths.
  const auto path = GENERATE(kernels::GemmPath::vendor, kernels::GemmPath::portable, kernels::GemmPath::packed);
  if (is_half<TestType> && path == kernels::GemmPath::packed) return;
  Linear<float> layer(in, out, "linear", kernels::stream_key(1, 2), WeightInit::of(config::InitKind::uniform, in, out),
                      KernelChoice{path, kernels::AttentionPath::gemm, precision}, {exec, collectives});
  const auto W = layer.parameters()[0], b = layer.parameters()[1];
  kernels::fill_uniform(exec.space(), 99, -1, 1, b.value);
  layer.weights_changed();
  const auto X = random_matrix<float>(rows, in, 1, -2, 2);
  const auto R = random_matrix<float>(rows, out, 2);
  auto Y = tensor::uninitialized_matrix<float>("test::y", rows, out);
  auto dX = tensor::uninitialized_matrix<float>("test::dx", rows, in);

  Context ctx;
  layer.forward({X}, {Y}, &ctx);
  // What F saves is the rounded copy, as declared: half of float32's bytes.
  CHECK(ctx.saved_specs() == layer.saved(rows));
  CHECK(ctx.bytes() == rows * in * sizeof(TestType));
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
    check_within<TestType>(tensor::to_host<float>(Y), exact, scale, in);
  }
  {
    INFO("input gradient dX = dY W^T");
    const auto wt = transposed(w, in, out);
    check_within<TestType>(tensor::to_host<float>(dX), numeric_gradient(X64, objective),
                           magnitudes(transposed(r, rows, out), wt, out, rows, in), out);
  }
  {
    INFO("weight gradient dW = X^T dY");
    check_within<TestType>(tensor::to_host<float>(W.grad), numeric_gradient(W64, objective),
                           magnitudes(x, r, rows, in, out), rows);
  }
  {
    INFO("bias gradient: column sums of the rounded dY");
    std::vector<double> scale(out);
    for (int e = 0; e < rows * out; ++e) scale[e % out] += std::abs(r[e]);
    check_within<TestType>(tensor::to_host<float>(b.grad), numeric_gradient(b64, objective), scale, rows);
  }
}

TEMPLATE_TEST_CASE("a reduced-precision Linear follows its float32 master weights only through weights_changed",
                   "[model][bf16][fp16]", tensor::BFloat16, tensor::Half) {
  constexpr auto precision = is_half<TestType> ? kernels::Precision::fp16 : kernels::Precision::bf16;
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  Linear<float> layer(8, 4, "linear", kernels::stream_key(3, 4), WeightInit::of(config::InitKind::uniform, 8, 4),
                      KernelChoice{kernels::GemmPath::vendor, kernels::AttentionPath::gemm, precision},
                      {exec, collectives});
  const auto X = random_matrix<float>(2, 8, 5);
  auto before = tensor::uninitialized_matrix<float>("test::y", 2, 4);
  auto after = tensor::uninitialized_matrix<float>("test::y", 2, 4);
  layer.forward({X}, {before}, nullptr);
  Kokkos::deep_copy(layer.parameters()[0].value, 0.5f);
  layer.forward({X}, {after}, nullptr);
  CHECK(tensor::to_host<float>(after) == tensor::to_host<float>(before));  // the rounded copy is stale
  layer.weights_changed();
  layer.forward({X}, {after}, nullptr);
  // Every weight 0.5 (exact in both types), bias 0: y = 0.5 · (sum of the row's rounded x).
  const auto y = tensor::to_host<float>(after);
  CHECK(y != tensor::to_host<float>(before));
  CHECK(y[0] == y[1]);
}

TEST_CASE("an fp16 Linear refuses the packed path, which packs no float16", "[model][fp16]") {
  tensor::ExecContext exec;
  SerialCollectives collectives(exec);
  const std::string message = kpipe::test::input_error_of([&] {
    Linear<float> layer(8, 4, "linear", kernels::stream_key(3, 4), WeightInit::of(config::InitKind::uniform, 8, 4),
                        KernelChoice{kernels::GemmPath::packed, kernels::AttentionPath::gemm, kernels::Precision::fp16},
                        {exec, collectives});
  });
  CHECK(message.find("no packed backend packs float16 weights") != std::string::npos);
}
