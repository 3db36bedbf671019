// Causal attention: both paths against a naive host softmax(Q K^T / sqrt(hd)) V,
// against each other, their gradients against finite differences, the causal
// mask exactly, and the head layout round trip.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/kernels/precision.hpp"
#include "random_matrix.hpp"
#include "relative_error.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;

using kpipe::test::relative_error;

namespace {

struct Outputs {
  std::vector<double> O, L;  // L only from the fused path
};

struct Gradients {
  std::vector<double> dQ, dK, dV;
};

template <class Scalar>
std::vector<double> host(const Matrix<Scalar>& m) {
  const auto values = to_host<Scalar>(m);
  return {values.begin(), values.end()};
}

template <class Scalar>
Matrix<Scalar> device(const std::vector<double>& values, int rows, int cols) {
  auto m = uninitialized_matrix<Scalar>("test::device", rows, cols);
  from_host<Scalar>(std::vector<Scalar>(values.begin(), values.end()), m);
  return m;
}

int rows_of(const AttentionShape& s) { return s.batch_heads * s.tokens; }

// The definition, row by row: O_t = Σ_{j<=t} softmax_j(q_t·k_j / sqrt(hd)) v_j,
// and L_t the log-sum-exp of those scores.
Outputs naive_attention(const AttentionShape& s, const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v) {
  const int T = s.tokens, hd = s.head_dim;
  const double scale = 1 / std::sqrt(static_cast<double>(hd));
  Outputs out{std::vector<double>(q.size()), std::vector<double>(rows_of(s))};
  for (int b = 0; b < s.batch_heads; ++b) {
    for (int t = 0; t < T; ++t) {
      const int row = b * T + t;
      std::vector<double> score(t + 1);
      for (int j = 0; j <= t; ++j) {
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += q[row * hd + d] * k[(b * T + j) * hd + d];
        score[j] = scale * dot;
      }
      const double max = *std::max_element(score.begin(), score.end());
      double sum = 0;
      for (double x : score) sum += std::exp(x - max);
      out.L[row] = max + std::log(sum);
      for (int j = 0; j <= t; ++j) {
        const double p = std::exp(score[j] - max) / sum;
        for (int d = 0; d < hd; ++d) out.O[row * hd + d] += p * v[(b * T + j) * hd + d];
      }
    }
  }
  return out;
}

// One path's forward and backward on host values, computed in Scalar: q, k,
// v, dout and the results are heads-major stacks; the gemm path gets them as
// the projections of s.batch_heads / heads sequences of `heads` heads.
template <class Scalar>
struct Run {
  Outputs forward;
  Gradients backward;
};

template <class Scalar>
Run<Scalar> run(AttentionPath path, const AttentionShape& s, int heads, const std::vector<double>& q,
                const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& dout,
                GemmPath gemm = GemmPath::vendor) {
  const ExecutionSpace space;
  const int rows = rows_of(s), hd = s.head_dim, T = s.tokens;
  const auto Q = device<Scalar>(q, rows, hd), K = device<Scalar>(k, rows, hd), V = device<Scalar>(v, rows, hd);
  auto O = uninitialized_matrix<Scalar>("test::o", rows, hd);
  auto dQ = uninitialized_matrix<Scalar>("test::dq", rows, hd);
  auto dK = uninitialized_matrix<Scalar>("test::dk", rows, hd);
  auto dV = uninitialized_matrix<Scalar>("test::dv", rows, hd);
  const bool backward = !dout.empty();
  Run<Scalar> result;
  if (path == AttentionPath::gemm) {
    const int positions = rows / heads, dim = heads * hd;
    auto QKV = uninitialized_matrix<Scalar>("test::qkv", positions, 3 * dim);
    merge_heads(space, Q, 0, heads, T, QKV);
    merge_heads(space, K, dim, heads, T, QKV);
    merge_heads(space, V, 2 * dim, heads, T, QKV);
    auto P = uninitialized_matrix<Scalar>("test::p", rows, T);
    auto Y = uninitialized_matrix<Scalar>("test::y", positions, dim);
    attention_forward_gemm(space, s, QKV, P, Y, gemm);
    split_heads(space, Y, 0, heads, T, O);
    if (backward) {
      auto dY = uninitialized_matrix<Scalar>("test::dy", positions, dim);
      merge_heads(space, device<Scalar>(dout, rows, hd), 0, heads, T, dY);
      auto dP = uninitialized_matrix<Scalar>("test::dp", rows, T);
      auto dQKV = uninitialized_matrix<Scalar>("test::dqkv", positions, 3 * dim);
      attention_backward_gemm(space, s, QKV, P, dY, dP, dQKV, gemm);
      split_heads(space, dQKV, 0, heads, T, dQ);
      split_heads(space, dQKV, dim, heads, T, dK);
      split_heads(space, dQKV, 2 * dim, heads, T, dV);
    }
  } else {
    auto L = uninitialized_matrix<Scalar>("test::l", rows, 1);
    attention_forward_fused(space, s, Q, K, V, O, L);
    result.forward.L = host(L);
    if (backward) {
      auto D = uninitialized_matrix<Scalar>("test::d", rows, 1);
      attention_backward_fused(space, s, Q, K, V, O, L, device<Scalar>(dout, rows, hd), D, dQ, dK, dV);
    }
  }
  result.forward.O = host(O);
  if (backward) result.backward = {host(dQ), host(dK), host(dV)};
  return result;
}

// The gemm path under compute.precision = bf16 or fp16 on float32 q, k, v and
// dout: the projection and dY rounded to Reduced, float32 out.
template <class Reduced>
Run<float> run_reduced(const AttentionShape& s, int heads, const std::vector<double>& q, const std::vector<double>& k,
                       const std::vector<double>& v, const std::vector<double>& dout, GemmPath gemm) {
  const ExecutionSpace space;
  const int rows = rows_of(s), hd = s.head_dim, T = s.tokens;
  const int positions = rows / heads, dim = heads * hd;
  const auto reduced = [&](const Matrix<float>& X) {
    auto Y = uninitialized_matrix<Reduced>("test::reduced", X.extent_int(0), X.extent_int(1));
    round_to(space, X, Y);
    return Y;
  };
  auto QKV = uninitialized_matrix<float>("test::qkv", positions, 3 * dim);
  merge_heads(space, device<float>(q, rows, hd), 0, heads, T, QKV);
  merge_heads(space, device<float>(k, rows, hd), dim, heads, T, QKV);
  merge_heads(space, device<float>(v, rows, hd), 2 * dim, heads, T, QKV);
  const auto QKV_kept = reduced(QKV);
  auto P = uninitialized_matrix<float>("test::p", rows, T);
  auto P_kept = uninitialized_matrix<Reduced>("test::p_kept", rows, T);
  auto Y = uninitialized_matrix<float>("test::y", positions, dim);
  attention_forward_gemm<Reduced>(space, s, QKV_kept, P, P_kept, Y, gemm);
  auto dY = uninitialized_matrix<float>("test::dy", positions, dim);
  merge_heads(space, device<float>(dout, rows, hd), 0, heads, T, dY);
  auto dP = uninitialized_matrix<float>("test::dp", rows, T);
  auto dS = uninitialized_matrix<Reduced>("test::ds", rows, T);
  auto dQKV = uninitialized_matrix<float>("test::dqkv", positions, 3 * dim);
  attention_backward_gemm<Reduced>(space, s, QKV_kept, P_kept, reduced(dY), dP, dS, dQKV, gemm);
  Run<float> result;
  const auto head_stack = [&](const Matrix<float>& X, int offset) {
    auto stacked = uninitialized_matrix<float>("test::stacked", rows, hd);
    split_heads(space, X, offset, heads, T, stacked);
    return host(stacked);
  };
  result.forward.O = head_stack(Y, 0);
  result.backward = {head_stack(dQKV, 0), head_stack(dQKV, dim), head_stack(dQKV, 2 * dim)};
  return result;
}

// `values` rounded to Reduced (through float32), as round_to rounds.
template <class Reduced>
std::vector<double> rounded_values(std::vector<double> values) {
  for (double& x : values) {
    if constexpr (std::is_same_v<Reduced, BFloat16>) {
      x = to_float(to_bfloat16(static_cast<float>(x)));
    } else {
      x = to_float(to_half(static_cast<float>(x)));
    }
  }
  return values;
}

std::vector<double> random_values(int rows, int cols, std::uint64_t stream, double range = 1) {
  return host(random_matrix<double>(rows, cols, stream, -range, range));
}

const char* name(AttentionPath path) { return path == AttentionPath::gemm ? "gemm" : "fused"; }

}  // namespace

