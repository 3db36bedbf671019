#include <mpi.h>

#include <Kokkos_Core.hpp>

#include "catch.hpp"
#include "kpipe/comm/gradient_reducer.hpp"
#include "staging_choices.hpp"

using kpipe::comm::GradientReducer;

namespace {

struct Tensors {
  std::vector<Kokkos::View<double*>> views;
  std::vector<GradientReducer<double>::Flat> flats;
};

// Tensor t of `sizes` holds (rank + 1)·1000 + t·100 + i at i.
Tensors filled(const std::vector<int>& sizes, int rank) {
  Tensors out;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    out.views.emplace_back("tensor", sizes[t]);
    auto host = Kokkos::create_mirror_view(out.views.back());
    for (int i = 0; i < sizes[t]; ++i) host(i) = (rank + 1) * 1000.0 + t * 100.0 + i;
    Kokkos::deep_copy(out.views.back(), host);
    out.flats.push_back(kpipe::comm::flat<double>(out.views.back()));
  }
  return out;
}

// Elements that differ from Σ_r ((r+1)·1000 + t·100 + i) = 1000·size(size+1)/2 + size·(t·100 + i).
int wrong_sums(const Tensors& tensors, int size) {
  int wrong = 0;
  for (std::size_t t = 0; t < tensors.views.size(); ++t) {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tensors.views[t]);
    for (std::size_t i = 0; i < host.extent(0); ++i) {
      wrong += host(i) != 1000.0 * size * (size + 1) / 2 + size * (t * 100.0 + static_cast<double>(i));
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("large tensors are summed in place, small ones in buckets of at most 16 elements", "[comm]") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const kpipe::comm::Watchdog watchdog(60.0, rank);
  // Sizes straddle the 16-element bucket: smaller, equal, and several buckets long (68 elements).
  const std::vector<int> sizes = {3, 16, 1, 41, 7};
  struct Case {
    std::size_t in_place_elements;
    int calls, staged_calls;  // staged through the host, every tensor goes into buckets
  };
  // Nothing in place: ceil(68 / 16) buckets. From 10 elements on: 16 and 41 alone, 3 + 1 + 7 in one bucket.
  for (const Case c : {Case{1 << 27, 5, 5}, Case{10, 3, 5}}) {
    for (const bool staged : kpipe::test::staging_choices()) {
      Tensors tensors = filled(sizes, rank);
      GradientReducer<double> reducer(MPI_COMM_WORLD, 16 * sizeof(double), c.in_place_elements * sizeof(double), staged,
                                      watchdog);
      reducer.sum(tensors.flats);
      INFO("in place from " << c.in_place_elements << " elements, staged " << staged);
      CHECK(reducer.allreduce_calls() == (staged ? c.staged_calls : c.calls));
      CHECK(wrong_sums(tensors, size) == 0);
    }
  }
}

TEST_CASE("sums started in groups overlap and finish together, step after step", "[comm]") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const kpipe::comm::Watchdog watchdog(60.0, rank);
  for (const bool staged : kpipe::test::staging_choices()) {
    GradientReducer<double> reducer(MPI_COMM_WORLD, 16 * sizeof(double), 1 << 30, staged, watchdog);
    // Two steps: the second reuses the first one's buckets.
    for (int step = 0; step < 2; ++step) {
      Tensors tensors = filled({5, 40, 9}, rank);
      // Group 1 (tensors 0 and 1: three buckets), then group 2 (tensor 2), as a layer's gradients become final.
      reducer.start({tensors.flats[0], tensors.flats[1]});
      reducer.progress();
      reducer.start({tensors.flats[2]});
      while (!reducer.progress()) {
      }
      // Nothing is written back before finish: the tensors still hold this rank's values.
      CHECK(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tensors.views[2])(0) == (rank + 1) * 1000.0 + 200);
      reducer.finish();
      CHECK(wrong_sums(tensors, size) == 0);
    }
    CHECK(reducer.allreduce_calls() == 2 * (3 + 1));
  }
}
