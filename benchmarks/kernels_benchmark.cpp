// Stage-compute kernels (docs/performance-log.md, "Stage compute (Kokkos)"):
//  * GEMM in GFLOP/s over training shapes, b x 1024 x 1024 (a microbatch of b
//    rows times a 1024 x 1024 weight) for b = 1 .. 256 and 1024^3, through
//    kpipe's vendor path, its portable kernel, and cblas_sgemm called directly
//    on the same memory as the baseline the vendor path must match; the packed
//    path (compute.gemm = "packed": X W + bias on a weight packed once), and
//    at b = 32 the same with a repack every call (the once-per-step reorder's
//    cost is the difference); the input-gradient product dY W^T, vendor and
//    on a packed W^T (with and without a repack every call), and both
//    products at the Linear shapes of the transformer (512 rows); the weight
//    gradient dW += X^T dY, vendor and packed (oneDNN's sgemm), at those
//    shapes and the MLP's 32 x 1024 -> 1024, and over 1, 8 and 24 distinct
//    512 x 512 gradients in turn (from L2, L3 and memory); a pass over the quickstart's
//    five 256 x 256 weights at 16 rows and at a thread's row part of 8;
//  * elementwise kernels in GB/s next to a Kokkos::deep_copy of the same size;
//  * causal attention forward + backward in tokens/s, gemm and fused paths, for
//    T = 64, 256, 1024 (4 heads of 32, 4096 tokens per call), with the bytes
//    each path keeps between forward and backward (P, or O and L);
//  * the embedding backward, whose token gradient scans every id once per
//    vocabulary row (embedding.cpp), at a GPT-2 vocabulary;
//  * the round trip of a cache line between two of the rank's host threads,
//    in a threaded host build.
// Run with OPENBLAS_NUM_THREADS=1 so that both sides use the same threads.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <vector>

#if defined(KPIPE_HAVE_CBLAS)
#include <cblas.h>
#endif

#include "kpipe/kernels/attention.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/embedding.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/optimizer.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/tensor/compat.hpp"

namespace {

using namespace kpipe::kernels;
using namespace kpipe::tensor;

Matrix<float> random_matrix(int rows, int cols, std::uint64_t stream) {
  auto m = uninitialized_matrix<float>("kpipe::benchmark::matrix", rows, cols);
  fill_uniform(ExecutionSpace(), stream_key(1, stream), -1.0, 1.0, m);
  return m;
}

// Arguments: m, n, k; C (m x n) = A (m x k) op(B) (k x n).
void gemm_shapes(benchmark::internal::Benchmark* b) {
  for (int rows = 1; rows <= 256; rows *= 2) b->Args({rows, 1024, 1024});
  b->Args({1024, 1024, 1024});
}

// The Linear layers (rows, inputs -> outputs) of inputs/kjv-char.toml, a
// microbatch of 8 x 64 positions (issue 12's MLP is 32 x 1024 -> 1024).
constexpr int linears[][3] = {{512, 128, 384}, {512, 128, 128}, {512, 128, 512}, {512, 512, 128}, {512, 128, 63}};

// Y = X W: m x outputs from m x inputs.
void forward_shapes(benchmark::internal::Benchmark* b) {
  for (const auto& [rows, inputs, outputs] : linears) b->Args({rows, outputs, inputs});
}

// dX = dY W^T: m x inputs from m x outputs.
void input_gradient_shapes(benchmark::internal::Benchmark* b) {
  for (const auto& [rows, inputs, outputs] : linears) b->Args({rows, inputs, outputs});
}

// dW += X^T dY: inputs x outputs, summed over the rows; and issue 12's MLP.
void weight_gradient_shapes(benchmark::internal::Benchmark* b) {
  for (const auto& [rows, inputs, outputs] : linears) b->Args({inputs, outputs, rows});
  b->Args({1024, 1024, 32});
}

// trans_a = yes: A is stored k x m, as X is for the weight gradient; trans_b
// = yes: B is stored n x k, as W is for the input gradient. C starts at zero
// for the products that accumulate into it.
template <class Run>
void gemm_benchmark(benchmark::State& state, Run&& run, Trans trans_a = Trans::no, Trans trans_b = Trans::no) {
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  const auto A = trans_a == Trans::no ? random_matrix(m, k, 1) : random_matrix(k, m, 1);
  const auto B = trans_b == Trans::no ? random_matrix(k, n, 2) : random_matrix(n, k, 2);
  auto C = zero_matrix<float>("kpipe::benchmark::c", m, n);
  // Untimed: a library's first call creates its handle and loads its kernels
  // (74 ms for cuBLAS' first product on an H200, timed as one iteration).
  run(A, B, C);
  Kokkos::fence();
  Kokkos::deep_copy(C, 0.0f);
  for (auto _ : state) {
    run(A, B, C);
    Kokkos::fence();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_gemm_vendor(benchmark::State& state) {
  gemm_benchmark(state, [](const auto& A, const auto& B, const auto& C) {
    gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0f, A, B, 0.0f, C, GemmPath::vendor);
  });
}
BENCHMARK(BM_gemm_vendor)->Apply(gemm_shapes)->Apply(forward_shapes)->UseRealTime();

// One host thread's share of a pass through the quickstart's hidden layers:
// Y = X W over `layers` distinct 256 x 256 weights, at a microbatch's 16 rows
// (a rank that holds the layers) and at 8 (a row part of a rank of two
// threads, model/layers/sequential.cpp). Arguments: rows, width, layers. The
// weights of five layers (1.25 MiB) outgrow a Zen core's L2, so each pass
// streams them in; 8 rows do half the FLOPs on the same bytes
// (docs/performance-log.md, "Eight rows a thread").
void BM_gemm_vendor_layers(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), width = static_cast<int>(state.range(1)),
            layers = static_cast<int>(state.range(2));
  const auto X = random_matrix(rows, width, 1);
  std::vector<Matrix<float>> weights;
  for (int l = 0; l < layers; ++l) weights.push_back(random_matrix(width, width, 2 + static_cast<std::uint64_t>(l)));
  auto Y = zero_matrix<float>("kpipe::benchmark::y", rows, width);
  const auto pass = [&] {
    for (const auto& W : weights) gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0f, X, W, 0.0f, Y, GemmPath::vendor);
    Kokkos::fence();
  };
  pass();  // untimed: the library's first calls
  for (auto _ : state) pass();
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * rows * width * width * layers * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gemm_vendor_layers)
    ->Args({16, 256, 5})
    ->Args({8, 256, 5})
    ->Args({16, 256, 1})
    ->Args({8, 256, 1})
    ->UseRealTime();

