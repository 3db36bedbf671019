#include "kpipe/model/data/documents.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "kpipe/kernels/embedding.hpp"

namespace kpipe::model {

template <class Scalar>
void Documents::assign(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& ids) {
  if (positions_.extent(0) != ids.size()) {
    positions_ = Kokkos::View<int*, tensor::MemorySpace>("kpipe::model::document_positions", ids.size());
  }
  kernels::document_positions<Scalar>(space, ids, separator_, positions_);
}

Kokkos::View<const int*, tensor::MemorySpace> Documents::positions_of(int rows, const char* layer) const {
  if (positions_.extent(0) != static_cast<std::size_t>(rows)) {
    throw std::logic_error(
        fmt::format("{} got {} positions but the packed documents assigned hold {}: assign the "
                    "microbatch's documents before its F and B",
                    layer, rows, positions_.extent(0)));
  }
  return positions_;
}

template void Documents::assign<float>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<float>&);
template void Documents::assign<double>(const tensor::ExecutionSpace&, const tensor::ConstMatrix<double>&);

}  // namespace kpipe::model
