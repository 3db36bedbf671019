#include "kpipe/model/training/loss.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/loss.hpp"

namespace kpipe::model {

template <class Scalar>
Targets<Scalar> make_targets(LossKind loss, int rows, int outputs) {
  Targets<Scalar> targets;
  if (loss == LossKind::cross_entropy) {
    targets.labels = tensor::Labels(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kpipe::model::labels"), rows);
  } else {
    targets.values = tensor::uninitialized_matrix<Scalar>("kpipe::model::targets", rows, outputs);
  }
  return targets;
}

template <class Scalar>
double loss_and_gradient(const tensor::ExecContext& exec, LossKind loss,
                         const tensor::ConstMatrix<tensor::identity_t<Scalar>>& Y, const Targets<Scalar>& targets,
                         tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dY) {
  const auto region = exec.region("kpipe::model::loss");
  const auto& space = exec.space();
  if (loss == LossKind::mse) return kernels::mean_squared_error(space, Y, targets.values, scale, dY);
  const std::int64_t predictions = targets.labels.extent(0);
  return kernels::softmax_cross_entropy(space, by_prediction(Y, predictions), targets.labels, scale,
                                        by_prediction(dY, predictions));
}

void require_finite_loss(double loss, std::int64_t step, int microbatch, int replica, int data_parallel) {
  if (std::isfinite(loss)) return;
  const auto where = data_parallel > 1 ? fmt::format("microbatch {} of replica {}", microbatch, replica)
                                       : fmt::format("microbatch {}", microbatch);
  throw runtime_error(
      fmt::format("the loss is {} in step {}, {}; the run stops before that step's update, nothing "
                  "is written. Lower train.lr or set train.grad_clip",
                  loss, step, where));
}

template <class Scalar>
double vocab_parallel_cross_entropy(const tensor::ExecContext& exec, Collectives& collectives,
                                    const tensor::ConstMatrix<tensor::identity_t<Scalar>>& logits,
                                    const tensor::ConstLabels& labels, int first, int vocab,
                                    tensor::identity_t<Scalar> scale, const tensor::Matrix<Scalar>& dlogits) {
  const int rows = static_cast<int>(logits.extent(0));
  const int ranks = collectives.size(Group::tensor);
  const auto maxima = tensor::uninitialized_matrix<Scalar>("kpipe::model::shard_maxima", rows, ranks);
  kernels::vocab_shard_max<Scalar>(exec.space(), logits, collectives.rank(Group::tensor), maxima);
  collectives.all_reduce_sum(Group::tensor, maxima);
  const auto sums = tensor::uninitialized_matrix<Scalar>("kpipe::model::shard_sums", rows, 2);
  kernels::vocab_shard_sums<Scalar>(exec.space(), logits, maxima, labels, first, sums);
  collectives.all_reduce_sum(Group::tensor, sums);
  return kernels::vocab_shard_loss<Scalar>(exec.space(), logits, maxima, sums, labels, first, vocab, scale, dlogits);
}

#define KPIPE_INSTANTIATE(Scalar)                                                                                      \
  template Targets<Scalar> make_targets<Scalar>(LossKind, int, int);                                                   \
  template double loss_and_gradient<Scalar>(const tensor::ExecContext&, LossKind, const tensor::ConstMatrix<Scalar>&,  \
                                            const Targets<Scalar>&, Scalar, const tensor::Matrix<Scalar>&);            \
  template double vocab_parallel_cross_entropy<Scalar>(const tensor::ExecContext&, Collectives&,                       \
                                                       const tensor::ConstMatrix<Scalar>&, const tensor::ConstLabels&, \
                                                       int, int, Scalar, const tensor::Matrix<Scalar>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::model
