// compute.gemm = "packed": the packed weight's products by W (X W + bias) and
// by Wᵀ (dY Wᵀ), and its weight gradient (dW += Xᵀ dY), against the vendor
// GEMM, their determinism, and that invalidate() makes the products follow a
// changed W.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "random_matrix.hpp"
#include "relative_error.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;
using kpipe::test::relative_error;

namespace {

template <class Scalar>
bool bitwise_equal(const std::vector<Scalar>& a, const std::vector<Scalar>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Scalar)) == 0;
}

// X W + bias by the vendor GEMM and the bias kernel: what a Linear does without packing.
template <class Scalar>
std::vector<Scalar> vendor_linear(const Matrix<Scalar>& X, const Matrix<Scalar>& W, const Matrix<Scalar>& bias) {
  auto Y = uninitialized_matrix<Scalar>("test::vendor", static_cast<int>(X.extent(0)), static_cast<int>(W.extent(1)));
  gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0, X, W, 0.0, Y, GemmPath::vendor);
  add_row(ExecutionSpace(), bias, Y);
  return to_host<Scalar>(Y);
}

// X W + bias through `packed`, into a NaN-filled Y (beta = 0 must not read it).
template <class Scalar>
std::vector<Scalar> packed_linear(const PackedWeight<Scalar>& packed, const Matrix<Scalar>& X, const Matrix<Scalar>& W,
                                  const Matrix<Scalar>& bias) {
  auto Y = uninitialized_matrix<Scalar>("test::packed", static_cast<int>(X.extent(0)), static_cast<int>(W.extent(1)));
  Kokkos::deep_copy(Y, std::numeric_limits<Scalar>::quiet_NaN());
  packed.linear_forward(ExecutionSpace(), X, W, bias, Y);
  return to_host<Scalar>(Y);
}

// dY W^T by the vendor GEMM: a Linear's input gradient without packing.
template <class Scalar>
std::vector<Scalar> vendor_input_gradient(const Matrix<Scalar>& dY, const Matrix<Scalar>& W) {
  auto dX = uninitialized_matrix<Scalar>("test::vendor", static_cast<int>(dY.extent(0)), static_cast<int>(W.extent(0)));
  gemm(ExecutionSpace(), Trans::no, Trans::yes, 1.0, dY, W, 0.0, dX, GemmPath::vendor);
  return to_host<Scalar>(dX);
}

// dY W^T through `packed`, into a NaN-filled dX.
template <class Scalar>
std::vector<Scalar> packed_input_gradient(const PackedWeight<Scalar>& packed, const Matrix<Scalar>& dY,
                                          const Matrix<Scalar>& W) {
  auto dX = uninitialized_matrix<Scalar>("test::packed", static_cast<int>(dY.extent(0)), static_cast<int>(W.extent(0)));
  Kokkos::deep_copy(dX, std::numeric_limits<Scalar>::quiet_NaN());
  packed.input_gradient(ExecutionSpace(), dY, W, dX);
  return to_host<Scalar>(dX);
}

// dW0 + X^T dY by the vendor GEMM: a Linear's weight gradient without packing.
template <class Scalar>
std::vector<Scalar> vendor_weight_gradient(const Matrix<Scalar>& X, const Matrix<Scalar>& dY,
                                           const Matrix<Scalar>& dW0) {
  auto dW =
      uninitialized_matrix<Scalar>("test::vendor", static_cast<int>(dW0.extent(0)), static_cast<int>(dW0.extent(1)));
  Kokkos::deep_copy(dW, dW0);
  gemm(ExecutionSpace(), Trans::yes, Trans::no, 1.0, X, dY, 1.0, dW, GemmPath::vendor);
  return to_host<Scalar>(dW);
}

// dW0 + X^T dY through `packed`.
template <class Scalar>
std::vector<Scalar> packed_weight_gradient(const PackedWeight<Scalar>& packed, const Matrix<Scalar>& X,
                                           const Matrix<Scalar>& dY, const Matrix<Scalar>& dW0) {
  auto dW =
      uninitialized_matrix<Scalar>("test::packed", static_cast<int>(dW0.extent(0)), static_cast<int>(dW0.extent(1)));
  Kokkos::deep_copy(dW, dW0);
  packed.weight_gradient(ExecutionSpace(), X, dY, dW);
  return to_host<Scalar>(dW);
}

}  // namespace

