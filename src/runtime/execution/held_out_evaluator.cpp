#include "kpipe/runtime/execution/held_out_evaluator.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/runtime/data/dataset_source.hpp"
#include "kpipe/schedule/generate.hpp"

namespace kpipe::runtime {

namespace {

template <class Scalar>
MicrobatchIO<Scalar> validation_io(DataFeed<Scalar>& feed, LossHead<Scalar>& head, model::Documents* documents,
                                   tensor::ExecContext& exec) {
  MicrobatchIO<Scalar> io;
  io.inputs = [&feed](int step, int mb, const Matrix<Scalar>& X) { feed.inputs(step, mb, X); };
  io.outputs = [&head](int step, int mb, const Matrix<Scalar>& Y) { head.evaluate(step, mb, Y); };
  if (documents) {
    io.documents = [&feed, documents, &exec](int step, int mb) { feed.documents(step, mb, *documents, exec.space()); };
  }
  return io;
}

// train.eval_batches of the split's `available` whole batches: all of them
// when it is 0 or more than there are. Synthetic data has no end
// (available = 0): as many as asked for, at least one.
int evaluated_batches(std::int64_t available, int asked) {
  if (available == 0) return std::max(1, asked);
  return asked <= 0 || asked > available ? static_cast<int>(available) : asked;
}

}  // namespace

template <class Scalar>
HeldOutEvaluator<Scalar>::HeldOutEvaluator(const config::RunConfig& config, const model::TrainerSpec& spec,
                                           const schedule::Schedule& training, const comm::ProcessGrid& grid,
                                           std::vector<model::Stage<Scalar>*> chunks, model::Documents* documents,
                                           comm::Transport& transport, model::Collectives& collectives,
                                           tensor::ExecContext& exec)
    : schedule_(schedule::forward_schedule(training, training.m)),
      feed_(spec, grid.replica(), make_data_source<Scalar>(config.data, spec, io::Split::test, exec),
            schedule_.placement.holds_first_and_last(grid.pipeline_rank())),
      head_(spec, grid.replica(), feed_, collectives, exec),
      executor_(schedule_, grid, std::move(chunks), spec.microbatch_size, transport,
                validation_io(feed_, head_, documents, exec), {}, exec),
      batches_(evaluated_batches(feed_.samples() / spec.global_batch, config.train.eval_batches)) {
  fault::inject(fault::Phase::setup_evaluator, grid.world_rank());
  if (batches_ < 1) {
    throw input_error(
        fmt::format("train.eval_every needs a validation split of at least train.global_batch = {} "
                    "sequences, but it holds {}; lower train.global_batch or set train.eval_every = 0",
                    spec.global_batch, feed_.samples()));
  }
}

template <class Scalar>
Evaluation HeldOutEvaluator<Scalar>::evaluate() {
  Evaluation total;
  for (int batch = 0; batch < batches_; ++batch) {
    head_.start_step(batch, 1.0);  // evaluation computes no gradient to scale
    executor_.run_step(batch);
    total += head_.evaluation();
    ++total.batches;
  }
  return total;
}

template class HeldOutEvaluator<float>;
template class HeldOutEvaluator<double>;

}  // namespace kpipe::runtime
