#include "kpipe/runtime/data/data_feed.hpp"

#include <utility>

namespace kpipe::runtime {

template <class Scalar>
DataFeed<Scalar>::DataFeed(const model::TrainerSpec& spec, int replica, std::unique_ptr<model::DataSource<Scalar>> data,
                           bool keep_inputs)
    : replica_offset_(static_cast<std::int64_t>(replica) * (spec.global_batch / spec.data_parallel)),
      microbatch_size_(spec.microbatch_size),
      global_batch_(spec.global_batch),
      data_(std::move(data)),
      targets_(model::make_targets<Scalar>(spec.model, spec.microbatch_size)),
      keep_inputs_(keep_inputs) {
  if (spec.document_separator >= 0) {
    document_tokens_ = tensor::uninitialized_matrix<Scalar>("kpipe::runtime::document_tokens", spec.microbatch_size,
                                                            spec.model.input_dim);
  }
}

template <class Scalar>
std::int64_t DataFeed<Scalar>::first_sample(int mb) const {
  return replica_offset_ + static_cast<std::int64_t>(mb) * microbatch_size_;
}

template <class Scalar>
void DataFeed<Scalar>::inputs(int step, int mb, const tensor::Matrix<Scalar>& X) {
  data_->fill_inputs(step, first_sample(mb), X);
  if (!keep_inputs_) return;
  if (static_cast<std::size_t>(mb) >= kept_.size()) kept_.resize(static_cast<std::size_t>(mb) + 1);
  kept_[static_cast<std::size_t>(mb)] = {step, X};
}

template <class Scalar>
const model::Targets<Scalar>& DataFeed<Scalar>::targets(int step, int mb) {
  const auto k = static_cast<std::size_t>(mb);
  if (k < kept_.size() && kept_[k].step == step) {
    data_->fill_targets_of_inputs(step, first_sample(mb), kept_[k].inputs, targets_);
    kept_[k] = {};
  } else {
    data_->fill_targets(step, first_sample(mb), targets_);
  }
  return targets_;
}

template <class Scalar>
void DataFeed<Scalar>::documents(int step, int mb, model::Documents& documents, const tensor::ExecutionSpace& space) {
  data_->fill_inputs(step, first_sample(mb), document_tokens_);
  documents.assign<Scalar>(space, document_tokens_);
}

template class DataFeed<float>;
template class DataFeed<double>;

}  // namespace kpipe::runtime
