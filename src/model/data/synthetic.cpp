#include "kpipe/model/data/synthetic.hpp"

#include <cmath>

#include "../random_streams.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::model {

using Range = Kokkos::RangePolicy<tensor::ExecutionSpace>;

namespace {

enum TeacherTensor : std::uint64_t { centres, hidden, output, classes };

// out(i, c) = f(sum_k in(i, k) * weights(k, c)), summed in ascending k by one
// thread, so every rank computes bitwise the same teacher outputs.
template <class Scalar>
void dense(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& in,
           const tensor::ConstMatrix<Scalar>& weights, bool apply_tanh, const tensor::Matrix<Scalar>& out) {
  const std::int64_t cols = static_cast<std::int64_t>(out.extent(1));
  const int depth = static_cast<int>(in.extent(1));
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::model::teacher_dense"), Range(space, 0, out.extent(0) * out.extent(1)),
      KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t i = e / cols;
        const std::int64_t c = e % cols;
        Scalar sum = 0;
        for (int k = 0; k < depth; ++k) sum += in(i, k) * weights(k, c);
        out(i, c) = apply_tanh ? tensor::compat::math::tanh(sum) : sum;
      });
}

// Classes whose logits nearest_centre sums side by side.
constexpr int class_block = 16;

// labels(i) = argmax_c x_i . centre_c - |centre_c|^2 / 2, the first c on a
// tie; centres_by_feature(k, c) = centre_c(k), columns padded to whole blocks.
// Each logit is summed in ascending k as on its own (the same bits), but a
// block of classes at once: independent sums the CPU overlaps and the
// compiler vectorises over the block, where one class at a time was a chain
// of dependent adds, long enough to show in a compute_bound-bf16 step.
template <class Scalar>
void nearest_centre(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<Scalar>& X,
                    const tensor::ConstMatrix<Scalar>& centres_by_feature, int classes, const tensor::Labels& labels) {
  const int dim = static_cast<int>(centres_by_feature.extent(0));
  Kokkos::parallel_for(
      tensor::compat::kernel_label("kpipe::model::teacher_argmax"), Range(space, 0, X.extent(0)),
      KOKKOS_LAMBDA(std::int64_t i) {
        int best = 0;
        Scalar best_logit = 0;
        for (int first = 0; first < classes; first += class_block) {
          Scalar logits[class_block] = {};
          for (int k = 0; k < dim; ++k) {
            const Scalar x = X(i, k);
            const Scalar* const centre = &centres_by_feature(k, first);
            for (int j = 0; j < class_block; ++j) logits[j] += centre[j] * (x - Scalar(0.5) * centre[j]);
          }
          for (int j = 0; j < class_block && first + j < classes; ++j) {
            if (first + j == 0 || logits[j] > best_logit) {
              best = first + j;
              best_logit = logits[j];
            }
          }
        }
        labels(i) = best;
      });
}

}  // namespace

template <class Scalar>
SyntheticData<Scalar>::SyntheticData(const DataSpec& spec, tensor::ExecContext& exec) : spec_(spec), exec_(exec) {
  const auto& space = exec_.space();
  const auto key = [&](TeacherTensor tensor) { return detail::stream(detail::Stream::teacher, spec.seed, tensor); };
  if (spec.task == Task::classification) {
    centres_ = tensor::uninitialized_matrix<Scalar>("kpipe::model::teacher_centres", spec.output_dim, spec.input_dim);
    kernels::fill_normal(space, key(centres), 0, 0.0, 1.0, centres_);
    const int padded = (spec.output_dim + class_block - 1) / class_block * class_block;
    centres_by_feature_ =
        tensor::zero_matrix<Scalar>("kpipe::model::teacher_centres_by_feature", spec.input_dim, padded);
    const auto centres = centres_;
    const auto by_feature = centres_by_feature_;
    Kokkos::parallel_for(
        tensor::compat::kernel_label("kpipe::model::teacher_transpose"), Range(space, 0, centres.extent(0)),
        KOKKOS_LAMBDA(std::int64_t c) {
          for (std::size_t k = 0; k < centres.extent(1); ++k) by_feature(k, c) = centres(c, k);
        });
    return;
  }
  // Unit-variance pre-activations and outputs for unit-variance inputs.
  hidden_weights_ = tensor::uninitialized_matrix<Scalar>("kpipe::model::teacher_hidden", spec.input_dim, teacher_width);
  output_weights_ =
      tensor::uninitialized_matrix<Scalar>("kpipe::model::teacher_output", teacher_width, spec.output_dim);
  kernels::fill_normal(space, key(hidden), 0, 0.0, 1.0 / std::sqrt(spec.input_dim), hidden_weights_);
  kernels::fill_normal(space, key(output), 0, 0.0, 1.0 / std::sqrt(teacher_width), output_weights_);
}

template <class Scalar>
void SyntheticData<Scalar>::fill_inputs(std::int64_t step, std::int64_t first, const tensor::Matrix<Scalar>& X) const {
  const auto region = exec_.region("kpipe::model::synthetic_inputs");
  tensor::require_shape("synthetic inputs", X, X.extent(0), spec_.input_dim);
  const auto noise_key = detail::stream(detail::Stream::inputs, spec_.seed, static_cast<std::uint64_t>(step));
  if (spec_.task != Task::classification) {
    kernels::fill_normal(exec_.space(), noise_key, first, 0.0, 1.0, X);
    return;
  }
  const auto class_key = detail::stream(detail::Stream::inputs, spec_.seed, static_cast<std::uint64_t>(step), classes);
  kernels::fill_normal_around<Scalar>(exec_.space(), noise_key, first, class_key, centres_, X);
}

template <class Scalar>
void SyntheticData<Scalar>::fill_targets(std::int64_t step, std::int64_t first, const Targets<Scalar>& targets) const {
  const bool classification = spec_.task == Task::classification;
  const int rows = static_cast<int>(classification ? targets.labels.extent(0) : targets.values.extent(0));
  const auto region = exec_.region("kpipe::model::synthetic_targets");
  const auto X = exec_.pool().template take<Scalar>("kpipe::model::teacher_inputs", rows, spec_.input_dim);
  fill_inputs(step, first, X);
  teach(X, targets);
}

template <class Scalar>
void SyntheticData<Scalar>::fill_targets_of_inputs(std::int64_t, std::int64_t,
                                                   const tensor::ConstMatrix<Scalar>& inputs,
                                                   const Targets<Scalar>& targets) const {
  const auto region = exec_.region("kpipe::model::synthetic_targets");
  tensor::require_shape("synthetic inputs", inputs, inputs.extent(0), spec_.input_dim);
  teach(inputs, targets);
}

template <class Scalar>
void SyntheticData<Scalar>::teach(const tensor::ConstMatrix<Scalar>& X, const Targets<Scalar>& targets) const {
  const auto& space = exec_.space();
  if (spec_.task == Task::classification) {
    nearest_centre<Scalar>(space, X, centres_by_feature_, spec_.output_dim, targets.labels);
    return;
  }
  const int rows = X.extent_int(0);
  tensor::require_shape("regression targets", targets.values, rows, spec_.output_dim);
  const auto activations = exec_.pool().template take<Scalar>("kpipe::model::teacher_hidden_out", rows, teacher_width);
  dense<Scalar>(space, X, hidden_weights_, true, activations);
  dense<Scalar>(space, activations, output_weights_, false, targets.values);
}

template class SyntheticData<float>;
template class SyntheticData<double>;

}  // namespace kpipe::model