TEMPLATE_TEST_CASE("the packed linear agrees with the vendor GEMM plus bias, bitwise the same on every call",
                   "[kernels][gemm][packed]", float, double) {
  using Scalar = TestType;
  const auto [m, k, n] = GENERATE(std::tuple{32, 1024, 1024}, std::tuple{1, 1, 1}, std::tuple{17, 33, 65},
                                  std::tuple{255, 257, 129}, std::tuple{7, 100, 3});
  INFO("X " << m << "x" << k << ", W " << k << "x" << n << ", packed: " << packed_gemm_library());
  const auto X = random_matrix<Scalar>(m, k, 1);
  const auto W = random_matrix<Scalar>(k, n, 2);
  const auto bias = random_matrix<Scalar>(1, n, 3);
  const PackedWeight<Scalar> packed;

  const auto first = packed_linear(packed, X, W, bias);
  CHECK(std::all_of(first.begin(), first.end(), [](Scalar x) { return std::isfinite(x); }));
  CHECK(relative_error(first, vendor_linear(X, W, bias)) < 1e-5);
  // The second call reuses the packed copy; a fresh one packs again: all equal.
  CHECK(bitwise_equal(first, packed_linear(packed, X, W, bias)));
  CHECK(bitwise_equal(first, packed_linear(PackedWeight<Scalar>(), X, W, bias)));
}

TEMPLATE_TEST_CASE("the packed input gradient agrees with the vendor dY W^T, bitwise the same on every call",
                   "[kernels][gemm][packed]", float, double) {
  using Scalar = TestType;
  // Square weights too: W and W^T then have the same shape and may get the
  // same layout, but each product must use its own copy.
  const auto [m, k, n] = GENERATE(std::tuple{32, 1024, 1024}, std::tuple{512, 128, 384}, std::tuple{512, 512, 128},
                                  std::tuple{512, 128, 63}, std::tuple{1, 1, 1}, std::tuple{17, 33, 65},
                                  std::tuple{7, 100, 3}, std::tuple{40, 96, 96});
  INFO("dY " << m << "x" << n << ", W " << k << "x" << n << ", packed: " << packed_gemm_library());
  const auto X = random_matrix<Scalar>(m, k, 1);
  const auto W = random_matrix<Scalar>(k, n, 2);
  const auto bias = random_matrix<Scalar>(1, n, 3);
  const auto dY = random_matrix<Scalar>(m, n, 4);
  const PackedWeight<Scalar> packed;

  // As a Linear does: forward, input gradient, and the next microbatch's forward.
  const auto Y = packed_linear(packed, X, W, bias);
  const auto first = packed_input_gradient(packed, dY, W);
  CHECK(std::all_of(first.begin(), first.end(), [](Scalar x) { return std::isfinite(x); }));
  CHECK(relative_error(first, vendor_input_gradient(dY, W)) < 1e-5);
  CHECK(bitwise_equal(Y, packed_linear(packed, X, W, bias)));
  CHECK(bitwise_equal(first, packed_input_gradient(packed, dY, W)));
  CHECK(bitwise_equal(first, packed_input_gradient(PackedWeight<Scalar>(), dY, W)));
}

TEMPLATE_TEST_CASE("the packed weight gradient accumulates X^T dY like the vendor GEMM, bitwise the same on every call",
                   "[kernels][gemm][packed]", float, double) {
  using Scalar = TestType;
  // The transformer's and the MLP's shapes, odd ones, and a microbatch of no rows.
  const auto [m, k, n] = GENERATE(std::tuple{32, 1024, 1024}, std::tuple{512, 128, 384}, std::tuple{512, 512, 128},
                                  std::tuple{512, 128, 63}, std::tuple{1, 1, 1}, std::tuple{17, 33, 65},
                                  std::tuple{7, 100, 3}, std::tuple{0, 5, 4});
  INFO("X " << m << "x" << k << ", dY " << m << "x" << n << ", packed: " << packed_gemm_library());
  const auto X = random_matrix<Scalar>(m, k, 1);
  const auto dY = random_matrix<Scalar>(m, n, 2);
  const auto dW0 = random_matrix<Scalar>(k, n, 3);  // what earlier microbatches left
  const PackedWeight<Scalar> packed;

  const auto first = packed_weight_gradient(packed, X, dY, dW0);
  CHECK(relative_error(first, vendor_weight_gradient(X, dY, dW0)) < 1e-5);
  CHECK(bitwise_equal(first, packed_weight_gradient(packed, X, dY, dW0)));
  CHECK(bitwise_equal(first, packed_weight_gradient(PackedWeight<Scalar>(), X, dY, dW0)));
}

