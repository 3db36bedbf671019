#include "kpipe/runtime/execution/pipeline.hpp"

#include "kpipe/runtime/data/data_source_kind.hpp"

#include <fmt/format.h>

#include "kpipe/comm/broadcast.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/model/tensor_parallel.hpp"
#include "kpipe/model/traffic.hpp"
#include "kpipe/runtime/data/dataset_source.hpp"
#include "kpipe/runtime/data/token_source.hpp"
#include "kpipe/runtime/tuning/run_prediction.hpp"
#include "kpipe/schedule/generate.hpp"
#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/text_form.hpp"

namespace kpipe::runtime {

namespace {

schedule::RunPlan plan_for(const config::RunConfig& config, const std::vector<model::StageTraffic>& traffic, Mode mode,
                           comm::Communicator world) {
  schedule::RunPlan plan = charged_plan(config, traffic);
  if (mode == Mode::train && !config.pipeline.schedule_entry->trains) {
    throw input_error(
        fmt::format("pipeline.schedule = \"{}\" runs inference only; use kpipe infer, or train with "
                    "one of the training schedules",
                    plan.spec.name));
  }
  if (mode == Mode::infer) plan.schedule_file.clear();
  if (!plan.schedule_file.empty()) {
    plan.schedule_text =
        comm::broadcast_from_root(world, [&] { return schedule::read_schedule_text(plan.schedule_file); });
  }
  return plan;
}

// Inference runs forward passes on the placement the deck's schedule trains
// with (so an interleaved or zb-v deck evaluates on its own chunks).
schedule::Schedule schedule_for(const schedule::RunPlan& plan, Mode mode) {
  schedule::Schedule schedule = schedule::make_schedule(plan);
  if (mode == Mode::train || schedule.name == "forward") return schedule;
  return schedule::forward_schedule(schedule, schedule.m);
}

template <class Scalar>
std::vector<std::unique_ptr<model::Stage<Scalar>>> build_chunks(
    const model::TrainerSpec& spec, const schedule::Schedule& schedule, const comm::ProcessGrid& grid,
    Hdf5ActivationStore* store, const model::Documents* documents, model::Collectives& collectives,
    tensor::ExecContext& exec) {
  fault::inject(fault::Phase::setup_stages, grid.world_rank());
  std::vector<std::unique_ptr<model::Stage<Scalar>>> chunks;
  for (int chunk = 0; chunk < schedule.v; ++chunk) {
    const int stage = schedule.placement.stage(grid.pipeline_rank(), chunk);
    model::StageOptions options = spec.stage;
    if (store != nullptr) options.stash_store = &store->chunk(chunk);
    options.documents = documents;
    chunks.push_back(
        std::make_unique<model::Stage<Scalar>>(spec.model, spec.stages.at(stage), options, collectives, exec));
  }
  return chunks;
}

// Training with pipeline.activation_store = "hdf5": this rank's file; inference stashes nothing.
std::unique_ptr<Hdf5ActivationStore> activation_store_for(const config::RunConfig& config, Mode mode,
                                                          const comm::ProcessGrid& grid, int chunks,
                                                          tensor::ExecContext& exec) {
  if (mode != Mode::train || config.pipeline.activation_store != config::ActivationStore::hdf5) return nullptr;
  return std::make_unique<Hdf5ActivationStore>(activation_directory(config.pipeline.activation_path), grid.world_rank(),
                                               chunks, exec);
}

// The estimate of this rank, refused before any allocation when it exceeds
// runtime.memory_limit_mib (or the node's available memory shared by its ranks).
MemoryEstimate checked_memory(const config::RunConfig& config, const model::TrainerSpec& spec,
                              const schedule::Schedule& schedule, const comm::ProcessGrid& grid, bool staged) {
  kernels::load_gemm_library(tensor::ExecutionSpace(), spec.stage.kernels.gemm, spec.stage.kernels.precision);
  MemoryEstimate estimate =
      estimate_memory(spec, schedule, grid.pipeline_rank(), grid.tensor_size(), staged, resident_bytes());
  estimate.data = text_corpus_peak_bytes(config.data, schedule.training() && config.train.eval_every > 0);
  fault::inject(fault::Phase::setup_memory, grid.world_rank());
  const MemoryBudget limit = run_memory_limit(config, grid.ranks_on_node());
  require_fits(estimate, limit.bytes, limit.source);
  return estimate;
}

// train.distributed_optimizer: this replica's share of the update; all of it without.
model::OptimizerShard optimizer_shard(const model::TrainerSpec& spec, const comm::ProcessGrid& grid) {
  if (!spec.optimizer.distributed) return {};
  return {grid.replica(), grid.replicas()};
}

// Training: the optimizer of this rank's parameters (its shard of them with the distributed optimizer).
template <class Scalar>
std::unique_ptr<model::Optimizer<Scalar>> optimizer_for(const model::TrainerSpec& spec, Mode mode,
                                                        std::vector<model::Parameter<Scalar>> parameters,
                                                        const comm::ProcessGrid& grid, tensor::ExecContext& exec) {
  fault::inject(fault::Phase::setup_optimizer, grid.world_rank());
  if (mode != Mode::train) return nullptr;
  return std::make_unique<model::Optimizer<Scalar>>(spec.optimizer, std::move(parameters), exec,
                                                    optimizer_shard(spec, grid));
}

template <class Scalar>
std::vector<model::Stage<Scalar>*> pointers(const std::vector<std::unique_ptr<model::Stage<Scalar>>>& chunks) {
  std::vector<model::Stage<Scalar>*> raw;
  for (const auto& chunk : chunks) raw.push_back(chunk.get());
  return raw;
}

}  // namespace

template <class Scalar>
Pipeline<Scalar>::Pipeline(const config::RunConfig& config, comm::Communicator world, Mode mode, comm::Staging staging)
    : spec_(model::TrainerSpec::from_config(config)),
      traffic_(model::stage_traffic(config, spec_.stages)),
      plan_(plan_for(config, traffic_, mode, world)),
      grid_(world, plan_.spec.p, config.pipeline.tensor_parallel, plan_.data_parallel),
      schedule_(schedule_for(plan_, mode)),
      overlap_gradient_sums_(config.pipeline.overlap_grad_reduce && grid_.replicas() > 1),
      watchdog_(config.runtime.watchdog_seconds, grid_.world_rank()),
      memory_(checked_memory(config, spec_, schedule_, grid_,
                             staging == comm::Staging::host || !comm::mpi_reaches_device_memory())),
      collectives_(grid_, exec_),
      // A sequence-parallel boundary is already each tensor rank's rows: nothing to scatter.
      transport_(grid_.pipeline(), watchdog_, staging, exec_.space(),
                 model::boundary_gathered(config.pipeline) ? grid_.tensor() : comm::self()),
      activation_store_(activation_store_for(config, mode, grid_, schedule_.v, exec_)),
      documents_(spec_.document_separator >= 0 ? std::make_unique<model::Documents>(spec_.document_separator)
                                               : nullptr),
      chunks_(build_chunks<Scalar>(spec_, schedule_, grid_, activation_store_.get(), documents_.get(), collectives_,
                                   exec_)),
      feed_(
          spec_, grid_.replica(),
          make_data_source<Scalar>(config.data, spec_, mode == Mode::infer ? io::Split::test : io::Split::train, exec_),
          schedule_.placement.holds_first_and_last(grid_.pipeline_rank())),
      loss_head_(spec_, grid_.replica(), feed_, collectives_, exec_),
      parts_built_(grid_.world(), watchdog_, "set-up"),
      gradient_sync_(grid_, schedule_, chunks_, transport_.staged(), watchdog_, exec_),
      optimizer_(optimizer_for(spec_, mode, parameters(), grid_, exec_)),
      shard_gather_(mode == Mode::train && optimizer_shard(spec_, grid_).count > 1
                        ? std::make_unique<ShardGather<Scalar>>(grid_.data(), parameters(), transport_.staged(), exec_)
                        : nullptr),
      // Every change of the weights (an update, a roll-back, a redo) reaches
      // every replica's rows before the stages refresh their packed copies.
      update_(mode == Mode::train ? std::make_unique<StepUpdate<Scalar>>(
                                        spec_.optimizer, grid_, gradient_sync_, *optimizer_,
                                        [this] {
                                          if (shard_gather_) shard_gather_->gather();
                                          for (auto& chunk : chunks_) chunk->weights_changed();
                                        },
                                        watchdog_)
                                  : nullptr),
      dump_(config.debug.dump_steps.empty() ? nullptr
                                            : std::make_unique<ActivationDump>(config.debug, grid_.world_rank(),
                                                                               grid_.pipeline_rank(), grid_.replica())),
      executor_(schedule_, grid_, pointers(chunks_), spec_.microbatch_size, transport_, microbatch_io(), step_hooks(),
                exec_, spec_.lanes, spec_.lane_split),
      held_out_(mode == Mode::train && config.train.eval_every > 0
                    ? std::make_unique<HeldOutEvaluator<Scalar>>(config, spec_, schedule_, grid_, pointers(chunks_),
                                                                 documents_.get(), transport_, collectives_, exec_)
                    : nullptr) {
  fault::inject(fault::Phase::setup, grid_.world_rank());
}

template <class Scalar>
std::vector<model::Parameter<Scalar>> Pipeline<Scalar>::parameters() const {
  return model::parameters_of(chunks_);
}

template <class Scalar>
MicrobatchIO<Scalar> Pipeline<Scalar>::microbatch_io() {
  MicrobatchIO<Scalar> io;
  io.inputs = [this](int step, int mb, const Matrix<Scalar>& X) { feed_.inputs(step, mb, X); };
  io.loss = [this](int step, int mb, const Matrix<Scalar>& Y, const Matrix<Scalar>& dY) {
    return loss_head_.loss(step, mb, Y, dY);
  };
  io.outputs = [this](int step, int mb, const Matrix<Scalar>& Y) { loss_head_.evaluate(step, mb, Y); };
  if (documents_) io.documents = [this](int step, int mb) { feed_.documents(step, mb, *documents_, exec_.space()); };
  if (dump_) {
    io.observe = [this](const char* what, int step, int mb, int chunk, const Matrix<Scalar>& tensor) {
      dump_->record<Scalar>(what, step, mb, schedule_.placement.stage(grid_.pipeline_rank(), chunk), tensor);
    };
  }
  return io;
}

template <class Scalar>
StepHooks Pipeline<Scalar>::step_hooks() {
  StepHooks hooks;
  hooks.reduce_gradients = [this] { gradient_sync_.reduce(); };
  hooks.optimizer_step = [this] {
    model::sum_row_partials(collectives_, parameters());
    update_->finish(step_, loss_head_.failure());
  };
  if (update_ && spec_.optimizer.post_validation) {
    // The head ran without the gradients, which the redo still needs: zeroed only now.
    hooks.previous_update_stands = [this] {
      const bool stands = update_->settle();
      for (auto& chunk : chunks_) chunk->zero_grad();
      if (!stands) loss_head_.start_step(step_, update_->loss_scale());
      return stands;
    };
  }
  if (overlap_gradient_sums_) {
    hooks.gradients_final = [this](int chunk, int layer) { gradient_sync_.start(chunk, layer); };
    hooks.progress = [this] { gradient_sync_.progress(); };
  }
  return hooks;
}

template <class Scalar>
void Pipeline<Scalar>::settle() {
  if (update_) update_->settle();
}

template <class Scalar>
Evaluation Pipeline<Scalar>::validate() {
  settle();
  const std::uint64_t sent = transport_.bytes_sent();
  const std::uint64_t tensor = collectives_.bytes_contributed() + transport_.bytes_gathered();
  const Evaluation evaluation = held_out_->evaluate();
  validation_bytes_.pipeline += transport_.bytes_sent() - sent;
  validation_bytes_.tensor += collectives_.bytes_contributed() + transport_.bytes_gathered() - tensor;
  return evaluation;
}

template <class Scalar>
StepResult Pipeline<Scalar>::run_step(int step) {
  step_ = step;
  fault::inject(fault::Phase::step, grid_.world_rank(), step);
  const double loss_scale = update_ ? update_->loss_scale() : 1.0;
  loss_head_.start_step(step, loss_scale);
  // Post-validated, the executor settles the last update where the step's
  // head ends (and zeroes the gradients then), unless guesses have just failed.
  if (!spec_.optimizer.post_validation) {
    for (auto& chunk : chunks_) chunk->zero_grad();
  } else if (update_ && !update_->guesses_hold()) {
    update_->settle();
  }
  StepResult result = executor_.run_step(step);
  result.loss_scale = loss_scale;
  return result;
}

bool counts_loss(const comm::ProcessGrid& grid) { return grid.tensor_rank() == 0; }

double global_loss(const comm::ProcessGrid& grid, const StepResult& result) {
  return comm::sum(grid.world(), counts_loss(grid) ? result.loss : 0.0);
}

Evaluation global_evaluation(const comm::ProcessGrid& grid, const Evaluation& mine) {
  const Evaluation counted = counts_loss(grid) ? mine : Evaluation{0.0, 0, 0, mine.batches};
  const std::vector<std::int64_t> counts = comm::sum(grid.world(), {counted.correct, counted.samples});
  return {comm::sum(grid.world(), counted.loss), counts[0], counts[1], mine.batches};
}

template class Pipeline<float>;
template class Pipeline<double>;

}  // namespace kpipe::runtime