void BM_gemm_portable(benchmark::State& state) {
  gemm_benchmark(state, [](const auto& A, const auto& B, const auto& C) {
    gemm(ExecutionSpace(), Trans::no, Trans::no, 1.0f, A, B, 0.0f, C, GemmPath::portable);
  });
}
BENCHMARK(BM_gemm_portable)->Apply(gemm_shapes)->UseRealTime();

// A Linear's products on a packed weight: the forward X W (+ a zero bias), or
// with trans_b the input gradient dY W^T. `repack`: invalidate before every
// call, so each pays the reorder.
void packed_benchmark(benchmark::State& state, Trans trans_b, bool repack) {
  PackedWeight<float> packed;
  const auto bias = zero_matrix<float>("kpipe::benchmark::bias", 1, static_cast<int>(state.range(1)));
  state.SetLabel(packed_gemm_library());
  gemm_benchmark(
      state,
      [&](const auto& A, const auto& B, const auto& C) {
        if (repack) packed.invalidate();
        if (trans_b == Trans::no) {
          packed.linear_forward(ExecutionSpace(), A, B, bias, C);
        } else {
          packed.input_gradient(ExecutionSpace(), A, B, C);
        }
      },
      Trans::no, trans_b);
}

void BM_gemm_packed(benchmark::State& state) { packed_benchmark(state, Trans::no, false); }
BENCHMARK(BM_gemm_packed)->Apply(gemm_shapes)->Apply(forward_shapes)->UseRealTime();

void BM_gemm_packed_repack(benchmark::State& state) { packed_benchmark(state, Trans::no, true); }
BENCHMARK(BM_gemm_packed_repack)->Args({32, 1024, 1024})->Apply(forward_shapes)->UseRealTime();

// The Linear's input gradient dX = dY W^T on the vendor path (A is dY, B is W).
void BM_gemm_vendor_transposed_b(benchmark::State& state) {
  gemm_benchmark(
      state,
      [](const auto& A, const auto& B, const auto& C) {
        gemm(ExecutionSpace(), Trans::no, Trans::yes, 1.0f, A, B, 0.0f, C, GemmPath::vendor);
      },
      Trans::no, Trans::yes);
}
BENCHMARK(BM_gemm_vendor_transposed_b)->Args({32, 1024, 1024})->Apply(input_gradient_shapes)->UseRealTime();

void BM_gemm_packed_transposed_b(benchmark::State& state) { packed_benchmark(state, Trans::yes, false); }
BENCHMARK(BM_gemm_packed_transposed_b)->Args({32, 1024, 1024})->Apply(input_gradient_shapes)->UseRealTime();

