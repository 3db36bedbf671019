#include "kpipe/runtime/checkpoint.hpp"

#include "kpipe/comm/agreement.hpp"
#include "kpipe/core/version.hpp"
#include "kpipe/io/checkpoint.hpp"

namespace kpipe::runtime {

namespace {

template <class Scalar>
std::vector<io::NamedMatrix<Scalar>> named_parameters(const Pipeline<Scalar>& pipeline) {
  std::vector<io::NamedMatrix<Scalar>> named;
  for (const auto& parameter : pipeline.parameters()) named.push_back({parameter.name, parameter.value});
  return named;
}

template <class Scalar>
std::vector<io::NamedMatrix<Scalar>> named_state(const Pipeline<Scalar>& pipeline) {
  std::vector<io::NamedMatrix<Scalar>> named;
  if (!pipeline.optimizer()) return named;
  for (const auto& state : pipeline.optimizer()->state()) named.push_back({state.name, state.value});
  return named;
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
  // Replicas hold identical weights: replica 0 alone writes them.
  const bool writes = grid.replica() == 0;
  const auto parameters = writes ? named_parameters(pipeline) : std::vector<io::NamedMatrix<Scalar>>{};
  const auto state = writes ? named_state(pipeline) : std::vector<io::NamedMatrix<Scalar>>{};
  Kokkos::fence();
  return io::write_checkpoint<Scalar>(grid.world(), config.path, info, parameters, state, config.keep,
                                      grid.world_rank());
}

template <class Scalar>
std::int64_t load_checkpoint(Pipeline<Scalar>& pipeline, const std::string& file) {
  const auto& grid = pipeline.grid();
  const auto parameters = named_parameters(pipeline);
  const auto state = named_state(pipeline);
  const auto model = io::all_model_shapes(grid.world(), shapes_of(parameters));
  const io::CheckpointInfo info = comm::collectively(grid.world(), pipeline.watchdog(), "checkpoint restart", [&] {
    return io::read_checkpoint<Scalar>(file, model, parameters, state, grid.world_rank(), comm::size_of(grid.world()));
  });
  if (pipeline.optimizer()) pipeline.optimizer()->set_steps(static_cast<int>(info.optimizer_steps));
  for (const auto& chunk : pipeline.chunks()) chunk->weights_changed();
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
