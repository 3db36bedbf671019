#include "kpipe/kernels/elementwise.hpp"

#include <fmt/format.h>

#include <vector>

#include "columns.hpp"
#include "flat.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/detail/fast_math.hpp"
#include "kpipe/tensor/compat.hpp"
#include "rows.hpp"
#include "stored.hpp"

namespace kpipe::kernels {

namespace detail {
void throw_not_contiguous(const std::string& label) {
  throw input_error(fmt::format("matrix \"{}\" is a strided view; elementwise kernels need contiguous rows", label));
}
}  // namespace detail

namespace {

using Range = Kokkos::RangePolicy<tensor::ExecutionSpace>;

// Host backends want contiguous inner loops, GPUs neighbouring threads on neighbouring memory.
using detail::host_memory;

// Elements per host_loop call: large enough to amortise the call, small enough to spread over threads.
constexpr std::int64_t grain = 4096;

// One struct per activation, so the kernels are compiled once per function
// with no branch inside the loop. fast_math keeps the loops free of libm calls
// for float, so they vectorize, on the host in every ISA clone (host_loops.hpp).
struct Gelu {
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar value(Scalar x) {
    return Scalar(0.5) * x * (Scalar(1) + fast_math::erf(x * Scalar(0.70710678118654752440)));
  }
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar derivative(Scalar x) {
    const Scalar cdf = Scalar(0.5) * (Scalar(1) + fast_math::erf(x * Scalar(0.70710678118654752440)));
    return cdf + x * fast_math::normal_pdf(x);
  }
};
// GPT-2's GELU (Hugging Face's gelu_new): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanh {
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar inner(Scalar x) {
    return Scalar(0.79788456080286535588) * (x + Scalar(0.044715) * x * x * x);
  }
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar value(Scalar x) {
    return Scalar(0.5) * x * (Scalar(1) + fast_math::tanh(inner(x)));
  }
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar derivative(Scalar x) {
    const Scalar u = inner(x);
    const Scalar slope = Scalar(0.79788456080286535588) * (Scalar(1) + Scalar(3 * 0.044715) * x * x);
    return Scalar(0.5) * (Scalar(1) + fast_math::tanh(u)) + Scalar(0.5) * x * fast_math::sech_squared(u) * slope;
  }
};
struct Relu {
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar value(Scalar x) {
    return x > Scalar(0) ? x : Scalar(0);
  }
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar derivative(Scalar x) {
    return x > Scalar(0) ? Scalar(1) : Scalar(0);
  }
};
struct Tanh {
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar value(Scalar x) {
    return fast_math::tanh(x);
  }
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION static Scalar derivative(Scalar x) {
    return fast_math::sech_squared(x);
  }
};

template <class F, class Scalar>
void forward_kernel(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                    const tensor::Matrix<Scalar>& Y) {
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  detail::for_each(
      space, "kpipe::kernels::activation_forward", static_cast<std::int64_t>(y.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { y(e) = F::value(x(e)); });
}

// Y = f(X) and D = f'(X): the backward then needs no f, and GELU's erf is
// computed once per element instead of once in each pass.
template <class F, class Scalar, class Stored>
void forward_and_derivative_kernel(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                                   const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Stored>& D) {
  const auto x = detail::flat(X);
  const auto y = detail::flat(Y);
  const auto d = detail::flat(D);
  detail::for_each(
      space, "kpipe::kernels::activation_forward", static_cast<std::int64_t>(y.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) {
        const Scalar value = x(e);  // read before Y, which may alias X, is written
        y(e) = F::value(value);
        detail::store(F::derivative(value), d(e));
      });
}

// Calls run(F{}) with the struct F of activation f.
template <class Run>
void with_activation(Activation f, Run&& run) {
  switch (f) {
    case Activation::gelu:
      return run(Gelu{});
    case Activation::gelu_tanh:
      return run(GeluTanh{});
    case Activation::relu:
      return run(Relu{});
    case Activation::tanh:
      return run(Tanh{});
  }
}

// The element operations of combine.
struct Sum {
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION Scalar operator()(Scalar a, Scalar b) const {
    return a + b;
  }
};
struct Product {
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION Scalar operator()(Scalar a, Scalar b) const {
    return a * b;
  }
};

// C = op(A, B) element by element, on matrices of one shape (checked by the
// caller); A may be stored in a reduced type, widened as it is read.
template <class Scalar, class Op, class StoredA = Scalar>
void combine(const tensor::ExecutionSpace& space, const char* label, const tensor::ConstMatrix<StoredA>& A,
             const tensor::ConstMatrix<Scalar>& B, const tensor::Matrix<Scalar>& C, Op op) {
  const auto a = detail::flat(A);
  const auto b = detail::flat(B);
  const auto c = detail::flat(C);
  detail::for_each(
      space, label, static_cast<std::int64_t>(c.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { c(e) = op(detail::load(a(e)), b(e)); });
}

// x^2 in double, in which squared_norm accumulates.
template <class Scalar>
KOKKOS_INLINE_FUNCTION double in_double_squared(Scalar x) {
  const double value = x;
  return value * value;
}

}  // namespace

template <class Scalar>
void activation_forward(const tensor::ExecutionSpace& space, Activation f,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X, const tensor::Matrix<Scalar>& Y) {
  tensor::require_shape("activation output", Y, X.extent(0), X.extent(1));
  with_activation(f, [&](auto op) { forward_kernel<decltype(op), Scalar>(space, X, Y); });
}

template <class Scalar, class Stored>
void activation_forward(const tensor::ExecutionSpace& space, Activation f,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X, const tensor::Matrix<Scalar>& Y,
                        const tensor::Matrix<Stored>& D) {
  tensor::require_shape("activation output", Y, X.extent(0), X.extent(1));
  tensor::require_shape("activation derivative", D, X.extent(0), X.extent(1));
  with_activation(f, [&](auto op) { forward_and_derivative_kernel<decltype(op), Scalar>(space, X, Y, D); });
}

template <class Scalar, class Stored>
void activation_backward(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Stored>>& D,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY, const tensor::Matrix<Scalar>& dX) {
  tensor::require_shape("activation output gradient", dY, D.extent(0), D.extent(1));
  tensor::require_shape("activation input gradient", dX, D.extent(0), D.extent(1));
  combine<Scalar>(space, "kpipe::kernels::activation_backward", D, dY, dX, Product{});
}

template <class Scalar>
void add(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& A,
         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& B, const tensor::Matrix<Scalar>& C) {
  tensor::require_shape("second summand", B, A.extent(0), A.extent(1));
  tensor::require_shape("sum", C, A.extent(0), A.extent(1));
  combine(space, "kpipe::kernels::add", A, B, C, Sum{});
}

template <class Scalar>
void add_row(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& row,
             const tensor::Matrix<Scalar>& Y) {
  tensor::require_shape("bias", row, 1, Y.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(Y.extent(0));
  const std::int64_t cols = static_cast<std::int64_t>(Y.extent(1));
  if constexpr (host_memory) {
    // A thread per row and a contiguous inner loop, which vectorises; about grain elements per host_loop.
    detail::for_each(
        space, "kpipe::kernels::add_row", rows, 1 + grain / (cols + 1), KOKKOS_LAMBDA(std::int64_t i) {
          Scalar* y = &Y(i, 0);
          const Scalar* r = &row(0, 0);
          for (std::int64_t j = 0; j < cols; ++j) y[j] += r[j];
        });
  } else {
    Kokkos::parallel_for(
        tensor::compat::kernel_label("kpipe::kernels::add_row"),
        Kokkos::MDRangePolicy<tensor::ExecutionSpace, Kokkos::Rank<2>>(space, {0, 0}, {rows, cols}),
        KOKKOS_LAMBDA(std::int64_t i, std::int64_t j) { Y(i, j) += row(0, j); });
  }
}

template <class Scalar>
void add_column_sums(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                     const tensor::Matrix<Scalar>& sums) {
  tensor::require_shape("column sums", sums, 1, X.extent(1));
  constexpr int block = detail::column_block;
  detail::for_each_block<block>(
      space, "kpipe::kernels::add_column_sums", static_cast<int>(X.extent(1)),
      KOKKOS_LAMBDA(int first, int width) { detail::add_block_column_sums<block>(X, sums, first, width); });
}

template <class Scalar>
void scale(const tensor::ExecutionSpace& space, tensor::identity_t<Scalar> factor, const tensor::Matrix<Scalar>& X) {
  const auto x = detail::flat(X);
  detail::for_each(
      space, "kpipe::kernels::scale", static_cast<std::int64_t>(x.extent(0)), grain,
      KOKKOS_LAMBDA(std::int64_t e) { x(e) *= factor; });
}

template <class Scalar>
double squared_norm(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X) {
  const auto x = detail::flat(X);
  const auto n = static_cast<std::int64_t>(x.extent(0));
  double sum = 0;
  if constexpr (host_memory) {
    // One running sum is a chain of dependent additions. Instead, chunks of
    // grain elements, each summed in rows.hpp's lanes (which vectorise), and
    // the chunks' sums added in order: the order depends on n only, not on
    // threads or the CPU.
    std::vector<double> chunk_sums(static_cast<std::size_t>((n + grain - 1) / grain));
    double* const sums = chunk_sums.data();
    detail::for_each(
        space, "kpipe::kernels::squared_norm", static_cast<std::int64_t>(chunk_sums.size()), 1,
        KOKKOS_LAMBDA(std::int64_t chunk) {
          const std::int64_t first = chunk * grain;
          const int length = static_cast<int>(n - first < grain ? n - first : grain);
          sums[chunk] =
              detail::row_sum(detail::HostRow{}, length, [&](int j) { return in_double_squared(x(first + j)); });
        });
    space.fence();
    for (const double chunk_sum : chunk_sums) sum += chunk_sum;
  } else {
    Kokkos::parallel_reduce(
        tensor::compat::kernel_label("kpipe::kernels::squared_norm"), Range(space, 0, n),
        KOKKOS_LAMBDA(std::int64_t e, double& partial) { partial += in_double_squared(x(e)); }, sum);
  }
  return sum;
}

#define KPIPE_INSTANTIATE(Scalar)                                                                               \
  template void activation_forward<Scalar>(const tensor::ExecutionSpace&, Activation,                           \
                                           const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&);  \
  template void activation_forward<Scalar>(const tensor::ExecutionSpace&, Activation,                           \
                                           const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&,   \
                                           const tensor::Matrix<Scalar>&);                                      \
  template void activation_backward<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,  \
                                            const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&); \
  template void add<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,                  \
                            const tensor::ConstMatrix<Scalar>&, const tensor::Matrix<Scalar>&);                 \
  template void add_row<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,              \
                                const tensor::Matrix<Scalar>&);                                                 \
  template void add_column_sums<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&,      \
                                        const tensor::Matrix<Scalar>&);                                         \
  template void scale<Scalar>(const tensor::ExecutionSpace&, Scalar, const tensor::Matrix<Scalar>&);            \
  template double squared_norm<Scalar>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

// compute.precision = bf16 and fp16: a float activation keeps its derivative reduced.
#define KPIPE_INSTANTIATE_STORED(Stored)                                                                              \
  template void activation_forward<float, Stored>(const tensor::ExecutionSpace&, Activation,                          \
                                                  const tensor::ConstMatrix<float>&, const tensor::Matrix<float>&,    \
                                                  const tensor::Matrix<Stored>&);                                     \
  template void activation_backward<float, Stored>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<Stored>&, \
                                                   const tensor::ConstMatrix<float>&, const tensor::Matrix<float>&);
KPIPE_INSTANTIATE_STORED(tensor::BFloat16)
KPIPE_INSTANTIATE_STORED(tensor::Half)
#undef KPIPE_INSTANTIATE_STORED

}  // namespace kpipe::kernels
