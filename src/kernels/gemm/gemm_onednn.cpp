// The packed backend: oneDNN matmul. One primitive per product shape, created
// with the weights' layout left to oneDNN (format_tag::any) so it picks the
// blocked layout its kernel streams best; W (forward) and Wᵀ (input gradient)
// are each reordered into their layout on first use after an invalidate(),
// Wᵀ straight from W's row-major storage read through transposed strides. The
// bias is the primitive's bias argument (added once per output, no extra pass
// over Y). The weight gradient Xᵀ dY, with nothing to pack, is a matmul on
// the row-major operands, Xᵀ read through transposed strides (onednn_gemm,
// also the float32 vendor path where OpenBLAS' kernel is slower, gemm.cpp). Never
// dnnl::sgemm, which corrupts the heap when a signal arrives during the call.
// A primitive of fixed shape and thread count computes every output in a
// fixed order: deterministic.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "gemm_backends.hpp"
#include "kpipe/core/error.hpp"

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

namespace kpipe::kernels::detail {

namespace {

using dnnl::memory;

// Sets, on the calling thread, how many OpenMP threads a primitive takes when
// it is made (it keeps that count) and runs. One, but where a whole product
// runs on a threaded rank's threads (onednn_gemm's `threads`, gemm.cpp): the
// ranks fill the cores, and oneDNN may split K over its threads, which makes
// the sum order depend on how many it gets. Set on every call: inside Kokkos'
// parallel region a worker's setting lasts only that region, and a primitive
// made there with the team's two threads ran its halves one after the other,
// and the quickstart on 1 rank x 2 threads ran far slower than with a primitive
// on one thread each.
void on_threads(int threads) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(threads);
#else
  static_cast<void>(threads);
#endif
}
void on_one_thread() { on_threads(1); }

// One engine per process, made on first use. Everything that makes a
// primitive asks for it, and so runs on_one_thread first.
const dnnl::engine& engine() {
  on_one_thread();
  static const dnnl::engine shared(dnnl::engine::kind::cpu, 0);
  return shared;
}

// The engine, for a primitive made now to run on `threads` threads.
const dnnl::engine& engine_on(int threads) {
  const dnnl::engine& cpu = engine();
  on_threads(threads);
  return cpu;
}

// A stream per thread: Kokkos' threads may run column slices of one product
// at once (gemm.cpp), and a stream is not to be shared between threads.
dnnl::stream& stream() {
  thread_local dnnl::stream own(engine());
  return own;
}

// A row-major rows x cols matrix whose rows lie `ld` elements apart.
memory::desc row_major(int rows, int cols, int ld, memory::data_type type = memory::data_type::f32) {
  return memory::desc({rows, cols}, type, memory::dims{ld, 1});
}

// oneDNN's name for the element type of A and B.
template <class In>
constexpr memory::data_type data_type() {
  if constexpr (std::is_same_v<In, tensor::BFloat16>) return memory::data_type::bf16;
  if constexpr (std::is_same_v<In, tensor::Half>) return memory::data_type::f16;
  return memory::data_type::f32;
}

// op(X), rows x cols, as it lies in memory: X row-major with rows `ld`
// elements apart, or Xᵀ of X's row-major cols x rows.
memory::desc operand(int rows, int cols, int ld, Trans trans, memory::data_type type) {
  return trans == Trans::no ? row_major(rows, cols, ld, type) : memory::desc({rows, cols}, type, memory::dims{1, ld});
}

// A matmul primitive with memory objects for its operands and the argument
// map that names them: a call points them at its buffers (set_data_handle),
// allocating nothing of its own. The packed path puts its reordered weights in the map.
struct BoundMatmul {
  BoundMatmul(const dnnl::matmul::primitive_desc& made, bool with_bias)
      : pd(made),
        primitive(made),
        src(made.src_desc(), engine(), nullptr),
        weights(made.weights_desc(), engine(), nullptr),
        dst(made.dst_desc(), engine(), nullptr),
        args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}} {
    if (with_bias) {
      bias = memory(made.bias_desc(), engine(), nullptr);
      args.emplace(DNNL_ARG_BIAS, bias);
    }
    c_args.reserve(4);
  }
  // Runs the primitive on `threads` threads, the count it was made for, and
  // leaves the calling thread at one.
  void run(int threads) {
    dnnl::stream& own = stream();
    on_threads(threads);
    // oneDNN's C call on an argument array kept here: the C++ execute()
    // builds a new vector of them on every call.
    c_args.clear();
    for (const auto& [kind, operand] : args) c_args.push_back({kind, operand.get()});
    dnnl::error::wrap_c_api(
        dnnl_primitive_execute(primitive.get(), own.get(), static_cast<int>(c_args.size()), c_args.data()),
        "could not execute a oneDNN matmul");
    own.wait();
    on_one_thread();
  }
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  memory src, weights, dst, bias;
  std::unordered_map<int, memory> args;
  std::vector<dnnl_exec_arg_t> c_args;
};

