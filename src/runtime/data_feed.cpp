#include "kpipe/runtime/data_feed.hpp"

#include <utility>

namespace kpipe::runtime {

template <class Scalar>
DataFeed<Scalar>::DataFeed(const model::TrainerSpec& spec, int replica, std::unique_ptr<model::DataSource<Scalar>> data)
    : replica_offset_(static_cast<std::int64_t>(replica) * (spec.global_batch / spec.data_parallel)),
      microbatch_size_(spec.microbatch_size),
      data_(std::move(data)),
      targets_(model::make_targets<Scalar>(spec.model, spec.microbatch_size)) {}

template <class Scalar>
std::int64_t DataFeed<Scalar>::first_sample(int mb) const {
  return replica_offset_ + static_cast<std::int64_t>(mb) * microbatch_size_;
}

template <class Scalar>
void DataFeed<Scalar>::inputs(int step, int mb, const tensor::Matrix<Scalar>& X) const {
  data_->fill_inputs(step, first_sample(mb), X);
}

template <class Scalar>
const model::Targets<Scalar>& DataFeed<Scalar>::targets(int step, int mb) {
  data_->fill_targets(step, first_sample(mb), targets_);
  return targets_;
}

template class DataFeed<float>;
template class DataFeed<double>;

}  // namespace kpipe::runtime
