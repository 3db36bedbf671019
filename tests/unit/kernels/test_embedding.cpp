// Embeddings against host loops: the gather forward, and the backward sums in
// the documented order (ascending positions, then added once), so double
// results are exact.
#include <string>
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/embedding.hpp"
#include "random_matrix.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;

namespace {

constexpr int vocab = 70;   // more than one team's block of rows
constexpr int context = 6;  // position table rows; T may be shorter
constexpr int rows = 3;
constexpr int T = 4;
constexpr int dim = 5;

// Token 3 five times, token 7 twice, tokens in three blocks of 32 rows, most
// tokens never: rows x T.
const std::vector<int> ids = {3, 7, 3, 0, 69, 3, 3, 7, 33, 31, 3, 64};

template <class Scalar>
Matrix<Scalar> id_matrix() {
  auto m = uninitialized_matrix<Scalar>("test::ids", rows, T);
  from_host<Scalar>(std::vector<Scalar>(ids.begin(), ids.end()), m);
  return m;
}

}  // namespace

TEMPLATE_TEST_CASE("embedding forward adds the token row and the position row", "[kernels][embedding]", float, double) {
  using Scalar = TestType;
  const auto token = random_matrix<Scalar>(vocab, dim, 1);
  const auto position = random_matrix<Scalar>(context, dim, 2);
  auto Y = uninitialized_matrix<Scalar>("test::y", rows, T * dim);
  embedding_forward(ExecutionSpace(), id_matrix<Scalar>(), token, position, Y);
  const auto tok = to_host<Scalar>(token), pos = to_host<Scalar>(position), y = to_host<Scalar>(Y);
  std::vector<Scalar> expected;
  for (int s = 0; s < rows; ++s) {
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < dim; ++j) expected.push_back(tok[ids[s * T + t] * dim + j] + pos[t * dim + j]);
    }
  }
  CHECK(y == expected);
}

TEMPLATE_TEST_CASE("embedding backward accumulates each token's and position's gradient in ascending order",
                   "[kernels][embedding]", float, double) {
  using Scalar = TestType;
  const auto dY = random_matrix<Scalar>(rows, T * dim, 3);
  const auto g = to_host<Scalar>(dY);
  // Σ over positions holding token v (ascending), and over sequences for position t.
  std::vector<Scalar> token_sum(vocab * dim, 0), position_sum(context * dim, 0);
  std::vector<bool> used(vocab, false);
  for (int p = 0; p < rows * T; ++p) {
    used[ids[p]] = true;
    for (int j = 0; j < dim; ++j) token_sum[ids[p] * dim + j] += g[p * dim + j];
  }
  for (int t = 0; t < T; ++t) {
    for (int s = 0; s < rows; ++s) {
      for (int j = 0; j < dim; ++j) position_sum[t * dim + j] += g[(s * T + t) * dim + j];
    }
  }
  // Non-zero starting gradients: backward adds to them, twice for two calls.
  auto dtoken = random_matrix<Scalar>(vocab, dim, 4);
  auto dposition = random_matrix<Scalar>(context, dim, 5);
  auto expected_token = to_host<Scalar>(dtoken);
  auto expected_position = to_host<Scalar>(dposition);
  const auto untouched_token = expected_token;
  for (int call = 1; call <= 2; ++call) {
    INFO("call " << call);
    for (int v = 0; v < vocab; ++v) {
      for (int j = 0; j < dim && used[v]; ++j) expected_token[v * dim + j] += token_sum[v * dim + j];
    }
    for (int e = 0; e < T * dim; ++e) expected_position[e] += position_sum[e];
    embedding_backward(ExecutionSpace(), id_matrix<Scalar>(), dY, dtoken, dposition);
    CHECK(to_host<Scalar>(dtoken) == expected_token);
    CHECK(to_host<Scalar>(dposition) == expected_position);
  }
  // Tokens no position holds, and positions beyond T, keep their gradient bit for bit.
  const auto final_token = to_host<Scalar>(dtoken);
  for (int j = 0; j < dim; ++j) {
    CHECK(final_token[4 * dim + j] == untouched_token[4 * dim + j]);
    CHECK(final_token[32 * dim + j] == untouched_token[32 * dim + j]);
  }
}

// Packed documents closed by token 3: row 0 (3 7 3 0) holds documents at
// places 0 | 0 1 | 0, row 1 (69 3 3 7) 0 1 | 0 | 0, row 2 (33 31 3 64) 0 1 2 | 0.
TEMPLATE_TEST_CASE("on packed documents positions restart after each separator", "[kernels][embedding][documents]",
                   float, double) {
  using Scalar = TestType;
  constexpr int separator = 3;
  const std::vector<int> places = {0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 2, 0};
  Kokkos::View<int*, MemorySpace> positions("test::positions", rows * T);
  document_positions<Scalar>(ExecutionSpace(), id_matrix<Scalar>(), separator, positions);
  auto found = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), positions);
  CHECK(std::vector<int>(found.data(), found.data() + rows * T) == places);

  const auto token = random_matrix<Scalar>(vocab, dim, 1);
  const auto position = random_matrix<Scalar>(context, dim, 2);
  auto Y = uninitialized_matrix<Scalar>("test::y", rows, T * dim);
  embedding_forward(ExecutionSpace(), id_matrix<Scalar>(), token, position, Y, 0, separator);
  const auto tok = to_host<Scalar>(token), pos = to_host<Scalar>(position);
  std::vector<Scalar> expected;
  for (int p = 0; p < rows * T; ++p) {
    for (int j = 0; j < dim; ++j) expected.push_back(tok[ids[p] * dim + j] + pos[places[p] * dim + j]);
  }
  CHECK(to_host<Scalar>(Y) == expected);

  // dposition[q] sums dY over the positions at place q, in ascending (s, t).
  const auto dY = random_matrix<Scalar>(rows, T * dim, 3);
  const auto g = to_host<Scalar>(dY);
  auto dtoken = zero_matrix<Scalar>("test::dtoken", vocab, dim);
  auto dposition = random_matrix<Scalar>(context, dim, 5);
  auto expected_position = to_host<Scalar>(dposition);
  for (int p = 0; p < rows * T; ++p) {
    for (int j = 0; j < dim; ++j) expected_position[places[p] * dim + j] += g[p * dim + j];
  }
  embedding_backward(ExecutionSpace(), id_matrix<Scalar>(), dY, dtoken, dposition, 0, separator);
  CHECK(to_host<Scalar>(dposition) == expected_position);
}

TEST_CASE("embedding shapes are checked", "[kernels][embedding]") {
  const auto token = random_matrix<float>(vocab, dim, 1);
  const auto short_positions = random_matrix<float>(T - 1, dim, 2);
  auto Y = uninitialized_matrix<float>("test::y", rows, T * dim);
  CHECK(kpipe::test::input_error_of(
            [&] { embedding_forward(ExecutionSpace(), id_matrix<float>(), token, short_positions, Y); }) ==
        "embedding shapes do not fit: ids 3x4, token table 70x5, position table 3x5 (at least T rows), output 3x20");
}