class OnednnPacked final : public PackedBackend<float> {
 public:
  void invalidate() override { ++version_; }

  void product(const GemmOperands<float>& op, const float* bias) override { multiply(op, bias); }
  bool product_bf16(const GemmOperands<float, tensor::BFloat16>& op, const float* bias) override {
    multiply(op, bias);
    return true;
  }

  void gemm(const GemmOperands<float>& op) override { onednn_gemm(op, onednn_threads(op.n)); }

 private:
  struct Packed {
    Trans trans;  // a square W and its transpose may share a layout, never a copy
    memory::desc layout;
    memory copy;
    long version = 0;
  };
  // Operand type, W or Wᵀ, with or without bias, m, n, k, the leading
  // dimensions of X, W and Y, and the threads it runs on.
  using Shape = std::tuple<memory::data_type, Trans, bool, int, int, int, int, int, int, int>;

  // op.c = op.a op(W) (+ bias), W from its packed copy in the operands' type.
  template <class In>
  void multiply(const GemmOperands<float, In>& op, const float* bias) {
    try {
      const int threads = onednn_threads(op.n);
      BoundMatmul& product = product_for(op, bias != nullptr, threads);
      product.args[DNNL_ARG_WEIGHTS] = packed(product.pd.weights_desc(), op);
      // oneDNN wraps the caller's buffers; it never writes an input.
      product.src.set_data_handle(const_cast<In*>(op.a));
      product.dst.set_data_handle(op.c);
      if (bias) product.bias.set_data_handle(const_cast<float*>(bias));
      product.run(threads);
    } catch (const dnnl::error& e) {
      throw runtime_error(fmt::format("oneDNN matmul of {}x{} by {}x{} failed: {} (status {})", op.m, op.k, op.k, op.n,
                                      e.what(), static_cast<int>(e.status)));
    }
  }

  template <class In>
  BoundMatmul& product_for(const GemmOperands<float, In>& op, bool with_bias, int threads) {
    const Shape shape{data_type<In>(), op.trans_b, with_bias, op.m, op.n, op.k, op.lda, op.ldb, op.ldc, threads};
    auto found = products_.find(shape);
    if (found == products_.end()) {
      const memory::desc any({op.k, op.n}, data_type<In>(), memory::format_tag::any);
      const memory::desc src = row_major(op.m, op.k, op.lda, data_type<In>()), dst = row_major(op.m, op.n, op.ldc);
      const memory::desc bias({1, op.n}, memory::data_type::f32, memory::format_tag::ab);
      const auto desc = with_bias ? dnnl::matmul::desc(src, any, bias, dst) : dnnl::matmul::desc(src, any, dst);
      found = products_.emplace(shape, BoundMatmul(dnnl::matmul::primitive_desc(desc, engine_on(threads)), with_bias))
                  .first;
    }
    return found->second;
  }

  // op(W) in `layout`, reordered from op.b when W changed since the last
  // reorder. Products of different m may want different layouts: one copy each.
  template <class In>
  const memory& packed(const memory::desc& layout, const GemmOperands<float, In>& op) {
    auto found = std::find_if(packed_.begin(), packed_.end(),
                              [&](const Packed& p) { return p.trans == op.trans_b && p.layout == layout; });
    if (found == packed_.end()) {
      found = packed_.insert(packed_.end(), {op.trans_b, layout, memory(layout, engine())});
    }
    Packed& entry = *found;
    if (entry.version != version_) {
      memory source(operand(op.k, op.n, op.ldb, op.trans_b, data_type<In>()), engine(), const_cast<In*>(op.b));
      dnnl::reorder(source, entry.copy).execute(stream(), source, entry.copy);
      stream().wait();
      entry.version = version_;
    }
    return entry.copy;
  }

