#include "kpipe/runtime/execution/loss_head.hpp"

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/accuracy.hpp"
#include "kpipe/model/tensor_parallel.hpp"

namespace kpipe::runtime {

template <class Scalar>
LossHead<Scalar>::LossHead(const model::TrainerSpec& spec, int replica, DataFeed<Scalar>& feed,
                           model::Collectives& collectives, tensor::ExecContext& exec)
    : model_(spec.model),
      global_batch_(spec.global_batch),
      mean_factor_(model::mean_loss_factor(spec.model, spec.global_batch)),
      scale_(static_cast<Scalar>(mean_factor_)),
      replica_(replica),
      data_parallel_(spec.data_parallel),
      feed_(feed),
      collectives_(collectives),
      vocab_(spec.model.vocab),
      vocab_shard_(spec.model.token_sequences() ? model::Shard::along(1, collectives.rank(model::Group::tensor),
                                                                      collectives.size(model::Group::tensor))
                                                : model::Shard::whole()),
      exec_(exec) {}

template <class Scalar>
void LossHead<Scalar>::start_step(int step, double loss_scale) {
  evaluation_ = {};
  failure_ = nullptr;
  loss_scale_ = loss_scale;
  mean_factor_ = model::mean_loss_factor(model_, global_batch_, feed_.ignored_in_step(step));
  // A power-of-two loss scale times the factor is exact, in double and in Scalar.
  scale_ = static_cast<Scalar>(loss_scale * mean_factor_);
}

template <class Scalar>
double LossHead<Scalar>::loss(int step, int mb, const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Scalar>& dY) {
  const auto& targets = feed_.targets(step, mb);
  double value = 0;
  if (vocab_shard_.full()) {
    value = model::loss_and_gradient(exec_, model_.loss, Y, targets, scale_, dY);
  } else {
    const std::int64_t predictions = targets.labels.extent(0);
    const auto logits = model::by_prediction(Y, predictions);
    value = model::vocab_parallel_cross_entropy(exec_, collectives_, logits, targets.labels,
                                                vocab_shard_.index * logits.extent_int(1), vocab_, scale_,
                                                model::by_prediction(dY, predictions));
  }
  if (!failure_) {
    try {
      model::require_finite_loss(value, step, mb, replica_, data_parallel_);
    } catch (const Error&) {
      failure_ = std::current_exception();
    }
  }
  return value / loss_scale_;  // exact: the loss as if unscaled
}

template <class Scalar>
void LossHead<Scalar>::evaluate(int step, int mb, const tensor::Matrix<Scalar>& Y) {
  const auto& targets = feed_.targets(step, mb);
  const bool classifies = model_.loss == model::LossKind::cross_entropy;
  const auto logits = whole_predictions(Y, classifies ? targets.labels.extent(0) : 0);
  const tensor::Matrix<Scalar> dY = scratch_.take(logits.extent_int(0), logits.extent_int(1));
  evaluation_.loss +=
      model::loss_and_gradient(exec_, model_.loss, logits, targets, static_cast<Scalar>(mean_factor_), dY);
  if (classifies) {
    // One prediction per label: a transformer's rows hold T of them, some of which may take no loss.
    const auto predictions = model::by_prediction(logits, targets.labels.extent(0));
    evaluation_.correct += kernels::count_correct<Scalar>(exec_.space(), predictions, targets.labels);
    evaluation_.samples += predictions.extent(0) - feed_.ignored_in_microbatch(step, mb);
  } else {
    evaluation_.samples += Y.extent(0);
  }
}

template <class Scalar>
tensor::Matrix<Scalar> LossHead<Scalar>::whole_predictions(const tensor::Matrix<Scalar>& Y, std::int64_t predictions) {
  if (vocab_shard_.full()) return Y;
  return model::gather_shards<Scalar>(exec_, collectives_, vocab_shard_, model::by_prediction(Y, predictions));
}

template class LossHead<float>;
template class LossHead<double>;

}  // namespace kpipe::runtime
