#pragma once
// The layers kpipe builds models from. Each owns its parameters and launches
// kernels from the kernels module; none holds per-microbatch state.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/model/layer.hpp"
#include "kpipe/model/spec.hpp"

namespace kpipe::model {

// Y = X W + b with W input x output (so the GEMMs need no transposition on the
// forward pass) and b a 1 x output row. W is uniform in +-1/sqrt(input) from
// the counter-based stream `init_key`, b is zero.
template <class Scalar>
class Linear final : public Layer<Scalar> {
 public:
  Linear(int input, int output, const std::string& name, std::uint64_t init_key, kernels::GemmPath gemm);

  int input_dim() const override { return static_cast<int>(weight_.value.extent(0)); }
  int output_dim() const override { return static_cast<int>(weight_.value.extent(1)); }
  void forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const override;
  void backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX, Context<Scalar>& ctx) const override;
  void backward_weight(Context<Scalar>& ctx) override;
  std::vector<Parameter<Scalar>> parameters() const override { return {weight_, bias_}; }

 private:
  Parameter<Scalar> weight_;
  Parameter<Scalar> bias_;
  kernels::GemmPath gemm_;
};

// Y = f(X) elementwise.
template <class Scalar>
class ActivationLayer final : public Layer<Scalar> {
 public:
  ActivationLayer(kernels::Activation f, int dim) : f_(f), dim_(dim) {}

  int input_dim() const override { return dim_; }
  int output_dim() const override { return dim_; }
  void forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const override;
  void backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX, Context<Scalar>& ctx) const override;
  void backward_weight(Context<Scalar>& ctx) override { ctx.saved.clear(); }

 private:
  kernels::Activation f_;
  int dim_;
};

// Layer normalisation over features with epsilon 1e-5; gamma starts at one,
// beta at zero.
template <class Scalar>
class LayerNorm final : public Layer<Scalar> {
 public:
  LayerNorm(int dim, const std::string& name);

  int input_dim() const override { return static_cast<int>(gamma_.value.extent(1)); }
  int output_dim() const override { return input_dim(); }
  void forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const override;
  void backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX, Context<Scalar>& ctx) const override;
  void backward_weight(Context<Scalar>& ctx) override;
  std::vector<Parameter<Scalar>> parameters() const override { return {gamma_, beta_}; }

 private:
  Parameter<Scalar> gamma_;
  Parameter<Scalar> beta_;
};

// Layers applied one after the other.
template <class Scalar>
class Sequential final : public Layer<Scalar> {
 public:
  explicit Sequential(std::vector<std::unique_ptr<Layer<Scalar>>> layers);

  int input_dim() const override { return layers_.front()->input_dim(); }
  int output_dim() const override { return layers_.back()->output_dim(); }
  void forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const override;
  void backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX, Context<Scalar>& ctx) const override;
  void backward_weight(Context<Scalar>& ctx) override;
  std::vector<Parameter<Scalar>> parameters() const override;

 private:
  std::vector<std::unique_ptr<Layer<Scalar>>> layers_;
};

// Y = X + branch(X).
template <class Scalar>
class Residual final : public Layer<Scalar> {
 public:
  explicit Residual(std::unique_ptr<Layer<Scalar>> branch);

  int input_dim() const override { return branch_->input_dim(); }
  int output_dim() const override { return branch_->output_dim(); }
  void forward(const ConstMatrix<Scalar>& X, const Matrix<Scalar>& Y, Context<Scalar>* ctx) const override;
  void backward_input(const ConstMatrix<Scalar>& dY, const Matrix<Scalar>& dX, Context<Scalar>& ctx) const override;
  void backward_weight(Context<Scalar>& ctx) override;
  std::vector<Parameter<Scalar>> parameters() const override { return branch_->parameters(); }

 private:
  std::unique_ptr<Layer<Scalar>> branch_;
};

// Global layer `index` of `model`, initialised from (model.seed, index) only,
// so every partition builds the same weights.
template <class Scalar>
std::unique_ptr<Layer<Scalar>> make_layer(const ModelSpec& model, int index, kernels::GemmPath gemm);

}  // namespace kpipe::model
