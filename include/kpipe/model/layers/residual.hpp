#pragma once
// The composite Y = X + branch(X).

#include <memory>
#include <vector>

#include "kpipe/model/layer.hpp"

namespace kpipe::model {

// Y = X + branch(X). Saves nothing itself: one child context, the branch's.
template <class Scalar>
class Residual final : public Layer<Scalar> {
 public:
  Residual(std::unique_ptr<Layer<Scalar>> branch, LayerEnvironment env);

  const char* kind() const override { return "residual"; }
  int input_dim() const override { return branch_->input_dim(); }
  int output_dim() const override { return branch_->output_dim(); }
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override;
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override;
  int token_output_dim() const override { return branch_->token_output_dim(); }
  std::vector<Parameter<Scalar>> parameters() const override { return branch_->parameters(); }
  void weights_changed() override { branch_->weights_changed(); }

 private:
  // outputs = inputs + what run_branch(branch output) writes.
  template <class RunBranch>
  void add_branch(tensor::TensorList inputs, tensor::TensorList outputs, const char* region,
                  const RunBranch& run_branch) const;

  LayerEnvironment env_;
  std::unique_ptr<Layer<Scalar>> branch_;
};

}  // namespace kpipe::model