TEST_CASE("attention forward equals the naive causal softmax(Q K^T / sqrt(hd)) V in double", "[kernels][attention]") {
  const auto path = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  const auto gemm = GENERATE(GemmPath::vendor, GemmPath::portable);
  const int T = GENERATE(1, 7, 33, 70);
  const AttentionShape s{6, T, 8};  // 3 sequences of 2 heads
  INFO(name(path) << " path, T = " << T << ", portable GEMM " << (gemm == GemmPath::portable));
  // Scores up to about ±12: the softmax is far from uniform.
  const auto q = random_values(rows_of(s), 8, 1, 2), k = random_values(rows_of(s), 8, 2, 2),
             v = random_values(rows_of(s), 8, 3);
  const auto truth = naive_attention(s, q, k, v);
  const auto result = run<double>(path, s, 2, q, k, v, {}, gemm);
  CHECK(relative_error(result.forward.O, truth.O) < 1e-12);
  if (path == AttentionPath::fused) CHECK(relative_error(result.forward.L, truth.L) < 1e-12);
}

TEST_CASE("fused and gemm attention agree forward and backward in float", "[kernels][attention]") {
  const int T = GENERATE(1, 5, 64, 100);
  const int hd = GENERATE(8, 32);
  const AttentionShape s{6, T, hd};  // 2 sequences of 3 heads
  INFO("T = " << T << ", hd = " << hd);
  const auto q = random_values(rows_of(s), hd, 4, 2), k = random_values(rows_of(s), hd, 5, 2),
             v = random_values(rows_of(s), hd, 6), dout = random_values(rows_of(s), hd, 7);
  const auto gemm_path = GENERATE(GemmPath::vendor, GemmPath::portable);
  INFO("portable GEMM " << (gemm_path == GemmPath::portable));
  const auto gemm = run<float>(AttentionPath::gemm, s, 3, q, k, v, dout, gemm_path);
  const auto fused = run<float>(AttentionPath::fused, s, 3, q, k, v, dout);
  CHECK(relative_error(fused.forward.O, gemm.forward.O) < 1e-5);
  CHECK(relative_error(fused.backward.dQ, gemm.backward.dQ) < 1e-5);
  CHECK(relative_error(fused.backward.dK, gemm.backward.dK) < 1e-5);
  CHECK(relative_error(fused.backward.dV, gemm.backward.dV) < 1e-5);
  // And the float log-sum-exp against the double definition.
  CHECK(relative_error(fused.forward.L, naive_attention(s, q, k, v).L) < 1e-5);
}

