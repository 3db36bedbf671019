#include "kpipe/model/training/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "kpipe/core/error.hpp"
#include "kpipe/kernels/elementwise.hpp"
#include "kpipe/kernels/optimizer.hpp"

namespace kpipe::model {

template <class Scalar>
std::vector<std::vector<RowRange>> shard_rows(const std::vector<Parameter<Scalar>>& parameters, int count) {
  std::int64_t total = 0;
  for (const auto& p : parameters) total += static_cast<std::int64_t>(p.value.size());
  std::vector<std::vector<RowRange>> shards(static_cast<std::size_t>(count));
  std::int64_t offset = 0;  // of the parameter's first element in the flattened list
  for (const auto& p : parameters) {
    const std::int64_t rows = p.value.extent_int(0), columns = std::max(p.value.extent_int(1), 1);
    // Replica r's rows start at the first row whose first element lies at or past r·total/count.
    const auto first_row = [&](int r) {
      const std::int64_t past = r * total - count * offset;  // count · (r·total/count − offset)
      const std::int64_t row = past <= 0 ? 0 : (past + count * columns - 1) / (count * columns);
      return static_cast<int>(std::min(row, rows));
    };
    for (int r = 0; r < count; ++r) shards[static_cast<std::size_t>(r)].push_back({first_row(r), first_row(r + 1)});
    offset += rows * columns;
  }
  return shards;
}

template <class Scalar>
Optimizer<Scalar>::Optimizer(const OptimizerSpec& spec, std::vector<Parameter<Scalar>> parameters,
                             tensor::ExecContext& exec, OptimizerShard shard)
    : spec_(spec),
      exec_(exec),
      parameters_(std::move(parameters)),
      rows_(shard_rows(parameters_, shard.count).at(static_cast<std::size_t>(shard.index))) {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const auto& p = parameters_[i];
    const RowRange rows = rows_[i];
    const auto zeros = [&](const char* what) {
      return tensor::zero_matrix<Scalar>("kpipe::model::" + p.name + "." + what, rows.end - rows.begin,
                                         static_cast<int>(p.value.extent(1)));
    };
    kernels::ParameterUpdate<Scalar> update{
        rows.of(p.value), rows.of(p.grad), {}, {}, p.decays ? spec_.weight_decay : 0.0};
    if (spec_.kind == OptimizerKind::sgd) {
      update.first = zeros("momentum_buffer");
    } else {
      update.first = zeros("exp_avg");
      update.second = zeros("exp_avg_sq");
    }
    updates_.push_back(update);
  }
}

double learning_rate(const OptimizerSpec& spec, int step) {
  if (step < spec.warmup_steps) return spec.lr * (step + 1) / spec.warmup_steps;
  if (spec.lr_schedule == config::LrSchedule::constant) return spec.lr;
  const int decay_steps = std::max(1, spec.total_steps - spec.warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - spec.warmup_steps) / decay_steps);
  return spec.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

template <class Scalar>
void Optimizer<Scalar>::step(double grad_scale) {
  const auto region = exec_.region("kpipe::model::optimizer_step");
  const auto& space = exec_.space();
  for (std::size_t k = 0; k < previous_.size(); ++k) Kokkos::deep_copy(space, previous_[k], updated_[k]);
  previous_steps_ = steps_;
  const double lr = learning_rate(spec_, steps_);
  ++steps_;
  if (spec_.kind == OptimizerKind::sgd) {
    kernels::sgd_update(space, {lr, spec_.momentum, grad_scale}, updates_);
  } else {
    kernels::adamw_update(space, {lr, spec_.beta1, spec_.beta2, spec_.epsilon, steps_, grad_scale}, updates_);
  }
}

template <class Scalar>
void Optimizer<Scalar>::keep_previous() {
  if (!previous_.empty()) return;
  const auto copy_of = [](const tensor::Matrix<Scalar>& m) {
    return tensor::uninitialized_matrix<Scalar>("kpipe::model::optimizer_previous", m.extent_int(0), m.extent_int(1));
  };
  for (const auto& update : updates_) {
    updated_.push_back(update.w);
    updated_.push_back(update.first);
    if (spec_.kind != OptimizerKind::sgd) updated_.push_back(update.second);
  }
  for (const auto& matrix : updated_) previous_.push_back(copy_of(matrix));
}