  std::map<Shape, BoundMatmul> products_;
  std::vector<Packed> packed_;  // one per op(W) and layout asked for, compared by its oneDNN description
  long version_ = 1;            // starts ahead of every copy: the first use packs
};

}  // namespace

std::unique_ptr<PackedBackend<float>> make_onednn_packed() { return std::make_unique<OnednnPacked>(); }

bool onednn_blocks_weights() {
  // Asked once, at a Linear's shape (32 rows by 1024 x 1024): oneDNN 2.6 has
  // blocked-weights matmul kernels (brgemm) only for AVX-512 and newer; on an
  // AVX2 CPU it keeps W row-major and runs a plain GEMM slower than OpenBLAS.
  static const bool blocks = [] {
    constexpr int rows = 32, k = 1024, n = 1024;
    const memory::desc any({k, n}, memory::data_type::f32, memory::format_tag::any);
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(row_major(rows, k, k), any, row_major(rows, n, n)),
                                            engine());
      return pd.weights_desc() != row_major(k, n, n);
    } catch (const dnnl::error&) {
      return false;  // no matmul for the shape at all: the vendor path
    }
  }();
  return blocks;
}

bool onednn_shares_host_threads() {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP && defined(KOKKOS_ENABLE_OPENMP)
  return std::is_same_v<Kokkos::DefaultHostExecutionSpace, Kokkos::OpenMP>;
#else
  return false;
#endif
}

VectorIsa onednn_vector_isa() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa >= dnnl::cpu_isa::avx512_core) return VectorIsa::avx512;
  return isa >= dnnl::cpu_isa::avx2 ? VectorIsa::avx2 : VectorIsa::pre_avx2;
}

namespace {

// op(X), batch x rows x cols, as it lies in memory: matrix i at i·stride,
// each row-major with rows `ld` apart or transposed.
memory::desc batched_operand(int batch, long long stride, int rows, int cols, int ld, Trans trans,
                             memory::data_type type) {
  return memory::desc({batch, rows, cols}, type,
                      trans == Trans::no ? memory::dims{stride, ld, 1} : memory::dims{stride, 1, ld});
}

// A matmul of one shape on row-major operands: op(A) and op(B) of In, C
// float32 = alpha op(A) op(B) + beta C (alpha as the output scale, beta as a
// sum post-op); with a batch of more than one, a batched matmul over
// matrices the strides apart; run on `threads` OpenMP threads.
template <class In>
dnnl::matmul::primitive_desc plain_matmul(const BatchedGemmOperands<float, In>& batched, int threads = 1) {
  const GemmOperands<float, In>& op = batched.first;
  dnnl::primitive_attr attr;
  if (op.alpha != 1.0f) attr.set_output_scales(0, {op.alpha});
  if (op.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(op.beta);
    attr.set_post_ops(sum);
  }
  if (batched.batch == 1) {
    const dnnl::matmul::desc desc(operand(op.m, op.k, op.lda, op.trans_a, data_type<In>()),
                                  operand(op.k, op.n, op.ldb, op.trans_b, data_type<In>()),
                                  row_major(op.m, op.n, op.ldc));
    return dnnl::matmul::primitive_desc(desc, attr, engine_on(threads));
  }
  const int n = batched.batch;
  const dnnl::matmul::desc desc(
      batched_operand(n, batched.stride_a, op.m, op.k, op.lda, op.trans_a, data_type<In>()),
      batched_operand(n, batched.stride_b, op.k, op.n, op.ldb, op.trans_b, data_type<In>()),
      batched_operand(n, batched.stride_c, op.m, op.n, op.ldc, Trans::no, memory::data_type::f32));
  return dnnl::matmul::primitive_desc(desc, attr, engine_on(threads));
}

template <class In>
dnnl::matmul::primitive_desc plain_matmul(const GemmOperands<float, In>& op) {
  return plain_matmul(BatchedGemmOperands<float, In>{op, 1, 0, 0, 0});
}

}  // namespace

