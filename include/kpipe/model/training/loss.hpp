#pragma once
// The loss at the last stage. For a microbatch it returns the loss scaled by
// 1 / global_batch and writes dY, the gradient of that scaled loss, so the
// microbatch gradients of a step add up to the gradient of the mean loss and
// data-parallel replicas sum (not average) their gradients.

#include <algorithm>
#include <cstdint>

#include "kpipe/model/collectives.hpp"
#include "kpipe/model/spec.hpp"
#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::model {

// Targets of a microbatch: class labels for cross-entropy, a row of target
// values per sample for MSE. Only the member the loss needs is allocated.
template <class Scalar>
struct Targets {
  tensor::Labels labels;
  tensor::Matrix<Scalar> values;
};

template <class Scalar>
Targets<Scalar> make_targets(LossKind loss, int rows, int outputs);

// The targets of a microbatch of `rows` samples of `model`: one label per
// prediction, rows·T for a transformer.
template <class Scalar>
Targets<Scalar> make_targets(const ModelSpec& model, int rows) {
  return make_targets<Scalar>(model.loss, rows * model.positions(), model.output_dim / model.positions());
}

// 1 / the predictions of a step that take a loss: B · positions, less the
// `ignored` ones (packed documents: DataSource::ignored_predictions). The
// microbatch losses of a step then add up to the mean loss over them.
inline double mean_loss_factor(const ModelSpec& model, int global_batch, std::int64_t ignored = 0) {
  const std::int64_t counted = static_cast<std::int64_t>(global_batch) * model.positions() - ignored;
  return 1.0 / static_cast<double>(std::max<std::int64_t>(counted, 1));
}

// Y (rows x positions·classes) as one row per prediction, the view the loss
// and the accuracy take when the targets hold more labels than Y has rows.
template <class MatrixView>
MatrixView by_prediction(const MatrixView& Y, std::int64_t predictions) {
  if (predictions == static_cast<std::int64_t>(Y.extent(0)) || predictions == 0) return Y;
  return MatrixView(Y.data(), predictions, Y.size() / predictions);
}

// Returns scale * sum of the per-prediction losses of Y and writes dY, on the
// context's instance. The host waits for the value, which lets callers check
// it for NaN or Inf at once.
template <class Scalar>
double loss_and_gradient(const tensor::ExecContext& exec, LossKind loss,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Y, const Targets<Scalar>& targets,
                         tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dY);

// Softmax cross-entropy of logits split over the tensor-parallel group by
// vocabulary (a vocabulary-parallel LM head): this rank holds the columns
// [first, first + logits' width) of `vocab`; the labels are global ids.
// Returns scale * the summed losses (the same on every rank of the group) and
// writes this shard's dlogits; the full logits never travel, only two rows x t
// and rows x 2 sums (kernels/loss.hpp). With one rank it is the plain loss.
template <class Scalar>
double vocab_parallel_cross_entropy(const tensor::ExecContext& exec, Collectives& collectives,
                                    const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                                    const tensor::ConstLabels& labels, int first, int vocab,
                                    tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dlogits);

// Throws a runtime error naming the step and the microbatch (and the replica
// when d > 1) if `loss` is NaN or Inf. Callers check before the optimizer
// step, so the weights stay those of the last good step.
void require_finite_loss(double loss, std::int64_t step, int microbatch, int replica, int data_parallel);

}  // namespace kpipe::model
