#include "kpipe/runtime/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kpipe/comm/broadcast.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/schedule/text_form.hpp"
#include "kpipe/kernels/accuracy.hpp"

namespace kpipe::runtime {

namespace {

// Receive/send buffers of all data-parallel gradients fit in buckets of this size.
constexpr std::size_t gradient_bucket_bytes = 16u << 20;

schedule::DeckPlan plan_for(const config::Deck& deck, Mode mode, MPI_Comm world) {
  schedule::DeckPlan plan = schedule::plan_from_deck(deck);
  if (mode == Mode::train && plan.spec.name == "forward") {
    throw input_error(fmt::format("{} runs inference only; use kpipe infer, or train with gpipe, 1f1b, interleaved "
                                  "or zb-h1",
                                  deck.describe("pipeline.schedule")));
  }
  if (mode == Mode::infer) {
    plan.spec.name = "forward";
    plan.schedule_file.clear();
  }
  if (!plan.schedule_file.empty()) {
    plan.schedule_text =
        comm::broadcast_from_root(world, [&] { return schedule::read_schedule_text(plan.schedule_file); });
  }
  return plan;
}

template <class Scalar>
std::vector<std::unique_ptr<model::Stage<Scalar>>> build_chunks(const model::TrainerSpec& spec,
                                                                const schedule::Schedule& schedule, int rank,
                                                                tensor::ExecContext& exec) {
  std::vector<std::unique_ptr<model::Stage<Scalar>>> chunks;
  for (int chunk = 0; chunk < schedule.v; ++chunk) {
    const int stage = schedule::model_stage(rank, chunk, schedule.p);
    chunks.push_back(std::make_unique<model::Stage<Scalar>>(spec.model, spec.stages.at(stage), spec.stage, exec));
  }
  return chunks;
}

template <class Scalar>
std::vector<model::Stage<Scalar>*> pointers(const std::vector<std::unique_ptr<model::Stage<Scalar>>>& chunks) {
  std::vector<model::Stage<Scalar>*> raw;
  for (const auto& chunk : chunks) raw.push_back(chunk.get());
  return raw;
}

}  // namespace

template <class Scalar>
Pipeline<Scalar>::Pipeline(const config::Deck& deck, MPI_Comm world, Mode mode, comm::Staging staging)
    : spec_(model::TrainerSpec::from_deck(deck)),
      plan_(plan_for(deck, mode, world)),
      grid_(world, plan_.spec.p, plan_.data_parallel),
      schedule_(schedule::make_schedule(plan_)),
      watchdog_(deck.real("runtime.watchdog_seconds"), grid_.world_rank()),
      transport_(grid_.pipeline(), watchdog_, staging),
      reducer_(grid_.data(), gradient_bucket_bytes, transport_.staged()),
      chunks_(build_chunks<Scalar>(spec_, schedule_, grid_.stage(), exec_)),
      data_(spec_.data, exec_),
      targets_(model::make_targets<Scalar>(spec_.model.loss, spec_.microbatch_size, spec_.model.output_dim)),
      optimizer_(mode == Mode::train ? std::make_unique<model::Optimizer<Scalar>>(spec_.optimizer, parameters(), exec_)
                                     : nullptr),
      executor_(schedule_, grid_, pointers(chunks_), spec_.microbatch_size, transport_, microbatch_io(),
                step_hooks()) {}

template <class Scalar>
std::vector<model::Parameter<Scalar>> Pipeline<Scalar>::parameters() const {
  std::vector<model::Parameter<Scalar>> all;
  for (const auto& chunk : chunks_) {
    const auto own = chunk->parameters();
    all.insert(all.end(), own.begin(), own.end());
  }
  return all;
}

template <class Scalar>
std::int64_t Pipeline<Scalar>::first_sample(int mb) const {
  const std::int64_t per_replica = spec_.global_batch / spec_.data_parallel;
  return grid_.replica() * per_replica + static_cast<std::int64_t>(mb) * spec_.microbatch_size;
}

template <class Scalar>
MicrobatchIO<Scalar> Pipeline<Scalar>::microbatch_io() {
  MicrobatchIO<Scalar> io;
  io.inputs = [this](int step, int mb, const Matrix<Scalar>& X) { data_.fill_inputs(step, first_sample(mb), X); };
  io.loss = [this](int step, int mb, const Matrix<Scalar>& Y, const Matrix<Scalar>& dY) {
    return loss(step, mb, Y, dY);
  };
  io.outputs = [this](int step, int mb, const Matrix<Scalar>& Y) { evaluate(step, mb, Y); };
  return io;
}

template <class Scalar>
StepHooks Pipeline<Scalar>::step_hooks() {
  return {[this] { reduce_gradients(); }, [this] { optimizer_step(); }};
}

template <class Scalar>
double Pipeline<Scalar>::loss(int step, int mb, const Matrix<Scalar>& Y, const Matrix<Scalar>& dY) {
  // The same scale and data as the sequential reference, so the results agree bitwise.
  const auto scale = static_cast<Scalar>(1.0 / spec_.global_batch);
  data_.fill_targets(step, first_sample(mb), targets_);
  const double value = model::loss_and_gradient(exec_, spec_.model.loss, Y, targets_, scale, dY);
  model::require_finite_loss(value, step, mb, grid_.replica(), spec_.data_parallel);
  return value;
}

template <class Scalar>
void Pipeline<Scalar>::evaluate(int step, int mb, const Matrix<Scalar>& Y) {
  const auto scale = static_cast<Scalar>(1.0 / spec_.global_batch);
  data_.fill_targets(step, first_sample(mb), targets_);
  // The loss kernel also writes dY, which evaluation does not need: a pooled scratch buffer.
  const Matrix<Scalar> dY = scratch_.take(Y.extent_int(0), Y.extent_int(1));
  evaluation_.loss += model::loss_and_gradient(exec_, spec_.model.loss, Y, targets_, scale, dY);
  if (spec_.model.loss == model::LossKind::cross_entropy) {
    evaluation_.correct += kernels::count_correct<Scalar>(exec_.space(), Y, targets_.labels);
  }
  evaluation_.samples += Y.extent(0);
}

template <class Scalar>
void Pipeline<Scalar>::reduce_gradients() {
  if (grid_.replicas() == 1) return;
  std::vector<typename comm::GradientReducer<Scalar>::Flat> grads;
  for (const auto& p : parameters()) grads.push_back(comm::flat<Scalar>(p.grad));
  reducer_.sum(grads);
}

template <class Scalar>
void Pipeline<Scalar>::optimizer_step() {
  const auto params = parameters();
  if (spec_.optimizer.grad_clip > 0) {
    // Every rank adds the same per-parameter norms in global layer order, as the
    // sequential reference does, so all ranks agree on the clip factor bitwise.
    model::clip_gradients(exec_, params, model::global_norm(squared_norms_in_layer_order()),
                          spec_.optimizer.grad_clip);
  }
  optimizer_->step();
}

template <class Scalar>
std::vector<double> Pipeline<Scalar>::squared_norms_in_layer_order() const {
  const int p = schedule_.p, v = schedule_.v;
  // Per chunk: how many norms, then the norms themselves, from every rank.
  std::vector<int> counts;
  std::vector<double> norms;
  for (const auto& chunk : chunks_) {
    const auto own = model::gradient_squared_norms(exec_, chunk->parameters());
    counts.push_back(static_cast<int>(own.size()));
    norms.insert(norms.end(), own.begin(), own.end());
  }
  std::vector<int> all_counts(static_cast<std::size_t>(p) * v);
  MPI_Allgather(counts.data(), v, MPI_INT, all_counts.data(), v, MPI_INT, grid_.pipeline());
  std::vector<int> rank_counts(p, 0), rank_offsets(p, 0);
  for (int r = 0; r < p; ++r) {
    for (int c = 0; c < v; ++c) rank_counts[r] += all_counts[r * v + c];
    if (r > 0) rank_offsets[r] = rank_offsets[r - 1] + rank_counts[r - 1];
  }
  std::vector<double> by_rank(rank_offsets.back() + rank_counts.back());
  MPI_Allgatherv(norms.data(), static_cast<int>(norms.size()), MPI_DOUBLE, by_rank.data(), rank_counts.data(),
                 rank_offsets.data(), MPI_DOUBLE, grid_.pipeline());
  // Reorder rank-major (rank, chunk) segments into model-stage order s = c·p + r.
  std::vector<double> ordered;
  for (int s = 0; s < p * v; ++s) {
    const int r = schedule::stage_rank(s, p), c = schedule::stage_chunk(s, p);
    int offset = rank_offsets[r];
    for (int k = 0; k < c; ++k) offset += all_counts[r * v + k];
    ordered.insert(ordered.end(), by_rank.begin() + offset, by_rank.begin() + offset + all_counts[r * v + c]);
  }
  return ordered;
}

template <class Scalar>
StepResult Pipeline<Scalar>::run_step(int step) {
  evaluation_ = {};
  for (auto& chunk : chunks_) chunk->zero_grad();
  return executor_.run_step(step);
}

template <class Scalar>
double Pipeline<Scalar>::global_loss(const StepResult& result) const {
  double total = 0.0;
  MPI_Allreduce(&result.loss, &total, 1, MPI_DOUBLE, MPI_SUM, grid_.world());
  return total;
}

template <class Scalar>
Evaluation Pipeline<Scalar>::global_evaluation() const {
  double loss = 0.0;
  std::int64_t counts[2] = {evaluation_.correct, evaluation_.samples};
  std::int64_t totals[2] = {0, 0};
  MPI_Allreduce(&evaluation_.loss, &loss, 1, MPI_DOUBLE, MPI_SUM, grid_.world());
  MPI_Allreduce(counts, totals, 2, MPI_INT64_T, MPI_SUM, grid_.world());
  return {loss, totals[0], totals[1]};
}

template class Pipeline<float>;
template class Pipeline<double>;

}  // namespace kpipe::runtime
