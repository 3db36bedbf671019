#pragma once
// The counter-based random streams of the model module. Each use has its own
// domain, so a model seed equal to a data seed never shares a stream.

#include <cstdint>

#include "kpipe/kernels/random.hpp"

namespace kpipe::model::detail {

enum class Stream : std::uint64_t { weights = 1, teacher = 2, inputs = 3 };

inline std::uint64_t stream(Stream domain, std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) {
  return kernels::stream_key(kernels::stream_key(seed, static_cast<std::uint64_t>(domain)), a, b);
}

}  // namespace kpipe::model::detail
