#pragma once
// Where an MLP's sequence-parallel region starts and ends.

#include <vector>

#include "kpipe/model/layer.hpp"

namespace kpipe::model {

// Where an MLP's sequence-parallel region starts and ends (the transformer's
// embedding and LM head do this themselves). `enter`: the whole input rows
// (the data, the same on every rank) to this rank's 1/t of them; the input
// gradient is the group's gathered rows. `leave`: this rank's rows to the
// group's gathered rows (the loss sees whole rows, computed alike on every
// rank); the input gradient is this rank's rows of that whole gradient.
enum class SequenceEdge { enter, leave };

template <class Scalar>
class SequenceEdgeLayer final : public Layer<Scalar> {
 public:
  SequenceEdgeLayer(SequenceEdge edge, int dim, LayerEnvironment env)
      : env_(env), edge_(edge), dim_(dim), ranks_(env.collectives.size(Group::tensor)) {}

  const char* kind() const override { return "sequence_edge"; }
  int input_dim() const override { return dim_; }
  int output_dim() const override { return dim_; }
  int output_rows(int rows) const override { return edge_ == SequenceEdge::enter ? rows / ranks_ : rows * ranks_; }
  int input_rows(int rows) const override { return edge_ == SequenceEdge::enter ? rows * ranks_ : rows / ranks_; }
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { ctx.clear(); }

 private:
  // local = this rank's 1/t of whole's rows.
  void keep_own_rows(const tensor::Tensor& whole, const tensor::Tensor& local) const;

  LayerEnvironment env_;
  SequenceEdge edge_;
  int dim_;
  int ranks_;
};

}  // namespace kpipe::model
