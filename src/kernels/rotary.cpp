#include "kpipe/kernels/rotary.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "kpipe/core/error.hpp"
#include "rows.hpp"

// A row per position (rows.hpp); each head's rotation reads and writes its
// hd features in two contiguous halves.

namespace kpipe::kernels {

namespace {

void check(const RotaryShape& shape, std::size_t rows, std::size_t grouped, std::size_t output, std::size_t angles) {
  if (shape.head_dim < 2 || shape.head_dim % 2 != 0 || shape.groups < 1 || shape.per_group < 1 || shape.tokens < 1 ||
      shape.first_query < 0 || shape.queries < 0 ||
      shape.first_query + shape.heads() > shape.groups * shape.per_group ||
      grouped != static_cast<std::size_t>(shape.grouped_width()) ||
      output != static_cast<std::size_t>(shape.output_width()) ||
      angles != static_cast<std::size_t>(shape.head_dim / 2)) {
    throw input_error(fmt::format(
        "rotary QKV of {} groups of {} query heads of {} features, {} heads from {}: {} grouped and {} output "
        "columns, {} angles per position do not fit ({} rows)",
        shape.groups, shape.per_group, shape.head_dim, shape.heads(), shape.first_query, grouped, output, angles,
        rows));
  }
}

}  // namespace

template <class Scalar>
void rotary_tables(const tensor::ExecutionSpace& space, int head_dim, double theta, const tensor::Matrix<Scalar>& cos,
                   const tensor::Matrix<Scalar>& sin) {
  const int positions = static_cast<int>(cos.extent(0));
  const int half = head_dim / 2;
  tensor::require_shape("rotary cos", cos, positions, half);
  tensor::require_shape("rotary sin", sin, positions, half);
  std::vector<Scalar> c(static_cast<std::size_t>(positions) * half), s(c.size());
  for (int p = 0; p < positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(theta, -2.0 * i / head_dim);
      c[static_cast<std::size_t>(p) * half + i] = static_cast<Scalar>(std::cos(angle));
      s[static_cast<std::size_t>(p) * half + i] = static_cast<Scalar>(std::sin(angle));
    }
  }
  tensor::from_host<Scalar>(c, cos);
  tensor::from_host<Scalar>(s, sin);
  space.fence();
}

template <class Scalar>
void rotary_qkv_forward(const tensor::ExecutionSpace& space, const RotaryShape& shape,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& X,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& cos,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& sin,
                        const Kokkos::View<const int*, tensor::MemorySpace>& positions,
                        const tensor::Matrix<Scalar>& Y) {
  const int rows = static_cast<int>(X.extent(0));
  check(shape, X.extent(0), X.extent(1), Y.extent(1), cos.extent(1));
  tensor::require_shape("rotary QKV output", Y, rows, shape.output_width());
  const int tokens = shape.tokens, per_group = shape.per_group, hd = shape.head_dim;
  const int half = hd / 2, heads = shape.heads(), first = shape.first_query;
  const bool given = positions.extent(0) != 0;
  detail::for_each_row(
      space, "kpipe::kernels::rotary_qkv_forward", rows, KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int p = given ? positions(r) : r % tokens;
        const Scalar* const c = &cos(p, 0);
        const Scalar* const s = &sin(p, 0);
        // x rotated into y: (a, b) -> (a cos - b sin, b cos + a sin).
        const auto rotate = [&](const Scalar* x, Scalar* y) {
          detail::row_for(row, half, [&](int i) {
            y[i] = x[i] * c[i] - x[i + half] * s[i];
            y[i + half] = x[i + half] * c[i] + x[i] * s[i];
          });
        };
        for (int q = 0; q < heads; ++q) {
          const int g = (first + q) / per_group, j = (first + q) % per_group;
          const Scalar* const block = &X(r, g * (per_group + 2) * hd);
          rotate(block + j * hd, &Y(r, q * hd));
          rotate(block + per_group * hd, &Y(r, (heads + q) * hd));
          const Scalar* const v = block + (per_group + 1) * hd;
          Scalar* const out = &Y(r, (2 * heads + q) * hd);
          detail::row_for(row, hd, [&](int i) { out[i] = v[i]; });
        }
      });
}

