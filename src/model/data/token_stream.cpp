#include "kpipe/model/data/token_stream.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/loss.hpp"
#include "kpipe/kernels/random.hpp"

namespace kpipe::model {

namespace {

// The sequences' own stream domain (as runtime's shuffle), apart from detail::Stream's.
constexpr std::uint64_t token_domain = 0x746f6b656eULL;  // "token"

using tensor::HostLabels;
using tensor::HostRows;

}  // namespace

template <class Scalar>
TokenStreamSource<Scalar>::TokenStreamSource(std::shared_ptr<const std::vector<std::int32_t>> tokens,
                                             const TokenStreamSpec& spec, tensor::ExecContext& exec)
    : tokens_(std::move(tokens)), spec_(spec), exec_(exec) {
  if (spec_.context < 1 || static_cast<std::int64_t>(tokens_->size()) < spec_.context + 1) {
    throw runtime_error(fmt::format("a token stream of {} tokens has no sequence of {} tokens and a next one",
                                    tokens_->size(), spec_.context));
  }
}

template <class Scalar>
std::int64_t TokenStreamSource<Scalar>::start(std::int64_t step, std::int64_t position) const {
  const std::int64_t T = spec_.context;
  if (spec_.sampling == TokenSampling::windows) {
    return (step * spec_.global_batch + position) % windows() * T;
  }
  const auto key = kernels::stream_key(kernels::stream_key(spec_.seed, token_domain), static_cast<std::uint64_t>(step));
  // N - T offsets keep the last label, at start + T, inside the stream.
  const auto offsets = static_cast<std::uint64_t>(static_cast<std::int64_t>(tokens_->size()) - T);
  return static_cast<std::int64_t>(kernels::random_bits(key, static_cast<std::uint64_t>(position)) % offsets);
}

template <class Scalar>
template <class T>
void TokenStreamSource<Scalar>::gather(std::int64_t step, std::int64_t first, std::int64_t count, int shift,
                                       std::vector<T>& out) const {
  const std::int64_t context = spec_.context;
  out.resize(static_cast<std::size_t>(count * context));
  const std::int32_t* tokens = tokens_->data();
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int32_t* from = tokens + start(step, first + r) + shift;
    T* to = out.data() + r * context;
    for (std::int64_t t = 0; t < context; ++t) to[t] = static_cast<T>(from[t]);
  }
}

template <class Scalar>
void TokenStreamSource<Scalar>::fill_inputs(std::int64_t step, std::int64_t first,
                                            const tensor::Matrix<Scalar>& X) const {
  const auto region = exec_.region("kpipe::model::token_inputs");
  const auto rows = static_cast<std::int64_t>(X.extent(0));
  tensor::require_shape("token inputs", X, X.extent(0), static_cast<std::size_t>(spec_.context));
  // The previous microbatch's copy may still read the staging buffer.
  exec_.space().fence();
  gather(step, first, rows, 0, staged_inputs_);
  Kokkos::deep_copy(exec_.space(), X, HostRows<Scalar>(staged_inputs_.data(), rows, spec_.context));
}

template <class Scalar>
void TokenStreamSource<Scalar>::fill_targets(std::int64_t step, std::int64_t first,
                                             const Targets<Scalar>& targets) const {
  const auto region = exec_.region("kpipe::model::token_targets");
  const auto labels = static_cast<std::int64_t>(targets.labels.extent(0));
  if (labels % spec_.context != 0) {
    throw runtime_error(fmt::format("token targets hold {} labels, not a multiple of the {} positions of a sequence",
                                    labels, spec_.context));
  }
  exec_.space().fence();
  gather(step, first, labels / spec_.context, 1, staged_labels_);
  if (spec_.separator >= 0) {
    const std::int32_t* tokens = tokens_->data();
    for (std::int64_t r = 0; r < labels / spec_.context; ++r) {
      const std::int32_t* inputs = tokens + start(step, first + r);
      for (std::int64_t t = 0; t < spec_.context; ++t) {
        if (inputs[t] == spec_.separator)
          staged_labels_[static_cast<std::size_t>(r * spec_.context + t)] = kernels::ignored_label;
      }
    }
  }
  Kokkos::deep_copy(exec_.space(), targets.labels, HostLabels(staged_labels_.data(), labels));
}

template <class Scalar>
std::int64_t TokenStreamSource<Scalar>::ignored_predictions(std::int64_t step, std::int64_t first,
                                                            std::int64_t count) const {
  if (spec_.separator < 0) return 0;
  std::int64_t separators = 0;
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int32_t* inputs = tokens_->data() + start(step, first + r);
    separators += std::count(inputs, inputs + spec_.context, spec_.separator);
  }
  return separators;
}

template class TokenStreamSource<float>;
template class TokenStreamSource<double>;

}  // namespace kpipe::model
