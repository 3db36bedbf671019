#include <mpi.h>

#include <Kokkos_Core.hpp>

#include "catch.hpp"
#include "kpipe/comm/gradient_reducer.hpp"

using kpipe::comm::GradientReducer;

TEST_CASE("bucketed all-reduce sums every element across ranks", "[comm]") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Sizes straddle the 16-element bucket: smaller, equal, and several buckets long.
  const std::vector<int> sizes = {3, 16, 1, 41, 7};
  int total = 0;
  for (const int n : sizes) total += n;

  for (const bool staged : {false, true}) {
    std::vector<Kokkos::View<double*>> tensors;
    std::vector<GradientReducer<double>::Flat> flats;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      tensors.emplace_back("tensor", sizes[t]);
      auto host = Kokkos::create_mirror_view(tensors.back());
      for (int i = 0; i < sizes[t]; ++i) host(i) = (rank + 1) * 1000.0 + t * 100.0 + i;
      Kokkos::deep_copy(tensors.back(), host);
      flats.push_back(kpipe::comm::flat<double>(tensors.back()));
    }
    GradientReducer<double> reducer(MPI_COMM_WORLD, 16 * sizeof(double), staged);
    reducer.sum(flats);
    CHECK(reducer.allreduce_calls() == (total + 15) / 16);

    // Σ_r ((r+1)·1000 + t·100 + i) = 1000·size(size+1)/2 + size·(t·100 + i)
    int wrong = 0;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tensors[t]);
      for (int i = 0; i < sizes[t]; ++i) {
        wrong += host(i) != 1000.0 * size * (size + 1) / 2 + size * (t * 100.0 + i);
      }
    }
    CHECK(wrong == 0);
  }
}
