#pragma once
// Loss kernels. Each returns `scale` times the sum of the per-sample losses of
// the rows it is given and writes dY, the gradient of that scaled sum. With
// scale = 1 / global_batch, the microbatch gradients of a whole step add up to
// the gradient of the mean loss.

#include "kpipe/tensor/matrix.hpp"

namespace kpipe::kernels {

// A label that takes no loss and no gradient (its row's gradient is zero):
// packed documents' predictions across a boundary. Accuracy never counts it
// correct.
constexpr int ignored_label = -1;

// Softmax cross-entropy of logits against class labels, computed from the
// log-sum-exp shifted by the row maximum so that no exponential overflows.
// A label outside [0, classes), but ignored_label, makes the loss NaN instead
// of reading past the row.
template <class Scalar>
double softmax_cross_entropy(const tensor::ExecutionSpace& space,
                             const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                             const tensor::ConstLabels& labels, tensor::identity_t<Scalar> scale,
                             const tensor::Matrix<Scalar>& dlogits);

// Vocabulary-parallel softmax cross-entropy (Megatron-LM's): each of t
// tensor-parallel ranks holds the logits of the vocabulary entries [first,
// first + shard) of every row. Three local kernels around two sums over the
// tensor group of a few numbers per row, so the full logits are never
// gathered (model::vocab_parallel_cross_entropy runs them):
//   1. vocab_shard_max: this shard's row maximum in column `rank` of the
//      rows x t `maxima`, zero elsewhere; summed over the group, every rank
//      holds every shard's maximum (adding zeros is exact).
//   2. vocab_shard_sums: with M the maximum of a row's maxima, rows x 2
//      `sums` = (Σ exp(logit − M) over the shard, the label's logit where the
//      shard holds the label, else 0); summed over the group, the row's
//      softmax denominator and label logit.
//   3. vocab_shard_loss: `scale` times the summed losses M + log(Σ) − logit
//      of the label (the same number on every rank; NaN for a label outside
//      [0, vocab)) and the shard's gradient scale · (softmax − one-hot).
template <class Scalar>
void vocab_shard_max(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                     int rank, const tensor::Matrix<Scalar>& maxima);
template <class Scalar>
void vocab_shard_sums(const tensor::ExecutionSpace& space,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                      const tensor::ConstMatrix<tensor::identity_t<Scalar>>& maxima, const tensor::ConstLabels& labels,
                      int first, const tensor::Matrix<Scalar>& sums);
template <class Scalar>
double vocab_shard_loss(const tensor::ExecutionSpace& space,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& maxima,
                        const tensor::ConstMatrix<tensor::identity_t<Scalar>>& sums, const tensor::ConstLabels& labels,
                        int first, int vocab, tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dlogits);

// Mean squared error per sample, mean((y - t)^2) over the outputs.
template <class Scalar>
double mean_squared_error(const tensor::ExecutionSpace& space, const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Y,
                          const tensor::ConstMatrix<tensor::identity_t<Scalar>>& targets,
                          tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dY);

}  // namespace kpipe::kernels