template <class Scalar>
void rotary_qkv_backward(const tensor::ExecutionSpace& space, const RotaryShape& shape,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& dY,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& cos,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& sin,
                         const Kokkos::View<const int*, tensor::MemorySpace>& positions,
                         const tensor::Matrix<Scalar>& dX) {
  const int rows = static_cast<int>(dY.extent(0));
  check(shape, dX.extent(0), dX.extent(1), dY.extent(1), cos.extent(1));
  tensor::require_shape("rotary QKV input gradient", dX, rows, shape.grouped_width());
  const int tokens = shape.tokens, groups = shape.groups, per_group = shape.per_group, hd = shape.head_dim;
  const int half = hd / 2, heads = shape.heads(), first = shape.first_query;
  const bool given = positions.extent(0) != 0;
  detail::for_each_row(
      space, "kpipe::kernels::rotary_qkv_backward", rows, KOKKOS_LAMBDA(const detail::Row& row, int r) {
        const int p = given ? positions(r) : r % tokens;
        const Scalar* const c = &cos(p, 0);
        const Scalar* const s = &sin(p, 0);
        // The transposed rotation: (a, b) -> (a cos + b sin, b cos - a sin).
        const auto rotate_back = [&](Scalar* x) {
          detail::row_for(row, half, [&](int i) {
            const Scalar a = x[i], b = x[i + half];
            x[i] = a * c[i] + b * s[i];
            x[i + half] = b * c[i] - a * s[i];
          });
        };
        for (int g = 0; g < groups; ++g) {
          Scalar* const block = &dX(r, g * (per_group + 2) * hd);
          Scalar* const dk = block + per_group * hd;
          Scalar* const dv = block + (per_group + 1) * hd;
          detail::row_for(row, hd, [&](int i) { dk[i] = dv[i] = Scalar(0); });
          for (int j = 0; j < per_group; ++j) {
            // q: the query head's column in the output, if the output holds it.
            const int q = g * per_group + j - first;
            Scalar* const out = block + j * hd;
            if (q < 0 || q >= heads) {
              detail::row_for(row, hd, [&](int i) { out[i] = Scalar(0); });
              continue;
            }
            const Scalar* const dq = &dY(r, q * hd);
            const Scalar* const dk_q = &dY(r, (heads + q) * hd);
            const Scalar* const dv_q = &dY(r, (2 * heads + q) * hd);
            detail::row_for(row, hd, [&](int i) {
              out[i] = dq[i];
              dk[i] += dk_q[i];
              dv[i] += dv_q[i];
            });
            rotate_back(out);
          }
          rotate_back(dk);
        }
      });
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                \
  template void rotary_tables<Scalar>(const tensor::ExecutionSpace&, int, double, const tensor::Matrix<Scalar>&, \
                                      const tensor::Matrix<Scalar>&);                                            \
  template void rotary_qkv_forward<Scalar>(                                                                      \
      const tensor::ExecutionSpace&, const RotaryShape&, const tensor::ConstMatrix<Scalar>&,                     \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,                                    \
      const Kokkos::View<const int*, tensor::MemorySpace>&, const tensor::Matrix<Scalar>&);                      \
  template void rotary_qkv_backward<Scalar>(                                                                     \
      const tensor::ExecutionSpace&, const RotaryShape&, const tensor::ConstMatrix<Scalar>&,                     \
      const tensor::ConstMatrix<Scalar>&, const tensor::ConstMatrix<Scalar>&,                                    \
      const Kokkos::View<const int*, tensor::MemorySpace>&, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::kernels
