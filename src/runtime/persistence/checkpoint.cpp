#include "kpipe/runtime/persistence/checkpoint.hpp"

#include <algorithm>

#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/watchdog.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/version.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/model/tensor_parallel.hpp"
#include "kpipe/runtime/execution/grid_collectives.hpp"
#include "kpipe/runtime/persistence/checkpoint_ranks.hpp"

namespace kpipe::runtime {

namespace {

// A tensor this rank holds: its global name, its value, and which shard of
// the global tensor it is (tensor parallelism; whole otherwise), and of that
// shard the rows `rows` of `shard_row_count` (train.distributed_optimizer's
// state; all of them otherwise). A tied copy's tensors are read by their
// owner's name but never written.
template <class Scalar>
struct Held {
  std::string name;
  tensor::Matrix<Scalar> value;
  model::Shard shard;
  bool tied_copy = false;
  model::RowRange rows{0, value.extent_int(0)};
  int shard_row_count = value.extent_int(0);

  bool all_rows() const { return rows.begin == 0 && rows.end == shard_row_count; }
};

template <class Scalar>
std::vector<Held<Scalar>> held_tensors(const Pipeline<Scalar>& pipeline) {
  std::vector<Held<Scalar>> held;
  for (const auto& parameter : pipeline.parameters()) {
    held.push_back(
        {parameter.name, parameter.value, parameter.shard, parameter.tie == model::Parameter<Scalar>::Tie::copy});
  }
  return held;
}

// The optimizer state as this rank keeps it: with train.distributed_optimizer its rows of each.
template <class Scalar>
std::vector<Held<Scalar>> held_state(const Pipeline<Scalar>& pipeline) {
  std::vector<Held<Scalar>> held;
  if (!pipeline.optimizer()) return held;
  for (const auto& state : pipeline.optimizer()->state()) {
    held.push_back({state.name, state.value, state.shard, state.tied_copy, state.rows, state.parameter_rows});
  }
  return held;
}

// The same with each state whole in its tensor shard: the replicas'
// rows gathered (collective over them) where the optimizer is distributed.
template <class Scalar>
std::vector<Held<Scalar>> whole_state(const Pipeline<Scalar>& pipeline) {
  std::vector<Held<Scalar>> held;
  if (!pipeline.optimizer()) return held;
  // Every state gathers, even where this replica's rows are all of them (a
  // bias that fell whole to one replica): the others gather it too.
  auto* shards = pipeline.shard_gather();
  for (const auto& state : pipeline.optimizer()->state()) {
    const auto value = shards ? shards->whole(state.value, state.parameter) : state.value;
    held.push_back({state.name, value, state.shard, state.tied_copy});
  }
  return held;
}

// What of `held` a checkpoint stores: all but the tied copies.
template <class Scalar>
std::vector<Held<Scalar>> written(std::vector<Held<Scalar>> held) {
  held.erase(std::remove_if(held.begin(), held.end(), [](const Held<Scalar>& h) { return h.tied_copy; }), held.end());
  return held;
}

// Whether `held` is this rank's own storage of the tensor a checkpoint holds.
template <class Scalar>
bool stored_as_held(const Held<Scalar>& held) {
  return held.shard.full() && !held.shard.padded() && held.all_rows();
}

// The extent along `axis` of the global tensor of `held`, padding included.
template <class Scalar>
int global_extent(const Held<Scalar>& held, int axis) {
  const int extent = axis == 0 ? held.shard_row_count : held.value.extent_int(1);
  return extent * (held.shard.axis == axis ? held.shard.count : 1);
}

// The global tensors of `held` as checkpoints store them: shards gathered
// whole from their tensor group (collective over it), padding cut off.
template <class Scalar>
std::vector<io::NamedMatrix<Scalar>> gathered(const comm::ProcessGrid& grid, const std::vector<Held<Scalar>>& held) {
  tensor::ExecContext exec;
  GridCollectives collectives(grid, exec);
  std::vector<io::NamedMatrix<Scalar>> named;
  for (const auto& h : held) {
    const auto whole = h.shard.full() ? h.value : model::gather_shards<Scalar>(exec, collectives, h.shard, h.value);
    named.push_back({h.name, model::without_padding<Scalar>(exec.space(), whole, h.shard)});
  }
  return named;
}

// Where to read the stored tensors of `held`: the tensor itself where it is
// stored as held, else a buffer of the stored shape (see keep_shards).
template <class Scalar>
std::vector<io::NamedMatrix<Scalar>> global_buffers(const std::vector<Held<Scalar>>& held) {
  std::vector<io::NamedMatrix<Scalar>> named;
  for (const auto& h : held) {
    if (stored_as_held(h)) {
      named.push_back({h.name, h.value});
      continue;
    }
    int extents[2] = {global_extent(h, 0), global_extent(h, 1)};
    if (h.shard.padded()) extents[h.shard.axis] = h.shard.valid;
    named.push_back(
        {h.name, tensor::uninitialized_matrix<Scalar>("kpipe::runtime::checkpoint_global", extents[0], extents[1])});
  }
  return named;
}

// Each tensor of `held` from its stored tensor read into `buffers`: padded
// with zeros, cut to the rank's shard, and of that to its rows.
template <class Scalar>
void keep_shards(const std::vector<Held<Scalar>>& held, const std::vector<io::NamedMatrix<Scalar>>& buffers) {
  const tensor::ExecutionSpace space;
  for (std::size_t i = 0; i < held.size(); ++i) {
    const Held<Scalar>& h = held[i];
    if (stored_as_held(h)) continue;
    if (h.all_rows()) {
      model::copy_real_shard<Scalar>(space, buffers[i].value, h.shard, h.value);
      continue;
    }
    auto shard = buffers[i].value;
    if (!h.shard.full() || h.shard.padded()) {
      shard = tensor::uninitialized_matrix<Scalar>("kpipe::runtime::checkpoint_shard", h.shard_row_count,
                                                   h.value.extent_int(1));
      model::copy_real_shard<Scalar>(space, buffers[i].value, h.shard, shard);
    }
    Kokkos::deep_copy(space, h.value, h.rows.of(shard));
  }
  space.fence();  // the buffers go out of scope
}

template <class Scalar>
std::vector<io::ModelShape> shapes_of(const std::vector<io::NamedMatrix<Scalar>>& tensors) {
  std::vector<io::ModelShape> shapes;
  for (const auto& tensor : tensors) {
    shapes.push_back({tensor.name, static_cast<std::int64_t>(tensor.value.extent(0)),
                      static_cast<std::int64_t>(tensor.value.extent(1))});
  }
  return shapes;
}

}  // namespace

template <class Scalar>
std::string save_checkpoint(const Pipeline<Scalar>& pipeline, const config::CheckpointConfig& config,
                            const CheckpointRun& run, std::int64_t steps_done) {
  const auto& grid = pipeline.grid();
  io::CheckpointInfo info;
  info.step = steps_done;
  info.optimizer_steps = pipeline.optimizer() ? pipeline.optimizer()->steps() : 0;
  info.deck = run.deck;
  info.stages = pipeline.schedule().p;
  info.virtual_stages = pipeline.schedule().v;
  info.data_parallel = grid.replicas();
  info.schedule = pipeline.schedule().name;
  if (const auto* update = pipeline.update(); update && update->loss_scaler().enabled()) {
    const model::LossScaler::State scaler = update->loss_scaler().state();
    info.loss_scale = io::LossScaleState{scaler.scale, scaler.good_steps, scaler.hysteresis_left};
  }
  // Replicas hold identical weights: replica 0 alone writes them, the global
  // tensors its tensor groups gather, each by its tensor rank 0.
  std::vector<io::NamedMatrix<Scalar>> parameters, state;
  const auto whole = whole_state(pipeline);  // every replica's rows of a distributed optimizer's
  if (grid.replica() == 0) {
    parameters = gathered(grid, written(held_tensors(pipeline)));
    state = gathered(grid, written(whole));
  }
  if (grid.tensor_rank() != 0) {
    parameters.clear();
    state.clear();
  }
  Kokkos::fence();
  // The write's collective HDF5/MPI-IO calls have no request the watchdog
  // could poll: a deadline of runtime.watchdog_seconds plus a second per
  // limits::slowest_write_bytes_per_second of what this rank writes ends the
  // job if a peer stops inside them.
  double bytes = 0.0;
  for (const auto* tensors : {&parameters, &state}) {
    for (const auto& tensor : *tensors) bytes += static_cast<double>(tensor.value.span() * sizeof(Scalar));
  }
  const double seconds = pipeline.watchdog().seconds() + bytes / limits::slowest_write_bytes_per_second;
  const comm::Deadline deadline(pipeline.watchdog(), seconds, "in a checkpoint write (collective HDF5/MPI-IO)");
  try {
    return io::write_checkpoint<Scalar>(CheckpointRanks(grid.world(), "a checkpoint write"), config.path, info,
                                        parameters, state, config.keep, grid.world_rank(), seconds);
  } catch (const io::SharedFileError& e) {
    // Every rank has it (rank 0's rename failed, the disk is full): the job
    // ends with one line, not one per rank. A rank failing alone aborts.
    throw comm::AgreedError(e.kind(), e.what());
  }
}

template <class Scalar>
std::int64_t load_checkpoint(Pipeline<Scalar>& pipeline, const std::string& file) {
  const auto& grid = pipeline.grid();
  const auto held_parameters = held_tensors(pipeline);
  const auto held_states = held_state(pipeline);
  const auto parameters = global_buffers(held_parameters);
  const auto state = global_buffers(held_states);
  fault::inject(fault::Phase::restart_stall, grid.world_rank());
  const auto model =
      io::all_model_shapes(CheckpointRanks(grid.world(), "a checkpoint restart (gathering the model's tensor names)"),
                           shapes_of(parameters));
  const io::CheckpointInfo info = comm::collectively(grid.world(), pipeline.watchdog(), "checkpoint restart", [&] {
    fault::inject(fault::Phase::restart, grid.world_rank());
    io::CheckpointInfo read =
        io::read_checkpoint<Scalar>(file, model, parameters, state, grid.world_rank(), comm::size_of(grid.world()));
    // An fp16 run continues the file's scale history; from any other file it starts afresh.
    StepUpdate<Scalar>* update = pipeline.update();
    if (update && update->loss_scaler().enabled() && read.loss_scale) {
      update->loss_scaler().restore({read.loss_scale->scale, static_cast<int>(read.loss_scale->good_steps),
                                     static_cast<int>(read.loss_scale->hysteresis_left)});
    }
    return read;
  });
  keep_shards(held_parameters, parameters);
  keep_shards(held_states, state);
  if (pipeline.optimizer()) pipeline.optimizer()->set_steps(static_cast<int>(info.optimizer_steps));
  for (int c = 0; c < pipeline.chunk_count(); ++c) pipeline.chunk(c).weights_changed();
  Kokkos::fence();
  return info.step;
}

template std::string save_checkpoint<float>(const Pipeline<float>&, const config::CheckpointConfig&,
                                            const CheckpointRun&, std::int64_t);
template std::string save_checkpoint<double>(const Pipeline<double>&, const config::CheckpointConfig&,
                                             const CheckpointRun&, std::int64_t);
template std::int64_t load_checkpoint<float>(Pipeline<float>&, const std::string&);
template std::int64_t load_checkpoint<double>(Pipeline<double>&, const std::string&);

}  // namespace kpipe::runtime
