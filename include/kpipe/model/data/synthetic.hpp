#pragma once
// Synthetic training data from seeded teacher networks, generated on the
// device. Sample i of step s is a pure function of (data.seed, s, i), drawn
// from counter-based streams, so any rank generates exactly its own samples
// and the data never depends on the partition.
//
// classification: a linear teacher holds one centre per class (output_dim
//   rows of standard normal values); a sample is a centre picked by the stream
//   plus unit normal noise, and its label is the argmax of the teacher's
//   logits x . c - |c|^2 / 2, i.e. the nearest centre.
// regression: inputs are standard normal; targets are the outputs of a
//   teacher with one tanh hidden layer of teacher_width units.

#include <cstdint>

#include "kpipe/config/run_config.hpp"
#include "kpipe/model/data/data_source.hpp"
#include "kpipe/model/training/loss.hpp"

namespace kpipe::model {

using config::Task;

struct DataSpec {
  Task task = Task::classification;
  std::uint64_t seed = 0;
  int input_dim = 0;
  int output_dim = 0;  // classes or target values
};

template <class Scalar>
class SyntheticData final : public DataSource<Scalar> {
 public:
  static constexpr int teacher_width = 64;

  // `exec` must outlive the data: generation runs on its instance, and the
  // teacher's temporaries come from its pool.
  SyntheticData(const DataSpec& spec, tensor::ExecContext& exec);

  // Inputs of samples [first, first + X.extent(0)) of step `step`.
  void fill_inputs(std::int64_t step, std::int64_t first, const tensor::Matrix<Scalar>& X) const override;
  // Targets of the same samples (labels or values, by the task). Computes the
  // inputs itself, so the last stage needs no copy of them.
  void fill_targets(std::int64_t step, std::int64_t first, const Targets<Scalar>& targets) const override;
  // The teacher's targets of inputs the caller holds, without drawing them again.
  void fill_targets_of_inputs(std::int64_t step, std::int64_t first, const tensor::ConstMatrix<Scalar>& inputs,
                              const Targets<Scalar>& targets) const override;

 private:
  void teach(const tensor::ConstMatrix<Scalar>& X, const Targets<Scalar>& targets) const;

  DataSpec spec_;
  tensor::ExecContext& exec_;
  tensor::Matrix<Scalar> centres_;  // classification: output_dim x input_dim
  // classification: centres_ transposed, input_dim x output_dim rounded up to
  // a whole number of nearest_centre's class blocks, the padding zero.
  tensor::Matrix<Scalar> centres_by_feature_;
  tensor::Matrix<Scalar> hidden_weights_;  // regression: input_dim x teacher_width
  tensor::Matrix<Scalar> output_weights_;  // regression: teacher_width x output_dim
};

}  // namespace kpipe::model
