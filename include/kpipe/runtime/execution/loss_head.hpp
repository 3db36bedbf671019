#pragma once
// What the last model stage does with its output: in training the scaled loss
// and its gradient (checked for NaN/Inf at once), in inference the loss and
// the classification accuracy, summed over a step.

#include <cstdint>
#include <exception>

#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/data/data_feed.hpp"
#include "kpipe/tensor/buffer_pool.hpp"

namespace kpipe::runtime {

// What a forward-only step measured at the last model stage.
struct Evaluation {
  double loss = 0.0;         // Σ scaled losses, as in training
  std::int64_t correct = 0;  // classification: samples whose argmax is the label
  std::int64_t samples = 0;  // predictions: samples, or tokens of a language model
  int batches = 0;           // global batches (steps) evaluated

  Evaluation& operator+=(const Evaluation& other) {
    loss += other.loss;
    correct += other.correct;
    samples += other.samples;
    batches += other.batches;
    return *this;
  }
};

template <class Scalar>
class LossHead {
 public:
  // A transformer's logits are vocabulary-parallel over the tensor group of
  // `collectives` (each rank holds vocab/t columns); the loss then never
  // gathers them, evaluation (accuracy needs the argmax) does.
  LossHead(const model::TrainerSpec& spec, int replica, DataFeed<Scalar>& feed, model::Collectives& collectives,
           tensor::ExecContext& exec);

  // Returns the scaled loss of Y (its share of the step's mean loss) and
  // writes its gradient to dY, multiplied by the step's loss scale (fp16). A
  // NaN or Inf loss does not stop the step here (the other ranks are mid-step
  // and would wait for this one): it is kept as the step's failure, which the
  // ranks agree on before the optimizer step, so no update ever uses it.
  double loss(int step, int mb, const tensor::Matrix<Scalar>& Y, const tensor::Matrix<Scalar>& dY);
  // Adds Y's loss and accuracy to this step's evaluation.
  void evaluate(int step, int mb, const tensor::Matrix<Scalar>& Y);

  const Evaluation& evaluation() const { return evaluation_; }
  // The first non-finite loss of this step on this rank, or nullptr.
  std::exception_ptr failure() const { return failure_; }
  // `loss_scale`: what this step's loss gradients are multiplied by
  // (model::LossScaler; 1 but in fp16 runs).
  void start_step(int step, double loss_scale);

 private:
  // Y as one row per prediction, gathered whole when vocabulary-parallel.
  tensor::Matrix<Scalar> whole_predictions(const tensor::Matrix<Scalar>& Y, std::int64_t predictions);

  model::ModelSpec model_;
  int global_batch_;
  double mean_factor_;  // of the step (model::mean_loss_factor): the microbatch losses add up to its mean
  Scalar scale_;        // mean_factor_ times the loss scale: as the sequential reference scales, bitwise
  double loss_scale_ = 1;
  int replica_;
  int data_parallel_;
  DataFeed<Scalar>& feed_;
  model::Collectives& collectives_;
  int vocab_;                 // the classes of a prediction
  model::Shard vocab_shard_;  // this rank's columns of the logits (whole unless a tensor-parallel transformer)
  tensor::ExecContext& exec_;
  Evaluation evaluation_;
  std::exception_ptr failure_;
  // Evaluation's loss kernel also writes dY, which nobody reads.
  tensor::BufferPool<tensor::Matrix<Scalar>> scratch_{"kpipe::runtime::evaluation_scratch"};
};

}  // namespace kpipe::runtime
