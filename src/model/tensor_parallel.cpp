#include "kpipe/model/tensor_parallel.hpp"

#include <fmt/format.h>

#include <utility>

#include "kpipe/core/error.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::model {

namespace {

std::string describe(const Shard& shard) {
  return fmt::format("shard {} of {} along axis {} ({} block{})", shard.index, shard.count, shard.axis, shard.blocks,
                     shard.blocks == 1 ? "" : "s");
}

}  // namespace

template <class Scalar>
void copy_shard(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& whole, const Shard& shard,
                const tensor::Matrix<Scalar>& local) {
  const int axis = shard.axis;
  if (whole.extent(axis) != local.extent(axis) * shard.count || whole.extent(1 - axis) != local.extent(1 - axis) ||
      local.extent(axis) % shard.blocks != 0) {
    throw runtime_error(fmt::format("{} of a {} x {} tensor cannot be a {} x {} tensor", describe(shard),
                                    whole.extent(0), whole.extent(1), local.extent(0), local.extent(1)));
  }
  // Block b of the shard is [b·w, (b+1)·w) of local and slice `index` of block b of whole.
  const std::size_t w = local.extent(axis) / shard.blocks;
  for (int b = 0; b < shard.blocks; ++b) {
    const std::pair<std::size_t, std::size_t> mine{b * w, (b + 1) * w};
    const std::size_t from = (b * shard.count + shard.index) * w;
    const std::pair<std::size_t, std::size_t> slice{from, from + w};
    if (axis == 0) {
      Kokkos::deep_copy(space, Kokkos::subview(local, mine, Kokkos::ALL), Kokkos::subview(whole, slice, Kokkos::ALL));
    } else {
      Kokkos::deep_copy(space, Kokkos::subview(local, Kokkos::ALL, mine), Kokkos::subview(whole, Kokkos::ALL, slice));
    }
  }
}

template <class Scalar>
tensor::Matrix<Scalar> gather_shards(tensor::ExecContext& exec, Collectives& collectives, const Shard& shard,
                                     const tensor::ConstMatrix<Scalar>& local) {
  const int rows = local.extent_int(0), columns = local.extent_int(1), t = shard.count;
  const auto mine = tensor::uninitialized_matrix<Scalar>("kpipe::model::gather_shards::local", rows, columns);
  Kokkos::deep_copy(exec.space(), mine, local);
  if (shard.full()) return mine;
  const auto stacked = tensor::uninitialized_matrix<Scalar>("kpipe::model::gather_shards", rows * t, columns);
  collectives.all_gather(Group::tensor, mine, stacked);  // shards stacked along axis 0 in rank order
  // Element x of rank r's shard along the axis, in block x / w, lands at
  // (x / w)·w·t + r·w + x % w of the whole.
  const int axis = shard.axis;
  const int w = local.extent_int(axis) / shard.blocks;
  const auto whole =
      axis == 0 ? tensor::uninitialized_matrix<Scalar>("kpipe::model::gather_shards::whole", rows * t, columns)
                : tensor::uninitialized_matrix<Scalar>("kpipe::model::gather_shards::whole", rows, columns * t);
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::model::gather_shards"),
      Kokkos::MDRangePolicy<tensor::ExecutionSpace, Kokkos::Rank<2>>(exec.space(), {0, 0}, {rows * t, columns}),
      KOKKOS_LAMBDA(int i, int j) {
        const int r = i / rows, row = i % rows;
        const int x = axis == 0 ? row : j;
        const int at = (x / w) * w * t + r * w + x % w;
        if (axis == 0) {
          whole(at, j) = stacked(i, j);
        } else {
          whole(row, at) = stacked(i, j);
        }
      });
  return whole;
}

namespace {

// Calls `use` with the real entries of a padded global tensor: its first
// `valid` along `axis`.
template <class View, class Use>
void with_real_part(const View& whole, const Shard& shard, Use use) {
  const std::pair<std::size_t, std::size_t> real{0, static_cast<std::size_t>(shard.valid)};
  if (shard.axis == 0) {
    use(Kokkos::subview(whole, real, Kokkos::ALL));
  } else {
    use(Kokkos::subview(whole, Kokkos::ALL, real));
  }
}

}  // namespace

template <class Scalar>
tensor::Matrix<Scalar> without_padding(const tensor::ExecutionSpace& space, const tensor::Matrix<Scalar>& whole,
                                       const Shard& shard) {
  if (!shard.padded()) return whole;
  // Padding rows come last: the real ones are the leading, contiguous rows, no copy
  // (a checkpoint of GPT-2's token table and its AdamW state would copy 463 MB).
  if (shard.axis == 0) return Kokkos::subview(whole, std::make_pair(0, shard.valid), Kokkos::ALL);
  const auto real =
      tensor::uninitialized_matrix<Scalar>("kpipe::model::without_padding", whole.extent_int(0), shard.valid);
  with_real_part(whole, shard, [&](const auto& part) { Kokkos::deep_copy(space, real, part); });
  return real;
}

template <class Scalar>
void copy_real_shard(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& real, const Shard& shard,
                     const tensor::Matrix<Scalar>& local) {
  if (!shard.padded()) {
    copy_shard<Scalar>(space, real, shard, local);
    return;
  }
  const int rows = local.extent_int(0) * (shard.axis == 0 ? shard.count : 1);
  const int columns = local.extent_int(1) * (shard.axis == 1 ? shard.count : 1);
  const auto whole = tensor::uninitialized_matrix<Scalar>("kpipe::model::padded_whole", rows, columns);
  Kokkos::deep_copy(space, whole, Scalar(0));
  with_real_part(whole, shard, [&](const auto& part) { Kokkos::deep_copy(space, part, real); });
  copy_shard<Scalar>(space, whole, shard, local);
  space.fence();  // `whole` goes out of scope
}

template <class Scalar>
void sum_row_partials(Collectives& collectives, const std::vector<Parameter<Scalar>>& parameters) {
  for (const auto& p : parameters) {
    if (p.row_partial) collectives.all_reduce_sum(Group::tensor, p.grad);
  }
}

template void copy_shard<float>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&, const Shard&,
                                const tensor::Matrix<float>&);
template void copy_shard<double>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<double>&, const Shard&,
                                 const tensor::Matrix<double>&);
template tensor::Matrix<float> gather_shards<float>(tensor::ExecContext&, Collectives&, const Shard&,
                                                    const tensor::ConstMatrix<float>&);
template tensor::Matrix<double> gather_shards<double>(tensor::ExecContext&, Collectives&, const Shard&,
                                                      const tensor::ConstMatrix<double>&);

template tensor::Matrix<float> without_padding<float>(const tensor::ExecutionSpace&, const tensor::Matrix<float>&,
                                                      const Shard&);
template tensor::Matrix<double> without_padding<double>(const tensor::ExecutionSpace&, const tensor::Matrix<double>&,
                                                        const Shard&);
template void copy_real_shard<float>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&, const Shard&,
                                     const tensor::Matrix<float>&);
template void copy_real_shard<double>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<double>&, const Shard&,
                                      const tensor::Matrix<double>&);

template void sum_row_partials<float>(Collectives&, const std::vector<Parameter<float>>&);
template void sum_row_partials<double>(Collectives&, const std::vector<Parameter<double>>&);

}  // namespace kpipe::model