void BM_gemm_packed_transposed_b_repack(benchmark::State& state) { packed_benchmark(state, Trans::yes, true); }
BENCHMARK(BM_gemm_packed_transposed_b_repack)->Args({32, 1024, 1024})->Apply(input_gradient_shapes)->UseRealTime();

// The Linear's weight gradient dW += X^T dY (A is X, B is dY, C is dW), vendor and packed.
void BM_gemm_vendor_weight_gradient(benchmark::State& state) {
  gemm_benchmark(
      state,
      [](const auto& A, const auto& B, const auto& C) {
        gemm(ExecutionSpace(), Trans::yes, Trans::no, 1.0f, A, B, 1.0f, C, GemmPath::vendor);
      },
      Trans::yes);
}
BENCHMARK(BM_gemm_vendor_weight_gradient)->Apply(weight_gradient_shapes)->UseRealTime();

// The weight gradients of a stage's `layers` Linear layers in turn, dW_l +=
// X_l^T dY_l as BW runs them. At compute_bound's 512 x 512 over a microbatch
// of 32 rows one gradient (1 MiB) stays in a core's L2, eight (8 MiB) come
// from L3, and 24 (the size of that deck's weights, gradients and momentum on
// one rank) from memory: where the CPU has AVX-512 these stream through
// kpipe's kernel, as oneDNN's tiles of C did not (docs/performance-log.md,
// "The weight gradient from memory", "Streaming the weight gradient"). The
// quickstart's 256 x 256 over 16 rows, one and four of them, stay below L2
// and on the library. Arguments: inputs, outputs, rows, layers.
void BM_gemm_vendor_weight_gradient_layers(benchmark::State& state) {
  const int inputs = static_cast<int>(state.range(0)), outputs = static_cast<int>(state.range(1)),
            rows = static_cast<int>(state.range(2)), layers = static_cast<int>(state.range(3));
  std::vector<Matrix<float>> X, dY, dW;
  for (int l = 0; l < layers; ++l) {
    X.push_back(random_matrix(rows, inputs, 1 + 2 * static_cast<std::uint64_t>(l)));
    dY.push_back(random_matrix(rows, outputs, 2 + 2 * static_cast<std::uint64_t>(l)));
    dW.push_back(zero_matrix<float>("kpipe::benchmark::dw", inputs, outputs));
  }
  const auto pass = [&] {
    for (int l = 0; l < layers; ++l)
      gemm(ExecutionSpace(), Trans::yes, Trans::no, 1.0f, X[l], dY[l], 1.0f, dW[l], GemmPath::vendor);
    Kokkos::fence();
  };
  pass();  // untimed: the library's first calls
  for (auto _ : state) pass();
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * inputs * outputs * rows * layers * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_gemm_vendor_weight_gradient_layers)
    ->ArgsProduct({{512}, {512}, {32}, {1, 8, 24}})
    ->Args({256, 256, 16, 1})
    ->Args({256, 256, 16, 4})
    ->UseRealTime();

void BM_gemm_packed_weight_gradient(benchmark::State& state) {
  const PackedWeight<float> packed;
  state.SetLabel(packed_gemm_library());
  gemm_benchmark(
      state, [&](const auto& A, const auto& B, const auto& C) { packed.weight_gradient(ExecutionSpace(), A, B, C); },
      Trans::yes);
}
BENCHMARK(BM_gemm_packed_weight_gradient)->Apply(weight_gradient_shapes)->UseRealTime();

#if defined(KPIPE_HAVE_CBLAS)
void BM_cblas_sgemm(benchmark::State& state) {
  gemm_benchmark(state, [](const auto& A, const auto& B, const auto& C) {
    const int m = static_cast<int>(C.extent(0)), n = static_cast<int>(C.extent(1)), k = static_cast<int>(A.extent(1));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A.data(), k, B.data(), n, 0.0f, C.data(), n);
  });
}
BENCHMARK(BM_cblas_sgemm)->Apply(gemm_shapes)->UseRealTime();
#endif

// Elementwise kernels over 2^24 floats (64 MiB per matrix, far beyond cache).
constexpr int rows = 4096;
constexpr int cols = 4096;

// `streams` matrices of rows x cols floats cross memory per iteration.
template <class Run>
void bandwidth_benchmark(benchmark::State& state, int streams, Run&& run) {
  for (auto _ : state) {
    run();
    Kokkos::fence();
  }
  state.SetBytesProcessed(state.iterations() * streams * static_cast<std::int64_t>(rows) * cols * sizeof(float));
}

