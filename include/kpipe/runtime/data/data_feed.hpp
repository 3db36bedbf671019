#pragma once
// Where a replica's microbatches come from: the inputs of the first model
// stage and the targets of the last, for (step, microbatch). Replica r of d
// trains on positions [r·B/d, (r+1)·B/d) of every step's global batch, drawn
// from the same model::DataSource the sequential reference uses
// (runtime::make_data_source), which the bitwise tests rest on.

#include <cstdint>
#include <memory>
#include <vector>

#include "kpipe/model/data/data_source.hpp"
#include "kpipe/model/training/loss.hpp"
#include "kpipe/model/training/trainer.hpp"

namespace kpipe::runtime {

template <class Scalar>
class DataFeed {
 public:
  // `keep_inputs`: this rank runs the first and the last model stage (one
  // stage, or ZB-V's rank 0), so the targets may be computed from the inputs
  // handed to F (DataSource::fill_targets_of_inputs) rather than drawn again.
  DataFeed(const model::TrainerSpec& spec, int replica, std::unique_ptr<model::DataSource<Scalar>> data,
           bool keep_inputs = false);

  // X must stay unchanged until the microbatch's targets are taken, as a
  // stage keeps its input until W.
  void inputs(int step, int mb, const tensor::Matrix<Scalar>& X);
  // The targets of microbatch mb, valid until the next call.
  const model::Targets<Scalar>& targets(int step, int mb);
  // Samples in one pass over the data; 0 when unlimited (synthetic).
  std::int64_t samples() const { return data_->samples(); }
  // Packed documents: assigns microbatch mb's documents on `space`, from its
  // tokens, which every rank can draw (model::Documents).
  void documents(int step, int mb, model::Documents& documents, const tensor::ExecutionSpace& space);
  // The predictions that take no loss in the step's global batch, and in microbatch mb.
  std::int64_t ignored_in_step(int step) const { return data_->ignored_predictions(step, 0, global_batch_); }
  std::int64_t ignored_in_microbatch(int step, int mb) const {
    return data_->ignored_predictions(step, first_sample(mb), microbatch_size_);
  }

 private:
  std::int64_t first_sample(int mb) const;

  std::int64_t replica_offset_;
  int microbatch_size_;
  int global_batch_;
  std::unique_ptr<model::DataSource<Scalar>> data_;
  model::Targets<Scalar> targets_;
  // keep_inputs: by microbatch, the step and inputs handed out and not yet
  // turned into targets (held, a pooled buffer stays taken); step -1: none.
  struct Kept {
    int step = -1;
    tensor::Matrix<Scalar> inputs;
  };
  bool keep_inputs_;
  std::vector<Kept> kept_;
  tensor::Matrix<Scalar> document_tokens_;  // packed documents: a microbatch's tokens
};

}  // namespace kpipe::runtime
