#include "kpipe/model/training/trainer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <type_traits>

#include "../kernel_choices.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/model/data/markov_tokens.hpp"
#include "kpipe/model/data/token_stream.hpp"
#include "kpipe/model/layer_kind.hpp"
#include "kpipe/tensor/compat.hpp"

namespace kpipe::model {

namespace {

// The spec, once its batch splits into whole microbatches per replica.
const TrainerSpec& checked(const TrainerSpec& spec) {
  const int B = spec.global_batch, b = spec.microbatch_size, d = spec.data_parallel;
  if (B < 1 || b < 1 || d < 1 || B % (b * d) != 0) {
    throw input_error(
        fmt::format("global batch {} must split into data_parallel {} replicas of whole microbatches of "
                    "{} samples",
                    B, d, b));
  }
  return spec;
}

// The stages of the spec, checked to cover the model's layers in order, their
// layers reading packed documents from `documents` (nullptr: none).
template <class Scalar>
std::vector<Stage<Scalar>> build_stages(const TrainerSpec& spec, const Documents* documents,
                                        tensor::ExecContext& exec) {
  StageOptions options = spec.stage;
  options.documents = documents;
  const int layers = spec.model.layer_count();
  const auto ranges = spec.stages.empty() ? std::vector<LayerRange>{{0, layers}} : spec.stages;
  std::vector<Stage<Scalar>> stages;
  int next = 0;
  for (const auto& range : ranges) {
    if (range.first != next) {
      throw input_error(fmt::format("stage [{}, {}) should start at layer {}; stages must cover the layers in order",
                                    range.first, range.end(), next));
    }
    stages.emplace_back(spec.model, range, options, exec);
    next = range.end();
  }
  if (next != layers) {
    throw input_error(fmt::format("the stages end at layer {} but the model has {} layers", next, layers));
  }
  return stages;
}

}  // namespace

KernelChoice kernel_choice(const config::ComputeConfig& compute) {
  return {detail::gemm_path(compute.gemm), detail::attention_path(compute.attention),
          detail::precision(compute.precision)};
}

TrainerSpec TrainerSpec::from_config(const config::RunConfig& config) {
  TrainerSpec spec;
  spec.model = ModelSpec::from_config(config.model);
  spec.data = {config.data.task, config.data.seed, config.model.input_dim, config.model.output_dim};
  spec.optimizer = config.optimizer;
  spec.global_batch = config.train.global_batch;
  spec.microbatch_size = config.train.microbatch_size;
  spec.data_parallel = config.pipeline.data_parallel;
  if (config.data.pack_documents) spec.document_separator = config.data.document_separator;
  spec.stages = partition_layers(config);
  spec.stage.kernels = kernel_choice(config.compute);
  // fp16, and only fp16, scales its loss: follows the precision also in a configuration edited in code.
  spec.optimizer.loss_scale.enabled = config.compute.precision == config::Precision::fp16;
  spec.stage.recompute = config.pipeline.recompute == config::Recompute::full;
  spec.stage.selective_recompute = config.pipeline.recompute == config::Recompute::selective;
  if (spec.stage.selective_recompute && !keeps_less_selectively(spec.model, spec.stage.kernels.attention)) {
    throw input_error(
        "pipeline.recompute = \"selective\" changes nothing for this model: none of its layers rebuilds a saved "
        "tensor in B (a transformer's gemm attention rebuilds its probabilities; the fused one never keeps them); "
        "use \"none\" or \"full\"");
  }
  spec.stage.sequence_parallel = config.pipeline.sequence_parallel;
  spec.lanes = config.pipeline.lanes;
  spec.lane_split = config.pipeline.lane_split;
  return spec;
}

int TrainerSpec::most_lanes(int microbatches) const {
  if (!std::is_same_v<tensor::ExecutionSpace, Kokkos::DefaultHostExecutionSpace>) return 1;
  if (lanes == 1) return 1;  // one microbatch at a time, either split
  const int threads = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
  const int by_microbatches = lanes > 0 ? lanes : threads;
  if (lane_split == config::LaneSplit::microbatches || threads < 2) return by_microbatches;
  return std::max(by_microbatches, layer_split_lanes(lanes, microbatches, threads));
}

namespace {

// data.source = "synthetic": seeded teachers for an MLP, the Markov token
// stream's training walk for a transformer (what runtime::make_data_source
// gives a pipeline).
template <class Scalar>
std::unique_ptr<DataSource<Scalar>> synthetic_source(const TrainerSpec& spec, tensor::ExecContext& exec) {
  if (!spec.model.token_sequences()) return std::make_unique<SyntheticData<Scalar>>(spec.data, exec);
  const TokenStreamSpec stream{TokenSampling::random_windows, spec.data.seed, spec.model.context, spec.global_batch,
                               spec.document_separator};
  return std::make_unique<TokenStreamSource<Scalar>>(std::make_shared<const std::vector<std::int32_t>>(markov_split(
                                                         spec.model.vocab, spec.model.context, spec.data.seed, true)),
                                                     stream, exec);
}

}  // namespace

template <class Scalar>
SequentialTrainer<Scalar>::SequentialTrainer(const TrainerSpec& spec, tensor::ExecContext& exec)
    : SequentialTrainer(spec, exec, synthetic_source<Scalar>(spec, exec)) {}

template <class Scalar>
SequentialTrainer<Scalar>::SequentialTrainer(const TrainerSpec& spec, tensor::ExecContext& exec,
                                             std::unique_ptr<DataSource<Scalar>> data)
    : spec_(checked(spec)),
      exec_(exec),
      documents_(spec.document_separator >= 0 ? std::make_unique<Documents>(spec.document_separator) : nullptr),
      stages_(build_stages<Scalar>(spec, documents_.get(), exec)),
      data_(std::move(data)),
      optimizer_(spec.optimizer, parameters_of(stages_), exec),
      scaler_(spec.optimizer.loss_scale),
      targets_(make_targets<Scalar>(spec.model, spec.microbatch_size)) {
  if (spec.data_parallel > 1) {
    for (const auto& p : parameters()) {
      replica_sum_.push_back(tensor::uninitialized_matrix<Scalar>(
          "kpipe::model::replica_grad_sum", static_cast<int>(p.grad.extent(0)), static_cast<int>(p.grad.extent(1))));
    }
  }
}

template <class Scalar>
std::vector<Parameter<Scalar>> SequentialTrainer<Scalar>::parameters() const {
  return parameters_of(stages_);
}

template <class Scalar>
double SequentialTrainer<Scalar>::step() {
  const auto params = parameters();
  double loss = 0;
  for (int replica = 0; replica < spec_.data_parallel; ++replica) {
    for (auto& stage : stages_) stage.zero_grad();
    loss += run_replica(replica);
    // Replicas are summed in replica order; for d = 2 that is bitwise the
    // all-reduce sum, as a + b == b + a.
    for (std::size_t i = 0; i < replica_sum_.size(); ++i) {
      if (replica == 0) {
        Kokkos::deep_copy(exec_.space(), replica_sum_[i], params[i].grad);
      } else {
        kernels::add(exec_.space(), replica_sum_[i], params[i].grad, replica_sum_[i]);
      }
    }
  }
  for (std::size_t i = 0; i < replica_sum_.size(); ++i)
    Kokkos::deep_copy(exec_.space(), params[i].grad, replica_sum_[i]);
  // After the replicas, as the pipeline sums across its first and last stage.
  sum_tied_gradients(exec_, params);
  const bool skips = spec_.optimizer.on_nonfinite == config::NonFinite::skip;
  const double norm = needs_gradient_norm(spec_.optimizer) ? global_norm(gradient_squared_norms(exec_, params)) : 0;
  const bool overflow = !(std::isfinite(loss) && std::isfinite(norm));
  if (scaler_.enabled() && overflow) {
    if (scaler_.cannot_lower() && !skips) {
      throw runtime_error(
          fmt::format("step {}: fp16 overflow at loss scale {}, which cannot be lowered", steps_ + 1, scaler_.scale()));
    }
    scaler_.update(true);
    ++skipped_;
  } else if (skips && overflow) {
    ++skipped_;
  } else {
    optimizer_.step(gradient_factor(norm, spec_.optimizer.grad_clip, scaler_.scale()));
    scaler_.update(false);
    for (auto& stage : stages_) stage.weights_changed();
  }
  ++steps_;
  return loss;
}

template <class Scalar>
double SequentialTrainer<Scalar>::run_replica(int replica) {
  const int b = spec_.microbatch_size;
  const int per_replica = spec_.global_batch / spec_.data_parallel;
  // The mean's factor times the loss scale (a power of two: exact).
  const double loss_scale = scaler_.scale();
  const double mean =
      mean_loss_factor(spec_.model, spec_.global_batch, data_->ignored_predictions(steps_, 0, spec_.global_batch));
  const auto scale = static_cast<Scalar>(loss_scale * mean);
  // Boundary buffers, reused by every microbatch (the stages copy what they
  // keep) and pooled across steps.
  auto& pool = exec_.pool();
  const auto X = pool.take<Scalar>("kpipe::model::trainer_inputs", b, spec_.model.input_dim);
  std::vector<tensor::Matrix<Scalar>> outputs, gradients;
  for (const auto& stage : stages_) {
    outputs.push_back(pool.take<Scalar>("kpipe::model::trainer_stage_output", b, stage.output_dim()));
    gradients.push_back(pool.take<Scalar>("kpipe::model::trainer_stage_output_grad", b, stage.output_dim()));
  }
  double loss = 0;
  for (int mb = 0; mb < per_replica / b; ++mb) {
    const std::int64_t first = static_cast<std::int64_t>(replica) * per_replica + static_cast<std::int64_t>(mb) * b;
    data_->fill_inputs(steps_, first, X);
    data_->fill_targets(steps_, first, targets_);
    if (documents_) documents_->assign<Scalar>(exec_.space(), X);
    for (std::size_t s = 0; s < stages_.size(); ++s) stages_[s].forward(mb, s == 0 ? X : outputs[s - 1], outputs[s]);
    const double mb_loss =
        loss_and_gradient(exec_, spec_.model.loss, outputs.back(), targets_, scale, gradients.back()) / loss_scale;
    if (spec_.optimizer.on_nonfinite == config::NonFinite::stop && !scaler_.enabled()) {
      require_finite_loss(mb_loss, steps_, mb, replica, spec_.data_parallel);
    }
    loss += mb_loss;
    for (std::size_t s = stages_.size(); s-- > 0;) {
      stages_[s].backward(mb, gradients[s], s == 0 ? tensor::Matrix<Scalar>() : gradients[s - 1]);
    }
  }
  return loss;
}

template class SequentialTrainer<float>;
template class SequentialTrainer<double>;

}  // namespace kpipe::model
