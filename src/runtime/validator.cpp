#include "kpipe/runtime/validator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "kpipe/runtime/dataset_source.hpp"
#include "kpipe/schedule/generate.hpp"

namespace kpipe::runtime {

namespace {

template <class Scalar>
MicrobatchIO<Scalar> validation_io(DataFeed<Scalar>& feed, LossHead<Scalar>& head) {
  MicrobatchIO<Scalar> io;
  io.inputs = [&feed](int step, int mb, const Matrix<Scalar>& X) { feed.inputs(step, mb, X); };
  io.outputs = [&head](int step, int mb, const Matrix<Scalar>& Y) { head.evaluate(step, mb, Y); };
  return io;
}

}  // namespace

template <class Scalar>
Validator<Scalar>::Validator(const config::RunConfig& config, const model::TrainerSpec& spec,
                             const schedule::Schedule& training, const comm::ProcessGrid& grid,
                             std::vector<model::Stage<Scalar>*> chunks, comm::Transport<Scalar>& transport,
                             tensor::ExecContext& exec)
    : schedule_(schedule::forward_schedule(training, training.m)),
      feed_(spec, grid.replica(), make_data_source<Scalar>(config.data, spec, io::Split::test, exec)),
      head_(spec, grid.replica(), feed_, exec),
      executor_(schedule_, grid, std::move(chunks), spec.microbatch_size, transport, validation_io(feed_, head_), {},
                exec),
      // Synthetic data has no end: its validation batches are as many as asked for.
      batches_(feed_.samples() == 0 ? std::max(1, config.train.eval_batches)
                                    : static_cast<int>(feed_.samples() / spec.global_batch)) {
  if (batches_ < 1) {
    throw input_error(
        fmt::format("train.eval_every needs a validation split of at least train.global_batch = {} "
                    "sequences, but it holds {}; lower train.global_batch or set train.eval_every = 0",
                    spec.global_batch, feed_.samples()));
  }
}

template <class Scalar>
Evaluation Validator<Scalar>::evaluate(int batches) {
  const int count = batches <= 0 || batches > batches_ ? batches_ : batches;
  Evaluation total;
  for (int batch = 0; batch < count; ++batch) {
    head_.start_step();
    executor_.run_step(batch);
    total += head_.evaluation();
    ++total.batches;
  }
  return total;
}

template class Validator<float>;
template class Validator<double>;

}  // namespace kpipe::runtime