template <class In>
void onednn_gemm_batched(const BatchedGemmOperands<float, In>& batched, int threads) {
  const GemmOperands<float, In>& op = batched.first;
  // One primitive per shape, batch, strides, transpositions, leading
  // dimensions, scalars and thread count, per calling thread: Kokkos' threads
  // may run column slices of one product at once (gemm.cpp), often of one shape. Each keeps memory
  // objects for its operands and the argument map that names them, so a call
  // only points them at the caller's buffers: no allocation, no lock.
  using Shape =
      std::tuple<Trans, Trans, int, int, int, int, int, int, float, float, int, long long, long long, long long, int>;
  thread_local std::map<Shape, BoundMatmul> matmuls;
  if (op.k == 0) {
    // No products (oneDNN divides by k): C = beta C, and beta = 0 does not read C, as in BLAS.
    for (int block = 0; block < batched.batch; ++block) {
      for (int i = 0; i < op.m; ++i) {
        float* row = op.c + block * batched.stride_c + static_cast<std::ptrdiff_t>(i) * op.ldc;
        for (int j = 0; j < op.n; ++j) row[j] = op.beta == 0.0f ? 0.0f : op.beta * row[j];
      }
    }
    return;
  }
  try {
    const Shape shape{op.trans_a,       op.trans_b,       op.m,     op.n,    op.k,          op.lda,
                      op.ldb,           op.ldc,           op.alpha, op.beta, batched.batch, batched.stride_a,
                      batched.stride_b, batched.stride_c, threads};
    auto found = matmuls.find(shape);
    if (found == matmuls.end()) {
      found = matmuls.emplace(shape, BoundMatmul(plain_matmul(batched, threads), false)).first;
    }
    BoundMatmul& matmul = found->second;
    // oneDNN wraps the caller's buffers; it never writes an input.
    matmul.src.set_data_handle(const_cast<In*>(op.a));
    matmul.weights.set_data_handle(const_cast<In*>(op.b));
    matmul.dst.set_data_handle(op.c);
    matmul.run(threads);
  } catch (const dnnl::error& e) {
    throw runtime_error(fmt::format("oneDNN matmul of {} x {}x{} by {}x{} failed: {} (status {})", batched.batch, op.m,
                                    op.k, op.k, op.n, e.what(), static_cast<int>(e.status)));
  }
}

template <class In>
void onednn_gemm(const GemmOperands<float, In>& op, int threads) {
  onednn_gemm_batched(BatchedGemmOperands<float, In>{op, 1, 0, 0, 0}, threads);
}

template void onednn_gemm<float>(const GemmOperands<float>&, int);
template void onednn_gemm<tensor::BFloat16>(const GemmOperands<float, tensor::BFloat16>&, int);
template void onednn_gemm<tensor::Half>(const GemmOperands<float, tensor::Half>&, int);
template void onednn_gemm_batched<tensor::BFloat16>(const BatchedGemmOperands<float, tensor::BFloat16>&, int);
template void onednn_gemm_batched<tensor::Half>(const BatchedGemmOperands<float, tensor::Half>&, int);

template <class In>
std::string onednn_kernel() {
  // Asked once per type, at a Linear's shape (32 rows by 1024 x 1024). oneDNN
  // 2.6 has bf16 matmul kernels (brgemm) for AVX-512 and newer CPUs, on AMX
  // tiles or AVX512-BF16 where the CPU has them; elsewhere only its reference
  // loops. It has no f16 matmul on CPUs at all (3.0 added AVX512-FP16 ones).
  static const std::string kernel = [] {
    constexpr int rows = 32, k = 1024, n = 1024;
    const GemmOperands<float, In> probe{Trans::no, Trans::no, rows, n,    k,       1.0f, nullptr,
                                        k,         nullptr,   n,    0.0f, nullptr, n};
    try {
      const std::string name = plain_matmul(probe).impl_info_str();
      return name.rfind("ref", 0) == 0 ? std::string() : name;
    } catch (const dnnl::error&) {
      return std::string();  // no matmul of this type at all: widen for the vendor GEMM
    }
  }();
  return kernel;
}

template std::string onednn_kernel<tensor::BFloat16>();
template std::string onednn_kernel<tensor::Half>();

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

}  // namespace kpipe::kernels::detail
