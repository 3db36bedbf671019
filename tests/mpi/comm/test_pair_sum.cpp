#include "kpipe/comm/pair_sum.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "staging_choices.hpp"

using kpipe::comm::PairSum;

namespace {

// Element i of rank r's tensor: an inexact float, so a + b rounds.
float value(int rank, int i) {
  return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(rank)) / 3.0f;
}

}  // namespace

TEST_CASE("a pair of ranks sums a tensor in pieces, bitwise a + b on both", "[comm]") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Ranks 0 and size - 1 hold the tensor (the first and last stage); the rest stay out.
  const bool holds = rank == 0 || rank == size - 1;
  MPI_Comm pair = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, holds ? 0 : MPI_UNDEFINED, rank, &pair);
  if (!holds) return;
  const kpipe::comm::Watchdog watchdog(60.0, rank);
  constexpr int n = 1000;
  const int peer = rank == 0 ? size - 1 : 0;
  // 64-byte pieces: 63 of 16 floats and a last of 8; one piece for all; staged through the host or not.
  for (const std::size_t piece_bytes : {std::size_t{64}, std::size_t{1} << 20}) {
    for (const bool staged : kpipe::test::staging_choices()) {
      Kokkos::View<float*> tensor("tensor", n);
      auto host = Kokkos::create_mirror_view(tensor);
      for (int i = 0; i < n; ++i) host(i) = value(rank, i);
      Kokkos::deep_copy(tensor, host);
      PairSum<float> sum(pair, piece_bytes, staged, watchdog);
      sum.sum(kpipe::comm::PairSum<float>::Flat(tensor.data(), n));
      Kokkos::deep_copy(host, tensor);
      int wrong = 0;
      for (int i = 0; i < n; ++i) wrong += host(i) != value(rank, i) + value(peer, i);
      INFO("pieces of " << piece_bytes << " bytes, staged " << staged);
      CHECK(wrong == 0);
      CHECK(sum.bytes_summed() == n * sizeof(float));
    }
  }
  MPI_Comm_free(&pair);
}