TEST_CASE("after invalidate() the packed linear uses the changed weights", "[kernels][gemm][packed]") {
  const auto X = random_matrix<float>(32, 96, 4);
  const auto W = random_matrix<float>(96, 80, 5);
  const auto bias = random_matrix<float>(1, 80, 6);
  PackedWeight<float> packed;
  const auto before = packed_linear(packed, X, W, bias);

  // An optimizer step, in place, as Layer::weights_changed reports it.
  fill_uniform(ExecutionSpace(), stream_key(7, 0), -1, 1, W);
  fill_uniform(ExecutionSpace(), stream_key(7, 1), -1, 1, bias);
  packed.invalidate();
  const auto after = packed_linear(packed, X, W, bias);

  CHECK(!bitwise_equal(before, after));
  CHECK(relative_error(after, vendor_linear(X, W, bias)) < 1e-5);
  CHECK(bitwise_equal(after, packed_linear(PackedWeight<float>(), X, W, bias)));
}

TEST_CASE("after invalidate() the packed input gradient uses the changed weights", "[kernels][gemm][packed]") {
  const auto dY = random_matrix<float>(32, 80, 4);
  const auto W = random_matrix<float>(96, 80, 5);
  PackedWeight<float> packed;
  const auto before = packed_input_gradient(packed, dY, W);

  fill_uniform(ExecutionSpace(), stream_key(7, 0), -1, 1, W);
  packed.invalidate();
  const auto after = packed_input_gradient(packed, dY, W);

  CHECK(!bitwise_equal(before, after));
  CHECK(relative_error(after, vendor_input_gradient(dY, W)) < 1e-5);
  CHECK(bitwise_equal(after, packed_input_gradient(PackedWeight<float>(), dY, W)));
}

TEST_CASE("one packed weight serves microbatches of different sizes", "[kernels][gemm][packed]") {
  const auto W = random_matrix<float>(64, 48, 8);
  const auto bias = random_matrix<float>(1, 48, 9);
  PackedWeight<float> packed;
  for (const int rows : {32, 5, 1, 32}) {
    INFO(rows << " rows");
    const auto X = random_matrix<float>(rows, 64, 10 + rows);
    const auto Y = packed_linear(packed, X, W, bias);
    CHECK(relative_error(Y, vendor_linear(X, W, bias)) < 1e-5);
    CHECK(bitwise_equal(Y, packed_linear(PackedWeight<float>(), X, W, bias)));
  }
}

TEST_CASE("GemmPath::packed in a plain GEMM is the vendor path for every transposition", "[kernels][gemm][packed]") {
  const auto ta = GENERATE(Trans::no, Trans::yes);
  const auto tb = GENERATE(Trans::no, Trans::yes);
  // The Linear's three products: X W, dY W^T and X^T dY.
  const auto A = ta == Trans::no ? random_matrix<float>(17, 33, 11) : random_matrix<float>(33, 17, 11);
  const auto B = tb == Trans::no ? random_matrix<float>(33, 65, 12) : random_matrix<float>(65, 33, 12);
  auto packed = uninitialized_matrix<float>("test::packed", 17, 65);
  auto vendor = uninitialized_matrix<float>("test::vendor", 17, 65);
  gemm(ExecutionSpace(), ta, tb, 1.0f, A, B, 0.0f, packed, GemmPath::packed);
  gemm(ExecutionSpace(), ta, tb, 1.0f, A, B, 0.0f, vendor, GemmPath::vendor);
  CHECK(bitwise_equal(to_host<float>(packed), to_host<float>(vendor)));
}

TEST_CASE("packed linear shape mismatches are input errors that print every shape", "[kernels][gemm][packed]") {
  const auto X = random_matrix<float>(3, 4, 13);
  const auto W = random_matrix<float>(5, 6, 14);
  const auto bias = random_matrix<float>(1, 6, 15);
  auto Y = uninitialized_matrix<float>("test::y", 3, 6);
  CHECK(kpipe::test::input_error_of([&] { PackedWeight<float>().linear_forward(ExecutionSpace(), X, W, bias, Y); }) ==
        "packed linear shapes do not fit: X is 3x4, W is 5x6, bias is 1x6, Y is 3x6");
  auto dX = uninitialized_matrix<float>("test::dx", 3, 4);
  CHECK(kpipe::test::input_error_of([&] { PackedWeight<float>().input_gradient(ExecutionSpace(), Y, W, dX); }) ==
        "packed input gradient shapes do not fit: dY is 3x6, W is 5x6, dX is 3x4");
  CHECK(kpipe::test::input_error_of([&] { PackedWeight<float>().weight_gradient(ExecutionSpace(), X, Y, W); }) ==
        "packed weight gradient shapes do not fit: X is 3x4, dY is 3x6, dW is 5x6");
}

TEST_CASE("compute.gemm = packed names what it runs in this build", "[kernels][gemm][packed]") {
  const std::string library = packed_gemm_library();
  INFO(library);
  if (packed_gemm_available<float>()) {
    CHECK((library.find("oneDNN") == 0 || library.find("libxsmm") == 0));
  } else {
    CHECK(library.find("the vendor path") == 0);
  }
  CHECK(!packed_gemm_available<double>());
}
