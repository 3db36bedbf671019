#pragma once
// Where samples come from: the interface that the sequential reference and
// the pipeline's data feed share, so both draw bitwise the same batches.
// Implementations: model::SyntheticData (seeded teachers) and
// runtime::DatasetSource (an HDF5 dataset, injected by the runtime, since
// model does not depend on io).
//
// A position is a sample's place in the global batch of a step: replica r
// of d takes positions [r·B/d, (r+1)·B/d), microbatch k of it b rows from
// there. What sample a position holds is the source's business, but it must
// be a pure function of (step, position), so that any rank can fill any
// microbatch and a restart continues where the run stopped.

#include <cstdint>

#include "kpipe/model/training/loss.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::model {

template <class Scalar>
class DataSource {
 public:
  virtual ~DataSource() = default;

  // Inputs of positions [first, first + X.extent(0)) of step `step`.
  virtual void fill_inputs(std::int64_t step, std::int64_t first, const tensor::Matrix<Scalar>& X) const = 0;
  // Targets of the same positions (labels or values, by the task).
  virtual void fill_targets(std::int64_t step, std::int64_t first, const Targets<Scalar>& targets) const = 0;
  // The same, for a caller that still holds the inputs fill_inputs made for
  // these positions (a rank that runs both the first and the last model
  // stage): a source whose targets derive from its inputs may read them
  // instead of drawing them again. By default, fill_targets.
  virtual void fill_targets_of_inputs(std::int64_t step, std::int64_t first, const tensor::ConstMatrix<Scalar>& inputs,
                                      const Targets<Scalar>& targets) const {
    (void)inputs;
    fill_targets(step, first, targets);
  }
  // How many predictions of positions [first, first + count) of step `step`
  // take no loss (their label is kernels::ignored_label): packed documents'
  // predictions across a boundary. By default none.
  virtual std::int64_t ignored_predictions(std::int64_t step, std::int64_t first, std::int64_t count) const {
    (void)step, (void)first, (void)count;
    return 0;
  }
  // Samples in one pass over the data (an epoch); 0 when unlimited.
  virtual std::int64_t samples() const { return 0; }
};

}  // namespace kpipe::model