// compute.precision = bf16, fp16: the products take the rounded projection
// (and dY), so the truth is the double attention of the rounded q, k, v and
// dout; what remains is the rounding of P before P V and of dS before dS K and
// dSᵀ Q, each a relative error of at most the type's unit roundoff r (2^-9,
// 2^-11) per entry, carried through sums of positive weights (forward) and
// of gradients of both signs (backward, hence the larger bound).
TEMPLATE_TEST_CASE("reduced-precision gemm attention is the double attention of its rounded operands",
                   "[kernels][attention][bf16][fp16]", BFloat16, Half) {
  const double r = std::is_same_v<TestType, BFloat16> ? 0x1p-9 : 0x1p-11;
  const int T = GENERATE(1, 33, 100);
  const int hd = GENERATE(8, 32);
  const AttentionShape s{6, T, hd};  // 2 sequences of 3 heads
  const auto q = rounded_values<TestType>(random_values(rows_of(s), hd, 12, 2));
  const auto k = rounded_values<TestType>(random_values(rows_of(s), hd, 13, 2));
  const auto v = rounded_values<TestType>(random_values(rows_of(s), hd, 14));
  const auto dout = rounded_values<TestType>(random_values(rows_of(s), hd, 15));
  const auto truth = run<double>(AttentionPath::gemm, s, 3, q, k, v, dout);
  const auto vendor = run_reduced<TestType>(s, 3, q, k, v, dout, GemmPath::vendor);
  const auto portable = run_reduced<TestType>(s, 3, q, k, v, dout, GemmPath::portable);
  for (const auto* got : {&vendor, &portable}) {
    INFO("T = " << T << ", hd = " << hd << ", " << (got == &vendor ? "vendor" : "portable") << " GEMM");
    CHECK(relative_error(got->forward.O, truth.forward.O) < 2 * r);
    CHECK(relative_error(got->backward.dQ, truth.backward.dQ) < 8 * r);
    CHECK(relative_error(got->backward.dK, truth.backward.dK) < 8 * r);
    CHECK(relative_error(got->backward.dV, truth.backward.dV) < 2 * r);
  }
}

