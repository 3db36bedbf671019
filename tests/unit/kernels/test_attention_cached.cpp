// Cached attention: prompts of several sequences fed through a paged cache
// in chunks of any size, interleaved in shared microbatches over shuffled
// blocks, give the causal attention of the whole sequences (both training
// paths as references), and bitwise the same output however they are cut.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/attention.hpp"
#include "kpipe/kernels/attention_cached.hpp"
#include "random_matrix.hpp"
#include "relative_error.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;
using kpipe::test::random_matrix;

using kpipe::test::relative_error;

namespace {

constexpr int heads = 2, hd = 8, dim = heads * hd, block_tokens = 4, pool_blocks = 40;

// A device copy of row-major `values` of the given extents.
template <class View, class... Extents>
View device_indices(std::vector<int> values, Extents... extents) {
  using Host =
      Kokkos::View<typename View::non_const_data_type, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  const typename View::non_const_type out("test::indices", extents...);
  Kokkos::deep_copy(out, Host(values.data(), extents...));
  return out;
}

// The prompts: sequence s is lengths[s] rows of a fused QKV projection, and
// holds the blocks blocks[s] of the shared pools.
struct Prompts {
  std::vector<int> lengths;
  std::vector<std::vector<double>> qkv;  // per sequence, length x 3·dim
  std::vector<std::vector<int>> blocks;
};

Prompts prompts() {
  Prompts p;
  p.lengths = {7, 70, 33};  // 70 crosses the kernel's 64-position tiles
  std::vector<int> order(pool_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  auto next = order.begin();
  for (std::size_t s = 0; s < p.lengths.size(); ++s) {
    const int length = p.lengths[s];
    p.qkv.push_back(to_host<double>(random_matrix<double>(length, 3 * dim, 30 + s, -2, 2)));
    const int count = (length + block_tokens - 1) / block_tokens;
    p.blocks.emplace_back(next, next + count);
    next += count;
  }
  return p;
}

// The outputs (length x dim) of each whole sequence through a training path.
template <class Scalar>
std::vector<std::vector<double>> reference(const Prompts& p, AttentionPath path) {
  const ExecutionSpace space;
  std::vector<std::vector<double>> out;
  for (std::size_t s = 0; s < p.lengths.size(); ++s) {
    const int T = p.lengths[s];
    const AttentionShape shape{heads, T, hd};
    auto X = uninitialized_matrix<Scalar>("test::x", T, 3 * dim);
    from_host<Scalar>(std::vector<Scalar>(p.qkv[s].begin(), p.qkv[s].end()), X);
    auto O = uninitialized_matrix<Scalar>("test::o", T, dim);
    if (path == AttentionPath::gemm) {
      auto P = uninitialized_matrix<Scalar>("test::p", heads * T, T);
      attention_forward_gemm(space, shape, X, P, O, GemmPath::vendor);
    } else {
      std::vector<Matrix<Scalar>> stacks;
      for (int part = 0; part < 4; ++part) {
        stacks.push_back(uninitialized_matrix<Scalar>("test::stack", heads * T, hd));
        if (part < 3) split_heads(space, X, part * dim, heads, T, stacks.back());
      }
      auto L = uninitialized_matrix<Scalar>("test::l", heads * T, 1);
      attention_forward_fused(space, shape, stacks[0], stacks[1], stacks[2], stacks[3], L);
      merge_heads(space, stacks[3], 0, heads, T, O);
    }
    const auto values = to_host<Scalar>(O);
    out.emplace_back(values.begin(), values.end());
  }
  return out;
}

template <class Stored>
Stored quiet_nan() {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  if constexpr (std::is_same_v<Stored, BFloat16>) {
    return to_bfloat16(nan);
  } else if constexpr (std::is_same_v<Stored, Half>) {
    return to_half(nan);
  } else {
    return std::numeric_limits<Stored>::quiet_NaN();
  }
}

// The outputs of each sequence fed through the cache, its pools of Stored:
// microbatch m carries, of every sequence with tokens left, its next chunk
// of chunks[min(m, last)] tokens. Unreserved pool rows hold NaN, so reading
// one shows.
template <class Scalar, class Stored = Scalar>
std::vector<std::vector<Scalar>> cached(const Prompts& p, const std::vector<int>& chunks) {
  const ExecutionSpace space;
  const int rows = pool_blocks * block_tokens;
  auto K = uninitialized_matrix<Stored>("test::k", rows, dim);
  auto V = uninitialized_matrix<Stored>("test::v", rows, dim);
  Kokkos::deep_copy(K, quiet_nan<Stored>());
  Kokkos::deep_copy(V, quiet_nan<Stored>());
  std::vector<std::vector<Scalar>> out;
  for (const int length : p.lengths) out.emplace_back(static_cast<std::size_t>(length) * dim);
  std::vector<int> done(p.lengths.size(), 0);
  for (std::size_t m = 0; done != p.lengths; ++m) {
    const int chunk = chunks[std::min(m, chunks.size() - 1)];
    std::vector<int> slot, position, sequence, table, owner;
    std::vector<Scalar> qkv;
    int widest = 0;
    for (std::size_t s = 0; s < p.lengths.size(); ++s) widest = std::max(widest, static_cast<int>(p.blocks[s].size()));
    for (std::size_t s = 0; s < p.lengths.size(); ++s) {
      const int end = std::min(p.lengths[s], done[s] + chunk);
      if (end == done[s]) continue;
      const int row = static_cast<int>(owner.size());
      owner.push_back(static_cast<int>(s));
      std::vector<int> padded(p.blocks[s]);
      padded.resize(static_cast<std::size_t>(widest), -1);
      table.insert(table.end(), padded.begin(), padded.end());
      for (int t = done[s]; t < end; ++t) {
        slot.push_back(p.blocks[s][static_cast<std::size_t>(t / block_tokens)] * block_tokens + t % block_tokens);
        position.push_back(t);
        sequence.push_back(row);
        qkv.insert(qkv.end(), p.qkv[s].begin() + t * 3 * dim, p.qkv[s].begin() + (t + 1) * 3 * dim);
      }
      done[s] = end;
    }
    const int n = static_cast<int>(slot.size());
    PagedTokens tokens;
    tokens.slot = device_indices<PagedTokens::Indices>(slot, n);
    tokens.position = device_indices<PagedTokens::Indices>(position, n);
    tokens.sequence = device_indices<PagedTokens::Indices>(sequence, n);
    tokens.blocks = device_indices<PagedTokens::Table>(table, owner.size(), widest);
    tokens.block_tokens = block_tokens;
    auto QKV = uninitialized_matrix<Scalar>("test::qkv", n, 3 * dim);
    from_host<Scalar>(qkv, QKV);
    auto O = uninitialized_matrix<Scalar>("test::o", n, dim);
    attention_cached<Scalar, Stored>(space, heads, tokens, QKV, K, V, O);
    const auto result = to_host<Scalar>(O);
    for (int i = 0; i < n; ++i) {
      auto& into = out[static_cast<std::size_t>(owner[static_cast<std::size_t>(sequence[i])])];
      std::copy(result.begin() + i * dim, result.begin() + (i + 1) * dim, into.begin() + position[i] * dim);
    }
  }
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("cached attention in any chunking equals causal attention of the whole sequences",
                   "[kernels][attention][kv_cache]", float, double) {
  using Scalar = TestType;
  const double tolerance = std::is_same_v<Scalar, float> ? 1e-5 : 1e-12;
  const Prompts p = prompts();
  const std::vector<std::vector<int>> chunkings = {{1000}, {1}, {3}, {5, 1, 1, 2, 64}};
  const auto whole = cached<Scalar>(p, chunkings[0]);
  for (const auto path : {AttentionPath::gemm, AttentionPath::fused}) {
    INFO((path == AttentionPath::gemm ? "gemm" : "fused") << " reference");
    CHECK(relative_error(whole, reference<Scalar>(p, path)) < tolerance);
  }
  for (std::size_t c = 1; c < chunkings.size(); ++c) {
    INFO("chunking " << c);
    CHECK(cached<Scalar>(p, chunkings[c]) == whole);  // bitwise
  }
}

// bfloat16 or float16 pools (compute.precision = bf16, fp16) keep each K and
// V rounded as it is written and widen it exactly: the output is, bitwise,
// that of float pools fed the rounded K and V, whatever the chunking.
TEMPLATE_TEST_CASE("a 16-bit cache gives the float cache's output on K and V rounded to it",
                   "[kernels][attention][kv_cache]", BFloat16, Half) {
  using Stored = TestType;
  const Prompts p = prompts();
  Prompts rounded = p;
  for (auto& qkv : rounded.qkv) {
    for (std::size_t i = 0; i < qkv.size(); ++i) {
      if (static_cast<int>(i % (3 * dim)) < dim) continue;  // Q is not cached
      const auto value = static_cast<float>(qkv[i]);
      if constexpr (std::is_same_v<Stored, BFloat16>) {
        qkv[i] = to_float(to_bfloat16(value));
      } else {
        qkv[i] = to_float(to_half(value));
      }
    }
  }
  const auto whole = cached<float, Stored>(p, {1000});
  CHECK(whole == cached<float>(rounded, {1000}));
  CHECK(whole != cached<float>(p, {1000}));  // the rounding shows
  CHECK(cached<float, Stored>(p, {5, 1, 1, 2, 64}) == whole);
}

TEST_CASE("cached attention checks its operands", "[kernels][attention][kv_cache]") {
  const ExecutionSpace space;
  PagedTokens tokens;
  tokens.slot = device_indices<PagedTokens::Indices>({0, 1}, 2);
  tokens.position = device_indices<PagedTokens::Indices>({0, 1}, 2);
  tokens.sequence = device_indices<PagedTokens::Indices>({0, 0}, 2);
  tokens.blocks = device_indices<PagedTokens::Table>({0}, 1, 1);
  tokens.block_tokens = block_tokens;
  auto K = uninitialized_matrix<float>("test::k", block_tokens, dim);
  auto V = uninitialized_matrix<float>("test::v", block_tokens, dim);
  auto O = uninitialized_matrix<float>("test::o", 2, dim);
  CHECK_NOTHROW(attention_cached(space, heads, tokens, random_matrix<float>(2, 3 * dim, 1), K, V, O));
  CHECK_THROWS_AS(attention_cached(space, heads, tokens, random_matrix<float>(2, dim, 1), K, V, O), kpipe::Error);
  CHECK_THROWS_AS(attention_cached(space, 3, tokens, random_matrix<float>(2, 3 * dim, 1), K, V, O), kpipe::Error);
  CHECK_THROWS_AS(attention_cached(space, heads, tokens, random_matrix<float>(3, 3 * dim, 1), K, V, O), kpipe::Error);
}
