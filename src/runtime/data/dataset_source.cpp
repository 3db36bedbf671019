#include "kpipe/runtime/data/dataset_source.hpp"

#include <fmt/format.h>

#include <numeric>
#include <utility>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/data/synthetic.hpp"
#include "kpipe/runtime/data/token_source.hpp"

namespace kpipe::runtime {

namespace {

// The shuffle's own stream domain, apart from the model's weight and teacher streams.
constexpr std::uint64_t shuffle_domain = 0x7368756666ULL;  // "shuff"

using tensor::HostLabels;
using tensor::HostRows;

// The file against the model: one line naming both numbers and the fix.
void check_against_model(const io::DatasetFile& file, const model::TrainerSpec& spec) {
  const std::string where = fmt::format("data.path = \"{}\"", file.file_name());
  if (file.features() != spec.model.input_dim) {
    throw input_error(
        fmt::format("model.input_dim = {} but {} has {} features per sample ({}); set "
                    "model.input_dim = {}",
                    spec.model.input_dim, where, file.features(), file.describe_features(), file.features()));
  }
  const bool classification = spec.data.task == config::Task::classification;
  if (classification != file.has_labels()) {
    throw input_error(fmt::format("data.task = \"{}\" but {} holds {}; set data.task = \"{}\"",
                                  classification ? "classification" : "regression", where,
                                  file.has_labels() ? "int32 labels" : "float32 targets",
                                  file.has_labels() ? "classification" : "regression"));
  }
  if (file.outputs() != spec.model.output_dim) {
    throw input_error(fmt::format(
        "model.output_dim = {} but {} has {} {}; set model.output_dim = {}", spec.model.output_dim, where,
        file.outputs(),
        file.has_labels() ? "classes (its attribute classes, or max label + 1)" : "target values per sample",
        file.outputs()));
  }
}

}  // namespace

std::vector<std::int64_t> epoch_permutation(std::uint64_t seed, std::int64_t epoch, std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  const std::uint64_t key =
      kernels::stream_key(kernels::stream_key(seed, shuffle_domain), static_cast<std::uint64_t>(epoch));
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(kernels::random_bits(key, static_cast<std::uint64_t>(i)) %
                                             static_cast<std::uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

template <class Scalar>
DatasetSource<Scalar>::DatasetSource(const std::string& path, io::Split split, const model::TrainerSpec& spec,
                                     tensor::ExecContext& exec)
    : file_(path, split), seed_(spec.data.seed), global_batch_(spec.global_batch), exec_(exec) {
  check_against_model(file_, spec);
}

template <class Scalar>
std::int64_t DatasetSource<Scalar>::row(std::int64_t step, std::int64_t position) const {
  const std::int64_t n = file_.rows();
  const std::int64_t index = step * global_batch_ + position;
  if (file_.split() == io::Split::test) return index;  // in order; the file checks the range
  const std::int64_t epoch = index / n;
  if (epoch != epoch_) {
    permutation_ = epoch_permutation(seed_, epoch, n);
    epoch_ = epoch;
  }
  return permutation_[static_cast<std::size_t>(index % n)];
}

template <class Scalar>
void DatasetSource<Scalar>::gather_rows(std::int64_t step, std::int64_t first, int count) const {
  rows_.resize(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) rows_[i] = row(step, first + i);
}

template <class Scalar>
void DatasetSource<Scalar>::fill_inputs(std::int64_t step, std::int64_t first, const tensor::Matrix<Scalar>& X) const {
  const auto region = exec_.region("kpipe::runtime::dataset_inputs");
  const int count = static_cast<int>(X.extent(0));
  tensor::require_shape("dataset inputs", X, count, file_.features());
  gather_rows(step, first, count);
  // The previous microbatch's copy may still read the staging buffer.
  exec_.space().fence();
  staged_values_.resize(static_cast<std::size_t>(count) * file_.features());
  file_.read_features(rows_.data(), rows_.size(), staged_values_.data());
  Kokkos::deep_copy(exec_.space(), X, HostRows<Scalar>(staged_values_.data(), count, file_.features()));
}

template <class Scalar>
void DatasetSource<Scalar>::fill_targets(std::int64_t step, std::int64_t first,
                                         const model::Targets<Scalar>& targets) const {
  const auto region = exec_.region("kpipe::runtime::dataset_targets");
  const bool labels = file_.has_labels();
  const int count = static_cast<int>(labels ? targets.labels.extent(0) : targets.values.extent(0));
  gather_rows(step, first, count);
  exec_.space().fence();
  if (labels) {
    staged_labels_.resize(static_cast<std::size_t>(count));
    file_.read_labels(rows_.data(), rows_.size(), staged_labels_.data());
    Kokkos::deep_copy(exec_.space(), targets.labels, HostLabels(staged_labels_.data(), count));
    return;
  }
  tensor::require_shape("dataset targets", targets.values, count, file_.outputs());
  staged_values_.resize(static_cast<std::size_t>(count) * file_.outputs());
  file_.read_targets(rows_.data(), rows_.size(), staged_values_.data());
  Kokkos::deep_copy(exec_.space(), targets.values, HostRows<Scalar>(staged_values_.data(), count, file_.outputs()));
}

template class DatasetSource<float>;
template class DatasetSource<double>;

}  // namespace kpipe::runtime