TEST_CASE("attention gradients match finite differences of sum(O * R) in double", "[kernels][attention]") {
  const auto path = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  INFO(name(path) << " path");
  // T crosses the fused kernel's 32-row tiles and is not a multiple of them;
  // 2 sequences of 2 heads.
  const AttentionShape s{4, 37, 4};
  const int n = rows_of(s) * s.head_dim;
  std::vector<double> inputs[3] = {random_values(rows_of(s), 4, 8, 2), random_values(rows_of(s), 4, 9, 2),
                                   random_values(rows_of(s), 4, 10)};
  const auto R = random_values(rows_of(s), 4, 11);
  const auto loss = [&] {
    const auto O = run<double>(path, s, 2, inputs[0], inputs[1], inputs[2], {}).forward.O;
    double sum = 0;
    for (int e = 0; e < n; ++e) sum += O[e] * R[e];
    return sum;
  };
  // dL/dO = R.
  const auto analytic = run<double>(path, s, 2, inputs[0], inputs[1], inputs[2], R).backward;
  const std::vector<double>* gradients[3] = {&analytic.dQ, &analytic.dK, &analytic.dV};
  const char* names[3] = {"Q", "K", "V"};
  for (int which = 0; which < 3; ++which) {
    std::vector<double> numeric;
    const double h = 1e-5;
    for (double& x : inputs[which]) {
      const double saved = x;
      x = saved + h;
      const double up = loss();
      x = saved - h;
      const double down = loss();
      x = saved;
      numeric.push_back((up - down) / (2 * h));
    }
    INFO("gradient of " << names[which]);
    CHECK(relative_error(*gradients[which], numeric) < 1e-6);
  }
}

TEMPLATE_TEST_CASE("perturbing positions after t never changes the attention output at positions up to t",
                   "[kernels][attention]", float, double) {
  using Scalar = TestType;
  const auto path = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  const int t = GENERATE(0, 31, 32, 50);
  INFO(name(path) << " path, t = " << t);
  const AttentionShape s{2, 70, 8};
  const auto q = random_values(rows_of(s), 8, 12, 2), k = random_values(rows_of(s), 8, 13, 2),
             v = random_values(rows_of(s), 8, 14);
  auto q2 = q, k2 = k, v2 = v;
  const auto noise = random_values(rows_of(s), 8, 15, 5);
  for (int b = 0; b < s.batch_heads; ++b) {
    for (int e = (b * s.tokens + t + 1) * 8; e < (b + 1) * s.tokens * 8; ++e) {
      q2[e] += noise[e];
      k2[e] -= noise[e];
      v2[e] += 2 * noise[e];
    }
  }
  const auto before = run<Scalar>(path, s, 2, q, k, v, {});
  const auto after = run<Scalar>(path, s, 2, q2, k2, v2, {});
  bool later_changed = false;
  for (int b = 0; b < s.batch_heads; ++b) {
    for (int e = b * s.tokens * 8; e < (b * s.tokens + t + 1) * 8; ++e)
      REQUIRE(before.forward.O[e] == after.forward.O[e]);
    for (int e = (b * s.tokens + t + 1) * 8; e < (b + 1) * s.tokens * 8; ++e) {
      later_changed = later_changed || before.forward.O[e] != after.forward.O[e];
    }
    if (path == AttentionPath::fused) {
      for (int r = b * s.tokens; r <= b * s.tokens + t; ++r) REQUIRE(before.forward.L[r] == after.forward.L[r]);
    }
  }
  CHECK(later_changed);  // the perturbation was real
}

