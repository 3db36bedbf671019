#pragma once
// Samples from an HDF5 dataset (io::DatasetFile), served through the
// model::DataSource interface the sequential reference and the pipeline share.
//
// Training: the samples form an endless stream of epochs, each a permutation
// of the N training rows seeded by (data.seed, epoch); the global batch of
// step s is stream positions [s·B, (s+1)·B), so batches straddle epochs when
// B does not divide N, and a restart at step s reads exactly the samples an
// uninterrupted run would. Inference (the test split): step s holds test rows
// [s·B, (s+1)·B) in file order.
//
// A microbatch's rows are read from the file by hyperslab on the rank that
// needs them (the first stage its inputs, the last its targets), staged in
// host memory and copied to the device.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/io/dataset.hpp"
#include "kpipe/model/data/data_source.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/tensor/exec_context.hpp"

namespace kpipe::runtime {

// Epoch `epoch`'s order of n samples: a Fisher-Yates shuffle driven by the
// counter-based stream of (seed, epoch), the same on every rank.
std::vector<std::int64_t> epoch_permutation(std::uint64_t seed, std::int64_t epoch, std::int64_t n);

template <class Scalar>
class DatasetSource final : public model::DataSource<Scalar> {
 public:
  // Opens and validates `path`, and checks it against the model: features =
  // model.input_dim, classes or target values = model.output_dim, int32 labels
  // for classification and float targets for regression (input errors).
  DatasetSource(const std::string& path, io::Split split, const model::TrainerSpec& spec, tensor::ExecContext& exec);

  void fill_inputs(std::int64_t step, std::int64_t first, const tensor::Matrix<Scalar>& X) const override;
  void fill_targets(std::int64_t step, std::int64_t first, const model::Targets<Scalar>& targets) const override;
  std::int64_t samples() const override { return file_.rows(); }

  // The dataset row at `position` of step `step`'s global batch.
  std::int64_t row(std::int64_t step, std::int64_t position) const;
  const io::DatasetFile& file() const { return file_; }

 private:
  // rows_ = the rows of positions [first, first + count) of step `step`.
  void gather_rows(std::int64_t step, std::int64_t first, int count) const;

  io::DatasetFile file_;
  std::uint64_t seed_;
  std::int64_t global_batch_;
  tensor::ExecContext& exec_;
  // Caches reused by every microbatch, so a step allocates nothing after the first.
  mutable std::int64_t epoch_ = -1;
  mutable std::vector<std::int64_t> permutation_;
  mutable std::vector<std::int64_t> rows_;
  mutable std::vector<Scalar> staged_values_;
  mutable std::vector<int> staged_labels_;
};

}  // namespace kpipe::runtime
