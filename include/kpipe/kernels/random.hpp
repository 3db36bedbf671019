#pragma once
// Counter-based random numbers: value number `counter` of the stream `key` is
// a pure function of the two, computed inside a kernel without any state. So
// every rank generates exactly the weights and samples it needs, and the
// result never depends on the partition, the rank count or the thread count.

#include <cstdint>

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// The splitmix64 finaliser: a bijective 64-bit mix with full avalanche.
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A stream key from a seed and up to two stream indices (e.g. layer, tensor).
KOKKOS_INLINE_FUNCTION std::uint64_t stream_key(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) {
  constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ULL;
  return mix64(mix64(mix64(seed + golden) + a * golden) + b * golden);
}

// 64 random bits: element `counter` of stream `key`.
KOKKOS_INLINE_FUNCTION std::uint64_t random_bits(std::uint64_t key, std::uint64_t counter) {
  return mix64(key ^ mix64(counter + 0x9e3779b97f4a7c15ULL));
}

// Uniform in [0, 1) with 53 random bits.
KOKKOS_INLINE_FUNCTION double uniform01(std::uint64_t key, std::uint64_t counter) {
  return static_cast<double>(random_bits(key, counter) >> 11) * 0x1.0p-53;
}

// Fill with independent uniform values in [low, high); element (i, j) is number
// i * cols + j of the stream.
template <class Scalar>
void fill_uniform(const tensor::ExecutionSpace& space, std::uint64_t key, double low, double high,
                  const tensor::Matrix<Scalar>& out);

// Fill with independent normal values; element (i, j) is number
// `(first_row + i) * cols + j` of the stream, so a block of rows is the same
// wherever it is generated. Box-Muller in Scalar's precision: the uniforms on
// counters 2q and 2q + 1 give values 2q (r cos) and 2q + 1 (r sin), one
// logarithm, root and angle for two values.
template <class Scalar>
void fill_normal(const tensor::ExecutionSpace& space, std::uint64_t key, std::int64_t first_row, double mean,
                 double stddev, const tensor::Matrix<Scalar>& out);

// A Gaussian mixture in one pass: out(i, j) = centres(c, j) + the standard
// normal value fill_normal(key, first_row, 0, 1) gives (i, j), with c =
// random_bits(choice_key, first_row + i) mod centres' rows: row i is drawn
// around a uniformly chosen centre, the same wherever the block is generated.
template <class Scalar>
void fill_normal_around(const tensor::ExecutionSpace& space, std::uint64_t key, std::int64_t first_row,
                        std::uint64_t choice_key, const tensor::ConstMatrix<Scalar>& centres,
                        const tensor::Matrix<Scalar>& out);

}  // namespace kpipe::kernels
