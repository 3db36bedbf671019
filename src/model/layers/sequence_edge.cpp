#include "kpipe/model/layers/detail/sequence_edge.hpp"

namespace kpipe::model {

template <class Scalar>
void SequenceEdgeLayer<Scalar>::keep_own_rows(const tensor::Tensor& whole, const tensor::Tensor& local) const {
  const auto mine = local.matrix<Scalar>();
  const std::size_t rows = mine.extent(0), first = rows * env_.collectives.rank(Group::tensor);
  Kokkos::deep_copy(env_.exec.space(), mine,
                    Kokkos::subview(whole.matrix<Scalar>(), std::make_pair(first, first + rows), Kokkos::ALL));
}

template <class Scalar>
void SequenceEdgeLayer<Scalar>::forward(tensor::TensorList inputs, tensor::TensorList outputs, Context*) const {
  const auto region = env_.exec.region("kpipe::model::sequence_edge::forward");
  if (edge_ == SequenceEdge::enter) {
    keep_own_rows(inputs.at(0), outputs.at(0));
  } else {
    env_.collectives.all_gather(Group::tensor, inputs.at(0), outputs.at(0));
  }
}

template <class Scalar>
void SequenceEdgeLayer<Scalar>::backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads,
                                               Context&) const {
  const auto region = env_.exec.region("kpipe::model::sequence_edge::backward_input");
  if (input_grads.at(0).matrix<Scalar>().size() == 0) return;  // the data's gradient is never wanted
  if (edge_ == SequenceEdge::enter) {
    env_.collectives.all_gather(Group::tensor, output_grads.at(0), input_grads.at(0));
  } else {
    keep_own_rows(output_grads.at(0), input_grads.at(0));
  }
}

template class SequenceEdgeLayer<float>;
template class SequenceEdgeLayer<double>;

}  // namespace kpipe::model