TEST_CASE("repeated attention calls are bitwise equal", "[kernels][attention]") {
  const auto path = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  const AttentionShape s{2, 45, 16};
  const auto q = random_values(rows_of(s), 16, 16), k = random_values(rows_of(s), 16, 17),
             v = random_values(rows_of(s), 16, 18), dout = random_values(rows_of(s), 16, 19);
  const auto first = run<float>(path, s, 2, q, k, v, dout);
  const auto second = run<float>(path, s, 2, q, k, v, dout);
  CHECK(first.forward.O == second.forward.O);
  CHECK(first.backward.dQ == second.backward.dQ);
  CHECK(first.backward.dK == second.backward.dK);
  CHECK(first.backward.dV == second.backward.dV);
}

TEMPLATE_TEST_CASE("split_heads and merge_heads move heads exactly and invert each other", "[kernels][attention]",
                   float, double) {
  using Scalar = TestType;
  const int sequences = 3, T = 5, heads = 4, hd = 6, dim = heads * hd;
  const auto X = random_matrix<Scalar>(sequences * T, 3 * dim, 20);
  const auto x = to_host<Scalar>(X);
  for (int part = 0; part < 3; ++part) {
    INFO("offset " << part * dim);
    auto stacked = uninitialized_matrix<Scalar>("test::stacked", sequences * heads * T, hd);
    split_heads(ExecutionSpace(), X, part * dim, heads, T, stacked);
    const auto stack = to_host<Scalar>(stacked);
    bool layout = true;
    for (int sq = 0; sq < sequences; ++sq) {
      for (int h = 0; h < heads; ++h) {
        for (int t = 0; t < T; ++t) {
          for (int d = 0; d < hd; ++d) {
            layout = layout && stack[(((sq * heads + h) * T) + t) * hd + d] ==
                                   x[(sq * T + t) * 3 * dim + part * dim + h * hd + d];
          }
        }
      }
    }
    CHECK(layout);
    // Merging into a copy with this part overwritten by a sentinel restores X exactly.
    auto Y = clone<Scalar>("test::y", X);
    Kokkos::deep_copy(Kokkos::subview(Y, Kokkos::ALL, std::pair<int, int>(part * dim, (part + 1) * dim)), Scalar(-7));
    merge_heads(ExecutionSpace(), stacked, part * dim, heads, T, Y);
    CHECK(to_host<Scalar>(Y) == x);
  }
}