void BM_deep_copy(benchmark::State& state) {
  const auto x = random_matrix(rows, cols, 3);
  auto y = uninitialized_matrix<float>("kpipe::benchmark::y", rows, cols);
  bandwidth_benchmark(state, 2, [&] { Kokkos::deep_copy(y, x); });
}
BENCHMARK(BM_deep_copy)->UseRealTime();

void BM_add(benchmark::State& state) {
  const auto a = random_matrix(rows, cols, 3);
  const auto b = random_matrix(rows, cols, 4);
  auto c = uninitialized_matrix<float>("kpipe::benchmark::c", rows, cols);
  bandwidth_benchmark(state, 3, [&] { add(ExecutionSpace(), a, b, c); });
}
BENCHMARK(BM_add)->UseRealTime();

// Two of the rank's host threads (a team of two) pass a flag back and forth:
// the latency of moving a cache line between their cores, which every
// fork-join pays and every tensor one thread writes and the other reads. On
// a VM it is where the hypervisor puts the vCPUs: 60 ns round trips within
// one Zen 4 core complex, 330 across two, and a rank of two threads runs at
// half speed on the quickstart (docs/performance-log.md, "Where the vCPUs
// are"). items_per_second: round trips.
void BM_host_thread_round_trip(benchmark::State& state) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  if (kpipe::tensor::compat::concurrency(Host()) < 2) {
    state.SkipWithError("needs two host threads (a threaded host build)");
    return;
  }
  constexpr int trips = 100000;
  for (auto _ : state) {
    alignas(64) std::atomic<int> turn{0};
    Kokkos::parallel_for("kpipe::benchmark::round_trip", Kokkos::TeamPolicy<Host>(1, 2),
                         [&turn](const Kokkos::TeamPolicy<Host>::member_type& member) {
                           const int me = member.team_rank();
                           for (int i = 0; i < trips; ++i) {
                             while (turn.load(std::memory_order_acquire) != 2 * i + me) {
                             }
                             turn.store(2 * i + me + 1, std::memory_order_release);
                           }
                         });
  }
  state.SetItemsProcessed(state.iterations() * trips);
}
BENCHMARK(BM_host_thread_round_trip)->UseRealTime();

void BM_scale(benchmark::State& state) {
  auto x = random_matrix(rows, cols, 3);
  bandwidth_benchmark(state, 2, [&] { scale(ExecutionSpace(), 1.0f, x); });
}
BENCHMARK(BM_scale)->UseRealTime();

void BM_activation_forward(benchmark::State& state) {
  const auto f = static_cast<Activation>(state.range(0));
  const auto x = random_matrix(rows, cols, 3);
  auto y = uninitialized_matrix<float>("kpipe::benchmark::y", rows, cols);
  bandwidth_benchmark(state, 2, [&] { activation_forward(ExecutionSpace(), f, x, y); });
}
BENCHMARK(BM_activation_forward)
    ->Arg(static_cast<int>(Activation::relu))
    ->Arg(static_cast<int>(Activation::gelu))
    ->Arg(static_cast<int>(Activation::tanh))
    ->UseRealTime();

