// Rotary QKV against the rotate-half formula and the repeat of each key and
// value head over its group (Hugging Face's apply_rotary_pos_emb and
// repeat_kv), and SwiGLU against silu(a)·b; both gradients against finite
// differences in the model tests (test_layer_gradients.cpp).
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/kernels/rotary.hpp"
#include "kpipe/kernels/swiglu.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

namespace {

Matrix<double> random_matrix(int rows, int cols, std::uint64_t stream) {
  auto m = uninitialized_matrix<double>("test::x", rows, cols);
  fill_uniform(ExecutionSpace(), stream_key(9, stream), -1.0, 1.0, m);
  return m;
}

}  // namespace

TEST_CASE("rotary QKV rotates queries and keys by position and repeats each key and value head over its group",
          "[kernels][rotary]") {
  const RotaryShape shape{3, 2, 3, 4};  // T = 3, 2 KV heads of 3 query heads each, hd = 4
  const int rows = 2 * shape.tokens, hd = shape.head_dim, half = hd / 2, heads = shape.heads();
  const double theta = 500.0;
  const auto X = random_matrix(rows, shape.grouped_width(), 1);
  auto cos = uninitialized_matrix<double>("test::cos", shape.tokens, half);
  auto sin = uninitialized_matrix<double>("test::sin", shape.tokens, half);
  rotary_tables(ExecutionSpace(), hd, theta, cos, sin);
  auto Y = uninitialized_matrix<double>("test::y", rows, shape.output_width());
  rotary_qkv_forward(ExecutionSpace(), shape, X, cos, sin, {}, Y);
  const auto x = to_host<double>(X), y = to_host<double>(Y);
  const int in_cols = shape.grouped_width(), out_cols = shape.output_width();
  // The head starting at column `from` of row r, rotated as at position p.
  const auto rotated = [&](int r, int from, int p, int i) {
    const double angle = p / std::pow(theta, 2.0 * (i % half) / hd);
    const double a = x[r * in_cols + from + i], partner = x[r * in_cols + from + (i + half) % hd];
    return i < half ? a * std::cos(angle) - partner * std::sin(angle) : a * std::cos(angle) + partner * std::sin(angle);
  };
  for (int r = 0; r < rows; ++r) {
    const int p = r % shape.tokens;  // positions restart with each sequence
    for (int q = 0; q < heads; ++q) {
      const int g = q / shape.per_group, block = g * (shape.per_group + 2) * hd;
      for (int i = 0; i < hd; ++i) {
        INFO("row " << r << ", head " << q << ", feature " << i);
        CHECK(y[r * out_cols + q * hd + i] == Approx(rotated(r, block + (q % shape.per_group) * hd, p, i)));
        CHECK(y[r * out_cols + (heads + q) * hd + i] == Approx(rotated(r, block + shape.per_group * hd, p, i)));
        CHECK(y[r * out_cols + (2 * heads + q) * hd + i] == x[r * in_cols + block + (shape.per_group + 1) * hd + i]);
      }
    }
  }
}

TEST_CASE("rotary QKV in serving rotates each token by the position it is given", "[kernels][rotary]") {
  const RotaryShape shape{8, 1, 2, 6};
  const auto X = random_matrix(2, shape.grouped_width(), 2);
  auto cos = uninitialized_matrix<double>("test::cos", shape.tokens, 3);
  auto sin = uninitialized_matrix<double>("test::sin", shape.tokens, 3);
  rotary_tables(ExecutionSpace(), shape.head_dim, 10000.0, cos, sin);
  // Rows 0 and 1 at positions 5 and 7 give what rows 5 and 7 of sequences of 8 give.
  Kokkos::View<int*, MemorySpace> positions("test::positions", 2);
  auto host = Kokkos::create_mirror_view(positions);
  host(0) = 5;
  host(1) = 7;
  Kokkos::deep_copy(positions, host);
  auto Y = uninitialized_matrix<double>("test::y", 2, shape.output_width());
  rotary_qkv_forward(ExecutionSpace(), shape, X, cos, sin, positions, Y);
  auto X8 = zero_matrix<double>("test::x8", 8, shape.grouped_width());
  Kokkos::deep_copy(Kokkos::subview(X8, std::make_pair(5, 6), Kokkos::ALL),
                    Kokkos::subview(X, std::make_pair(0, 1), Kokkos::ALL));
  Kokkos::deep_copy(Kokkos::subview(X8, std::make_pair(7, 8), Kokkos::ALL),
                    Kokkos::subview(X, std::make_pair(1, 2), Kokkos::ALL));
  auto Y8 = uninitialized_matrix<double>("test::y8", 8, shape.output_width());
  rotary_qkv_forward(ExecutionSpace(), shape, X8, cos, sin, {}, Y8);
  const auto y = to_host<double>(Y), y8 = to_host<double>(Y8);
  const int cols = shape.output_width();
  for (int c = 0; c < cols; ++c) {
    CHECK(y[c] == y8[5 * cols + c]);
    CHECK(y[cols + c] == y8[7 * cols + c]);
  }
}