TEST_CASE("attention layouts are checked", "[kernels][attention]") {
  // Two sequences of 5 positions, 4 heads of 3 features: a 40 x 3 stack.
  const auto X = random_matrix<float>(10, 12, 21);
  auto stacked = uninitialized_matrix<float>("test::stacked", 40, 3);
  CHECK_NOTHROW(split_heads(ExecutionSpace(), X, 0, 4, 5, stacked));
  CHECK_THROWS_AS(split_heads(ExecutionSpace(), X, 3, 4, 5, stacked), kpipe::Error);  // columns 3..15 of 12
  CHECK_THROWS_AS(split_heads(ExecutionSpace(), X, 0, 4, 3, stacked), kpipe::Error);  // 10 rows, T = 3
  CHECK_THROWS_AS(split_heads(ExecutionSpace(), X, 0, 2, 5, stacked), kpipe::Error);  // a 20 x 3 stack
  auto O = uninitialized_matrix<float>("test::o", 40, 3);
  auto L = uninitialized_matrix<float>("test::l", 39, 1);
  CHECK_THROWS_AS(attention_forward_fused(ExecutionSpace(), AttentionShape{8, 5, 3}, stacked, stacked, stacked, O, L),
                  kpipe::Error);
  // The gemm path on the projections: 2 sequences of 5 positions, 4 heads of 3 features.
  const auto QKV = random_matrix<float>(10, 36, 22);
  auto P = uninitialized_matrix<float>("test::p", 40, 5);
  auto Y = uninitialized_matrix<float>("test::y", 10, 12);
  CHECK_NOTHROW(attention_forward_gemm(ExecutionSpace(), AttentionShape{8, 5, 3}, QKV, P, Y, GemmPath::vendor));
  CHECK_THROWS_AS(attention_forward_gemm(ExecutionSpace(), AttentionShape{6, 5, 3}, QKV, P, Y, GemmPath::vendor),
                  kpipe::Error);  // 2 sequences of 4 heads are not 6
  CHECK_THROWS_AS(attention_forward_gemm(ExecutionSpace(), AttentionShape{8, 5, 3}, X, P, Y, GemmPath::vendor),
                  kpipe::Error);  // a 10 x 12 projection for 4 heads of 3
  CHECK_THROWS_AS(attention_forward_gemm(ExecutionSpace(), AttentionShape{8, 5, 3}, QKV, stacked, Y, GemmPath::vendor),
                  kpipe::Error);  // P of 40 x 3, not 40 x 5
}

// Packed documents: each sequence holds documents of `lengths` positions,
// and a query attends to its own document's keys only, so every document's
// outputs and gradients are those of the document attended alone — in both
// paths, across the fused kernel's 32-row tiles, with documents that start
// and end inside a tile and one that spans several.
TEST_CASE("attention on packed documents equals each document attended alone", "[kernels][attention][documents]") {
  const auto path = GENERATE(AttentionPath::gemm, AttentionPath::fused);
  const int heads = 2, hd = 8, T = 70;
  const std::vector<std::vector<int>> lengths{{5, 40, 1, 24}, {70}, {33, 37}};
  const int sequences = static_cast<int>(lengths.size());
  std::vector<int> places;
  for (const auto& sequence : lengths) {
    for (int n : sequence) {
      for (int p = 0; p < n; ++p) places.push_back(p);
    }
  }
  Kokkos::View<int*, MemorySpace> positions("test::positions", places.size());
  Kokkos::deep_copy(positions, Kokkos::View<const int*, Kokkos::HostSpace>(places.data(), places.size()));
  const AttentionShape packed(sequences * heads, T, hd, DocumentMask{positions, heads});
  INFO(name(path) << " path");
  const int rows = rows_of(packed);
  const auto q = random_values(rows, hd, 31, 2), k = random_values(rows, hd, 32, 2), v = random_values(rows, hd, 33),
             dout = random_values(rows, hd, 34);
  const auto whole = run<double>(path, packed, heads, q, k, v, dout);

  // Rows [first, first + n) of every head of sequence s, as one sequence's stack.
  const auto document = [&](const std::vector<double>& stack, int s, int first, int n) {
    std::vector<double> out;
    for (int h = 0; h < heads; ++h) {
      const auto begin = stack.begin() + ((s * heads + h) * T + first) * hd;
      out.insert(out.end(), begin, begin + n * hd);
    }
    return out;
  };
  for (int s = 0; s < sequences; ++s) {
    int first = 0;
    for (int n : lengths[s]) {
      INFO("sequence " << s << ", document at " << first << " of " << n << " positions");
      const AttentionShape alone(heads, n, hd);
      const auto truth = run<double>(path, alone, heads, document(q, s, first, n), document(k, s, first, n),
                                     document(v, s, first, n), document(dout, s, first, n));
      CHECK(relative_error(document(whole.forward.O, s, first, n), truth.forward.O) < 1e-13);
      CHECK(relative_error(document(whole.backward.dQ, s, first, n), truth.backward.dQ) < 1e-13);
      CHECK(relative_error(document(whole.backward.dK, s, first, n), truth.backward.dK) < 1e-13);
      CHECK(relative_error(document(whole.backward.dV, s, first, n), truth.backward.dV) < 1e-13);
      first += n;
    }
  }
}