// Synthetic inputs: a microbatch of normal values (compute_bound's 32 x 512),
// the stream counter moving on each call as the steps' keys do.
void BM_fill_normal(benchmark::State& state) {
  auto x = uninitialized_matrix<float>("kpipe::benchmark::x", 32, 512);
  std::uint64_t step = 0;
  for (auto _ : state) {
    fill_normal(ExecutionSpace(), stream_key(1, step++), 0, 0.0, 1.0, x);
    Kokkos::fence();
  }
  state.counters["values/s"] =
      benchmark::Counter(static_cast<double>(x.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_fill_normal)->UseRealTime();

void BM_adamw_update(benchmark::State& state) {
  auto w = random_matrix(rows, cols, 3);
  const auto g = random_matrix(rows, cols, 4);
  auto m = zero_matrix<float>("kpipe::benchmark::m", rows, cols);
  auto v = zero_matrix<float>("kpipe::benchmark::v", rows, cols);
  const AdamWCoefficients c{1e-3, 0.9, 0.999, 1e-8, 1};
  const std::vector<ParameterUpdate<float>> parameters{{w, g, m, v}};
  // Reads w, g, m, v and writes w, m, v.
  bandwidth_benchmark(state, 7, [&] { adamw_update(ExecutionSpace(), c, parameters); });
}
BENCHMARK(BM_adamw_update)->UseRealTime();

// Attention: argument T; sequences of T tokens, 4096 tokens per call.
constexpr int attention_tokens = 4096;
constexpr int attention_heads = 4;
constexpr int attention_head_dim = 32;

// step(shape, state) runs the benchmark loop and returns the bytes its path
// saves beyond Q, K and V.
template <class Step>
void attention_benchmark(benchmark::State& state, Step&& step) {
  const int T = static_cast<int>(state.range(0));
  const AttentionShape shape{attention_tokens / T * attention_heads, T, attention_head_dim};
  const std::size_t saved = step(shape, state);
  state.counters["tokens/s"] = benchmark::Counter(attention_tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["saved_bytes"] = static_cast<double>(saved);
}

// On the projections, as the layer calls it.
void BM_attention_gemm(benchmark::State& state) {
  attention_benchmark(state, [](const AttentionShape& shape, benchmark::State& st) {
    const int dim = attention_heads * attention_head_dim;
    const auto QKV = random_matrix(attention_tokens, 3 * dim, 1);
    const auto dO = random_matrix(attention_tokens, dim, 4);
    auto O = uninitialized_matrix<float>("kpipe::benchmark::o", attention_tokens, dim);
    auto dQKV = uninitialized_matrix<float>("kpipe::benchmark::dqkv", attention_tokens, 3 * dim);
    const int rows = shape.batch_heads * shape.tokens;
    auto P = uninitialized_matrix<float>("kpipe::benchmark::p", rows, shape.tokens);
    auto dP = uninitialized_matrix<float>("kpipe::benchmark::dp", rows, shape.tokens);
    for (auto _ : st) {
      attention_forward_gemm(ExecutionSpace(), shape, QKV, P, O, GemmPath::vendor);
      attention_backward_gemm(ExecutionSpace(), shape, QKV, P, dO, dP, dQKV, GemmPath::vendor);
      Kokkos::fence();
    }
    return bytes(P);
  });
}
BENCHMARK(BM_attention_gemm)->Arg(64)->Arg(256)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

// On heads-major stacks; the layer splits and merges the heads around it.
void BM_attention_fused(benchmark::State& state) {
  attention_benchmark(state, [](const AttentionShape& shape, benchmark::State& st) {
    const int rows = shape.batch_heads * shape.tokens;
    const auto Q = random_matrix(rows, shape.head_dim, 1);
    const auto K = random_matrix(rows, shape.head_dim, 2);
    const auto V = random_matrix(rows, shape.head_dim, 3);
    const auto dO = random_matrix(rows, shape.head_dim, 4);
    auto O = uninitialized_matrix<float>("kpipe::benchmark::o", rows, shape.head_dim);
    auto dQ = uninitialized_matrix<float>("kpipe::benchmark::dq", rows, shape.head_dim);
    auto dK = uninitialized_matrix<float>("kpipe::benchmark::dk", rows, shape.head_dim);
    auto dV = uninitialized_matrix<float>("kpipe::benchmark::dv", rows, shape.head_dim);
    auto L = uninitialized_matrix<float>("kpipe::benchmark::l", rows, 1);
    auto D = uninitialized_matrix<float>("kpipe::benchmark::d", rows, 1);
    for (auto _ : st) {
      attention_forward_fused(ExecutionSpace(), shape, Q, K, V, O, L);
      attention_backward_fused(ExecutionSpace(), shape, Q, K, V, O, L, dO, D, dQ, dK, dV);
      Kokkos::fence();
    }
    return bytes(L) + bytes(O);
  });
}
BENCHMARK(BM_attention_fused)->Arg(64)->Arg(256)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

// Argument: vocabulary size; 16 sequences of 256 tokens, 256 features.
void BM_embedding_backward(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const int rows = 16, T = 256, dim = 256;
  auto ids = uninitialized_matrix<float>("kpipe::benchmark::ids", rows, T);
  Kokkos::parallel_for(
      "kpipe::benchmark::ids", Kokkos::RangePolicy<ExecutionSpace>(0, rows * T),
      KOKKOS_LAMBDA(int p) { ids(p / T, p % T) = static_cast<float>((p * 7919) % vocab); });
  const auto dY = random_matrix(rows, T * dim, 5);
  auto dtoken = zero_matrix<float>("kpipe::benchmark::dtoken", vocab, dim);
  auto dposition = zero_matrix<float>("kpipe::benchmark::dposition", T, dim);
  for (auto _ : state) {
    embedding_backward(ExecutionSpace(), ids, dY, dtoken, dposition);
    Kokkos::fence();
  }
  state.counters["tokens/s"] = benchmark::Counter(rows * T, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_embedding_backward)->Arg(1024)->Arg(50257)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