// Packed documents: rows at given places, backward the adjoint of forward
// (the rotation is orthogonal and the repeats' gradient their sum), so
// <forward(X), dY> = <X, backward(dY)> at the same places.
TEST_CASE("rotary QKV backward at given positions is forward's adjoint", "[kernels][rotary][documents]") {
  const RotaryShape shape{6, 2, 2, 4};
  const int rows = 2 * shape.tokens;
  const auto X = random_matrix(rows, shape.grouped_width(), 6);
  const auto dY = random_matrix(rows, shape.output_width(), 7);
  auto cos = uninitialized_matrix<double>("test::cos", shape.tokens, shape.head_dim / 2);
  auto sin = uninitialized_matrix<double>("test::sin", shape.tokens, shape.head_dim / 2);
  rotary_tables(ExecutionSpace(), shape.head_dim, 10000.0, cos, sin);
  const std::vector<int> places = {0, 1, 2, 0, 1, 0, 0, 1, 2, 3, 4, 5};
  Kokkos::View<int*, MemorySpace> positions("test::positions", rows);
  Kokkos::deep_copy(positions, Kokkos::View<const int*, Kokkos::HostSpace>(places.data(), places.size()));
  auto Y = uninitialized_matrix<double>("test::y", rows, shape.output_width());
  auto dX = uninitialized_matrix<double>("test::dx", rows, shape.grouped_width());
  rotary_qkv_forward(ExecutionSpace(), shape, X, cos, sin, positions, Y);
  rotary_qkv_backward(ExecutionSpace(), shape, dY, cos, sin, positions, dX);
  const auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
    return sum;
  };
  const double forward = dot(to_host<double>(Y), to_host<double>(dY));
  CHECK(std::abs(forward - dot(to_host<double>(X), to_host<double>(dX))) < 1e-12 * std::abs(forward));
  // And not the adjoint at the sequence's own positions, which rotate rows 3 onwards differently.
  rotary_qkv_backward(ExecutionSpace(), shape, dY, cos, sin, {}, dX);
  CHECK(std::abs(forward - dot(to_host<double>(X), to_host<double>(dX))) > 1e-6 * std::abs(forward));
}

// Ranks sharing key/value heads (t > kv_heads) each take a range of query
// heads: the whole output's heads, and input gradients that add up to the
// whole one's.
TEST_CASE("rotary QKV over a range of query heads is that part of the whole", "[kernels][rotary]") {
  const RotaryShape whole{3, 2, 3, 4};
  const int rows = 2 * whole.tokens, hd = whole.head_dim, heads = whole.heads();
  const auto X = random_matrix(rows, whole.grouped_width(), 4);
  const auto dY = random_matrix(rows, whole.output_width(), 5);
  auto cos = uninitialized_matrix<double>("test::cos", whole.tokens, hd / 2);
  auto sin = uninitialized_matrix<double>("test::sin", whole.tokens, hd / 2);
  rotary_tables(ExecutionSpace(), hd, 10000.0, cos, sin);
  auto Y = uninitialized_matrix<double>("test::y", rows, whole.output_width());
  rotary_qkv_forward(ExecutionSpace(), whole, X, cos, sin, {}, Y);
  auto dX = uninitialized_matrix<double>("test::dx", rows, whole.grouped_width());
  rotary_qkv_backward(ExecutionSpace(), whole, dY, cos, sin, {}, dX);
  const auto y = to_host<double>(Y), dy = to_host<double>(dY), dx = to_host<double>(dX);
  std::vector<double> dx_sum(dx.size(), 0.0);
  // Three ranks of 2 query heads; the second's span both groups.
  for (int first : {0, 2, 4}) {
    RotaryShape part = whole;
    part.first_query = first;
    part.queries = 2;
    const int cols = part.output_width();
    auto Y_part = uninitialized_matrix<double>("test::y_part", rows, cols);
    rotary_qkv_forward(ExecutionSpace(), part, X, cos, sin, {}, Y_part);
    const auto y_part = to_host<double>(Y_part);
    // The part's output gradient: the whole one's columns of its heads.
    std::vector<double> dy_part(static_cast<std::size_t>(rows) * cols);
    for (int r = 0; r < rows; ++r) {
      for (int block = 0; block < 3; ++block) {  // Q, K, V
        for (int q = 0; q < 2; ++q) {
          for (int i = 0; i < hd; ++i) {
            const int to = r * cols + (block * 2 + q) * hd + i;
            const int from = r * whole.output_width() + (block * heads + first + q) * hd + i;
            INFO("first " << first << ", row " << r << ", block " << block << ", head " << q);
            CHECK(y_part[to] == y[from]);
            dy_part[to] = dy[from];
          }
        }
      }
    }
    auto dY_part = uninitialized_matrix<double>("test::dy_part", rows, cols);
    from_host<double>(dy_part, dY_part);
    auto dX_part = uninitialized_matrix<double>("test::dx_part", rows, whole.grouped_width());
    rotary_qkv_backward(ExecutionSpace(), part, dY_part, cos, sin, {}, dX_part);
    const auto dx_part = to_host<double>(dX_part);
    for (std::size_t i = 0; i < dx_sum.size(); ++i) dx_sum[i] += dx_part[i];
  }
  for (std::size_t i = 0; i < dx.size(); ++i) {
    INFO("input gradient entry " << i);
    CHECK(dx_sum[i] == Approx(dx[i]).epsilon(1e-14).margin(1e-15));
  }
}

TEST_CASE("SwiGLU is silu of the gate half times the up half", "[kernels][swiglu]") {
  const int rows = 3, n = 37;
  const auto X = random_matrix(rows, 2 * n, 3);
  auto Y = uninitialized_matrix<double>("test::y", rows, n);
  swiglu_forward(ExecutionSpace(), X, Y);
  const auto x = to_host<double>(X), y = to_host<double>(Y);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < n; ++j) {
      const double a = x[r * 2 * n + j], b = x[r * 2 * n + n + j];
      CHECK(y[r * n + j] == Approx(a / (1 + std::exp(-a)) * b).epsilon(1e-14));
    }
  }
}