template <class Scalar>
void Optimizer<Scalar>::roll_back() {
  if (previous_.empty()) throw runtime_error("Optimizer::roll_back() needs keep_previous() before the step");
  const auto region = exec_.region("kpipe::model::optimizer_roll_back");
  const auto& space = exec_.space();
  for (std::size_t k = 0; k < previous_.size(); ++k) Kokkos::deep_copy(space, updated_[k], previous_[k]);
  steps_ = previous_steps_;
}

template <class Scalar>
std::vector<typename Optimizer<Scalar>::State> Optimizer<Scalar>::state() const {
  std::vector<State> out;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const std::string& name = parameters_[i].name;
    const Shard& shard = parameters_[i].shard;
    const bool copy = parameters_[i].tie == Parameter<Scalar>::Tie::copy;
    const int rows = parameters_[i].value.extent_int(0);
    if (spec_.kind == OptimizerKind::sgd) {
      out.push_back({name + ".momentum_buffer", updates_[i].first, shard, copy, rows_[i], rows, i});
    } else {
      out.push_back({name + ".exp_avg", updates_[i].first, shard, copy, rows_[i], rows, i});
      out.push_back({name + ".exp_avg_sq", updates_[i].second, shard, copy, rows_[i], rows, i});
    }
  }
  return out;
}

template <class Scalar>
std::vector<double> gradient_squared_norms(const tensor::ExecContext& exec,
                                           const std::vector<Parameter<Scalar>>& parameters) {
  std::vector<double> norms;
  for (const auto& p : parameters) {
    norms.push_back(p.tie == Parameter<Scalar>::Tie::copy ? 0.0 : kernels::squared_norm<Scalar>(exec.space(), p.grad));
  }
  return norms;
}

template <class Scalar>
bool sum_tied_gradients(const tensor::ExecContext& exec, const std::vector<Parameter<Scalar>>& parameters) {
  using Tie = typename Parameter<Scalar>::Tie;
  const Parameter<Scalar>* owner = nullptr;
  const Parameter<Scalar>* copy = nullptr;
  for (const auto& p : parameters) {
    if (p.tie == Tie::owner) owner = &p;
    if (p.tie == Tie::copy) copy = &p;
  }
  if (!owner || !copy) return owner || copy;
  kernels::add(exec.space(), owner->grad, copy->grad, owner->grad);
  Kokkos::deep_copy(exec.space(), copy->grad, owner->grad);
  return false;
}

double global_norm(const std::vector<double>& squared_norms) {
  double sum = 0;
  for (const double s : squared_norms) sum += s;
  return std::sqrt(sum);
}

bool needs_gradient_norm(const OptimizerSpec& spec) {
  return spec.grad_clip > 0 || spec.on_nonfinite == config::NonFinite::skip || spec.loss_scale.enabled;
}

double clip_factor(double norm, double max_norm) {
  if (max_norm <= 0 || norm <= max_norm) return 1.0;
  return max_norm / (norm + 1e-6);
}

double gradient_factor(double norm, double max_norm, double loss_scale) {
  return clip_factor(norm / loss_scale, max_norm) / loss_scale;
}

#define KPIPE_INSTANTIATE(Scalar)                                                                             \
  template class Optimizer<Scalar>;                                                                           \
  template std::vector<std::vector<RowRange>> shard_rows<Scalar>(const std::vector<Parameter<Scalar>>&, int); \
  template std::vector<double> gradient_squared_norms<Scalar>(const tensor::ExecContext&,                     \
                                                              const std::vector<Parameter<Scalar>>&);         \
  template bool sum_tied_gradients<Scalar>(const tensor::ExecContext&, const std::vector<Parameter<Scalar>>&);
KPIPE_INSTANTIATE(float)
KPIPE_INSTANTIATE(double)
#undef KPIPE_INSTANTIATE

}  // namespace kpipe::model
