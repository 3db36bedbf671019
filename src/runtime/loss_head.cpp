#include "kpipe/runtime/loss_head.hpp"

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/accuracy.hpp"

namespace kpipe::runtime {

template <class Scalar>
LossHead<Scalar>::LossHead(const model::TrainerSpec& spec, int replica, DataFeed<Scalar>& feed,
                           tensor::ExecContext& exec)
    : kind_(spec.model.loss),
      scale_(static_cast<Scalar>(model::loss_scale(spec.model, spec.global_batch))),
      replica_(replica),
      data_parallel_(spec.data_parallel),
      feed_(feed),
      exec_(exec) {}

template <class Scalar>
double LossHead<Scalar>::loss(int step, int mb, const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Scalar>& dY) {
  const double value = model::loss_and_gradient(exec_, kind_, Y, feed_.targets(step, mb), scale_, dY);
  if (!failure_) {
    try {
      model::require_finite_loss(value, step, mb, replica_, data_parallel_);
    } catch (const Error&) {
      failure_ = std::current_exception();
    }
  }
  return value;
}

template <class Scalar>
void LossHead<Scalar>::evaluate(int step, int mb, const tensor::Matrix<Scalar>& Y) {
  const auto& targets = feed_.targets(step, mb);
  const tensor::Matrix<Scalar> dY = scratch_.take(Y.extent_int(0), Y.extent_int(1));
  evaluation_.loss += model::loss_and_gradient(exec_, kind_, Y, targets, scale_, dY);
  if (kind_ == model::LossKind::cross_entropy) {
    // One prediction per label: a transformer's rows hold T of them.
    const auto predictions = model::by_prediction(Y, targets.labels.extent(0));
    evaluation_.correct += kernels::count_correct<Scalar>(exec_.space(), predictions, targets.labels);
    evaluation_.samples += predictions.extent(0);
  } else {
    evaluation_.samples += Y.extent(0);
  }
}

template class LossHead<float>;
template class LossHead<double>;

}  // namespace kpipe::runtime
