#include "kpipe/runtime/execution/executor.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/schedule/action.hpp"

namespace kpipe::runtime {

using schedule::Action;
using schedule::ActionKind;

template <class Scalar>
struct Executor<Scalar>::Slots {
  // Indexed by microbatch · v + chunk; an empty View is an empty slot.
  std::vector<Matrix<Scalar>> input, output, grad_output, grad_input;
  explicit Slots(std::size_t n) : input(n), output(n), grad_output(n), grad_input(n) {}
};

namespace {

// Takes the tensor out of a slot, failing loudly if the schedule never filled
// it. The slot is emptied explicitly: Kokkos 3.4's View copies on move (its
// ViewTracker has no move constructor), and a slot still holding its buffer
// keeps it from the pool, so the last stage held every microbatch's logits
// and their gradient until the step ended.
template <class View>
View take(View& slot, const Action& action, const char* what) {
  if (slot.data() == nullptr) {
    throw runtime_error(
        fmt::format("executor: {} needs the {} of microbatch {} chunk {}, which no earlier action "
                    "produced; the schedule is inconsistent",
                    schedule::describe(action), what, action.microbatch, action.chunk));
  }
  View taken = slot;
  slot = View();
  return taken;
}

}  // namespace

template <class Scalar>
Executor<Scalar>::Executor(const schedule::Schedule& schedule, const comm::ProcessGrid& grid,
                           std::vector<model::Stage<Scalar>*> chunks, int microbatch_size, comm::Transport& transport,
                           MicrobatchIO<Scalar> io, StepHooks hooks, tensor::ExecContext& exec, int lanes,
                           config::LaneSplit split)
    : schedule_(schedule),
      actions_(schedule.ranks.at(grid.pipeline_rank())),
      rank_(grid.pipeline_rank()),
      chunks_(std::move(chunks)),
      microbatch_size_(microbatch_size),
      transport_(transport),
      io_(std::move(io)),
      hooks_(std::move(hooks)),
      training_(schedule.training()),
      exec_(exec),
      activations_("kpipe::runtime::activation") {
  for (int k = 0; k < schedule::action_kind_count; ++k) {
    region_names_.push_back("kpipe::" + std::string(schedule::name(static_cast<ActionKind>(k))));
  }
  last_gradient_action_.assign(chunks_.size(), -1);
  for (std::size_t i = 0; i < actions_.size(); ++i) {
    if (schedule::is_receive(actions_[i].kind)) receive_indices_.push_back(i);
    schedule::for_each_part(actions_[i], [&](const Action& part) {
      if (part.kind == ActionKind::backward || part.kind == ActionKind::backward_weight) {
        last_gradient_action_[part.chunk] = static_cast<std::ptrdiff_t>(i);
      }
    });
  }
  receive_window_ = schedule::peak_stash(actions_).peak + 1;
  if (hooks_.previous_update_stands) head_ = schedule::speculative_heads(schedule_).at(rank_);
  // Lanes where nothing else orders this rank's microbatches: it holds the
  // whole model, and neither a dump nor a speculative head sees them one by one.
  if (host_synchronous && training_ && schedule_.p == 1 && chunks_.size() == 1 && chunks_[0]->runs_lanes() &&
      !io_.observe && !hooks_.previous_update_stands) {
    const model::Stage<Scalar>& stage = *chunks_[0];
    const bool splits_rows = stage.row_parts(stage.input_rows(microbatch_size_)) > 1;
    const int threads = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
    if (split != config::LaneSplit::layers) {
      lane_groups_ = schedule::lane_groups(actions_, lanes > 0 ? lanes : splits_rows ? threads : 1);
    }
    if (split != config::LaneSplit::microbatches && lanes != 1 && stage.splits_layers()) {
      layer_groups_ = schedule::lane_groups(actions_, model::layer_split_lanes(lanes, schedule_.m, threads));
    }
    if (!layer_groups_.empty()) chunks_[0]->weigh_by_layer_runs();
    if (!layer_groups_.empty() && split == config::LaneSplit::automatic) choice_.emplace(4, 64);
  }
}

template <class Scalar>
comm::Message Executor<Scalar>::message_of(const Action& action) const {
  const model::Stage<Scalar>& stage = *chunks_[action.chunk];
  const bool at_output = schedule::towards_next_stage(action.kind);
  const int rows = stage.input_rows(microbatch_size_);
  return {action.peer, action.tag, at_output ? stage.output_rows(rows) : rows,
          at_output ? stage.output_dim() : stage.input_dim(), stage.boundary_dtype()};
}

template <class Scalar>
void Executor<Scalar>::send_boundary(const comm::Message& message, const Matrix<Scalar>& data) {
  if (message.dtype == tensor::dtype_of<Scalar>()) {
    transport_.send(message, data);
    return;
  }
  if constexpr (std::is_same_v<Scalar, float>) {
    kernels::with_reduced_type(message.dtype, "a boundary message", [&](auto type) {
      using Wire = decltype(type);
      const auto wire = exec_.pool().take<Wire>("kpipe::runtime::wire", data.extent_int(0), data.extent_int(1));
      kernels::round_to(exec_.space(), data, wire);
      transport_.send(message, wire);
    });
  }
}

template <class Scalar>
Matrix<Scalar> Executor<Scalar>::receive_boundary(const comm::Message& message, FunctionRef<std::string()> what) {
  if (message.dtype == tensor::dtype_of<Scalar>()) return transport_.complete_receive<Scalar>(message, what);
  Matrix<Scalar> data = activations_.take(message.rows, message.cols);
  if constexpr (std::is_same_v<Scalar, float>) {
    kernels::with_reduced_type(message.dtype, "a boundary message", [&](auto type) {
      kernels::widen(exec_.space(), transport_.complete_receive<decltype(type)>(message, what), data);
    });
  }
  return data;
}

template <class Scalar>
void Executor<Scalar>::post_receives_ahead(std::size_t limit) {
  while (next_receive_ < receive_indices_.size() && receive_indices_[next_receive_] < limit &&
         transport_.posted_receives() < receive_window_) {
    transport_.post_receive(message_of(actions_[receive_indices_[next_receive_]]));
    ++next_receive_;
  }
}

template <class Scalar>
typename model::Stage<Scalar>::LayerDone Executor<Scalar>::gradients_final(const Action& action, std::size_t index,
                                                                           StepResult& result,
                                                                           double step_start) const {
  if (!hooks_.gradients_final || last_gradient_action_[action.chunk] != static_cast<std::ptrdiff_t>(index)) return {};
  return [this, chunk = action.chunk, &result, step_start](int layer) {
    if (result.reduction_start < 0) result.reduction_start = comm::wall_time() - step_start;
    hooks_.gradients_final(chunk, layer);
  };
}

template <class Scalar>
StepResult Executor<Scalar>::run_step(int step) {
  StepResult result;
  if (!run_actions(step, !hooks_.previous_update_stands, result)) {
    result = StepResult();
    result.head_ran_again = true;
    run_actions(step, true, result);
  }
  return result;
}

template <class Scalar>
bool Executor<Scalar>::run_actions(int step, bool validated, StepResult& result) {
  result.timings.reserve(actions_.size());
  Slots slots(static_cast<std::size_t>(schedule_.m) * schedule_.v);
  next_receive_ = 0;
  std::size_t group = 0;  // the next of the step's groups
  const bool by_layers = !layer_groups_.empty() && (!choice_ || choice_->way() == 1);
  const std::vector<schedule::LaneGroup>& groups = by_layers ? layer_groups_ : lane_groups_;
  const model::LaneSplit split = by_layers ? model::LaneSplit::layers : model::LaneSplit::microbatches;
  const double step_start = comm::wall_time();
  for (std::size_t i = 0; i <= actions_.size(); ++i) {
    if (!validated && i == head_.end) {
      validated = true;
      bool stands = false;
      try {
        stands = hooks_.previous_update_stands();
      } catch (...) {
        abandon_head(step);
        throw;
      }
      if (!stands) {
        abandon_head(step);
        return false;
      }
    }
    if (i == actions_.size()) break;
    if (group < groups.size() && groups[group].begin == i) {
      run_lanes(groups[group], split, step, result, step_start);
      if (hooks_.progress) hooks_.progress();
      i = groups[group++].end - 1;
      continue;
    }
    // A speculative head receives only what the other heads send.
    post_receives_ahead(validated ? actions_.size() : head_.end);
    const double start = comm::wall_time() - step_start;
    {
      // Named like the IR's actions, so Kokkos Tools and Nsight show the schedule.
      const auto region = exec_.region(region_names_[static_cast<std::size_t>(actions_[i].kind)]);
      execute(actions_[i], i, step, slots, result, step_start);
    }
    if (hooks_.progress) hooks_.progress();
    // Host backends finish a kernel before returning, so the clock alone times
    // it; a device queues kernels on the instance, which is waited for here
    // only so that the measured timeline means the same on every backend.
    if (!host_synchronous && (schedule::is_compute(actions_[i].kind) || actions_[i].kind == ActionKind::loss)) {
      exec_.fence("kpipe::runtime::action_timing");
    }
    result.timings.push_back({static_cast<std::int32_t>(i), start, comm::wall_time() - step_start});
    if (actions_[i].kind == ActionKind::reduce_grads) {
      if (result.reduction_start < 0) result.reduction_start = start;
      result.reduction_end = result.timings.back().end;
    }
  }
  transport_.complete_sends(fmt::format("at the end of step {}", step));
  if (by_layers) ++steps_split_by_layers_;
  if (choice_) choice_->record(comm::wall_time() - step_start);
  return true;
}

template <class Scalar>
void Executor<Scalar>::run_lanes(const schedule::LaneGroup& group, model::LaneSplit split, int step, StepResult& result,
                                 double step_start) {
  model::Stage<Scalar>& stage = *chunks_.front();
  const auto now = [step_start] { return comm::wall_time() - step_start; };
  const auto region = [this](ActionKind kind) { return exec_.region(region_names_[static_cast<std::size_t>(kind)]); };
  const int rows = stage.input_rows(microbatch_size_);
  const double forward_start = now();
  {
    const auto f = region(ActionKind::forward);
    for (const std::size_t b : group.blocks) {
      const int mb = actions_[b].microbatch;
      lane_.microbatches.push_back(mb);
      lane_.X.push_back(activations_.take(rows, stage.input_dim()));
      io_.inputs(step, mb, lane_.X.back());
      lane_.Y.push_back(activations_.take(stage.output_rows(rows), stage.output_dim()));
    }
    stage.forward_lanes(lane_.microbatches, lane_.X, lane_.Y, split);
  }
  result.peak_stashed = std::max(result.peak_stashed, stage.stashed_microbatches());
  const double forward_end = now();
  for (std::size_t j = 0; j < group.blocks.size(); ++j) {
    const double start = now();
    {
      const auto loss = region(ActionKind::loss);
      lane_.dY.push_back(activations_.take(lane_.Y[j].extent_int(0), lane_.Y[j].extent_int(1)));
      result.loss += io_.loss(step, lane_.microbatches[j], lane_.Y[j], lane_.dY.back());
    }
    lane_.losses.emplace_back(start, now());
  }
  // The whole model's first stage: no input gradient.
  lane_.dX.resize(group.blocks.size());
  const double backward_start = now();
  {
    const auto b = region(ActionKind::backward_input);
    stage.backward_input_lanes(lane_.microbatches, lane_.dY, lane_.dX, split);
  }
  const double input_end = now();
  {
    const auto w = region(ActionKind::backward_weight);
    stage.backward_weight_lanes(lane_.microbatches,
                                gradients_final(actions_[group.end - 1], group.end - 1, result, step_start));
  }
  const double backward_end = now();
  const auto share = [n = group.blocks.size()](double from, double to, std::size_t j) {
    const double each = (to - from) / static_cast<double>(n);
    return std::make_pair(from + each * static_cast<double>(j), from + each * static_cast<double>(j + 1));
  };
  for (std::size_t j = 0; j < group.blocks.size(); ++j) {
    const std::size_t end = j + 1 < group.blocks.size() ? group.blocks[j + 1] : group.end;
    for (std::size_t i = group.blocks[j]; i < end; ++i) {
      std::pair<double, double> span;
      switch (actions_[i].kind) {
        case ActionKind::forward:
          span = share(forward_start, forward_end, j);
          break;
        case ActionKind::loss:
          span = lane_.losses[j];
          break;
        case ActionKind::backward_input:
          span = share(backward_start, input_end, j);
          break;
        case ActionKind::backward_weight:
          span = share(input_end, backward_end, j);
          break;
        default:  // BW
          span = share(backward_start, backward_end, j);
      }
      result.timings.push_back({static_cast<std::int32_t>(i), span.first, span.second});
    }
  }
  lane_.microbatches.clear();
  lane_.X.clear();
  lane_.Y.clear();
  lane_.dY.clear();
  lane_.dX.clear();
  lane_.losses.clear();
}

template <class Scalar>
void Executor<Scalar>::abandon_head(int step) {
  for (const std::size_t i : head_.drained) {
    const comm::Message message = message_of(actions_[i]);
    transport_.post_receive(message);
    receive_boundary(message, [&] {
      return fmt::format("dropping the {} of step {}'s abandoned head", schedule::describe(actions_[i]), step);
    });
  }
  transport_.complete_sends(fmt::format("abandoning step {}'s head", step));
  for (auto* chunk : chunks_) chunk->discard_stash();
}

template <class Scalar>
void Executor<Scalar>::execute(const Action& action, std::size_t index, int step, Slots& slots, StepResult& result,
                               double step_start) {
  const std::size_t key = slot_key(action.microbatch, action.chunk);
  const int mb = action.microbatch;
  // The watchdog's message, built only when it fires.
  const auto waiting_for = [&](const char* what) {
    return [&, what] {
      return fmt::format("at action {} ({}) for the {} of microbatch {} chunk {} from rank {}", index,
                         schedule::describe(action), what, mb, action.chunk, action.peer);
    };
  };
  switch (action.kind) {
    case ActionKind::forward: {
      model::Stage<Scalar>& stage = *chunks_[action.chunk];
      if (io_.documents) io_.documents(step, mb);
      Matrix<Scalar> X;
      if (is_first_stage(action.chunk)) {
        X = activations_.take(stage.input_rows(microbatch_size_), stage.input_dim());
        io_.inputs(step, mb, X);
      } else {
        X = take(slots.input[key], action, "input activation");
      }
      Matrix<Scalar> Y = activations_.take(stage.output_rows(X.extent_int(0)), stage.output_dim());
      if (training_) {
        stage.forward(mb, X, Y);
      } else {
        stage.forward_no_grad(X, Y);
      }
      if (io_.observe) {
        io_.observe("input", step, mb, action.chunk, X);
        io_.observe("output", step, mb, action.chunk, Y);
      }
      if (is_last_stage(action.chunk) && !training_) {
        io_.outputs(step, mb, Y);
      } else if (const int next = local_neighbour(action.chunk, +1); next >= 0) {
        slots.input[slot_key(mb, next)] = Y;  // the next stage is ours too (ZB-V's turn): no message
      } else {
        slots.output[key] = Y;
      }
      int stashed = 0;
      for (const auto* chunk : chunks_) stashed += chunk->stashed_microbatches();
      result.peak_stashed = std::max(result.peak_stashed, stashed);
      break;
    }
    case ActionKind::loss: {
      const Matrix<Scalar> Y = take(slots.output[key], action, "output");
      Matrix<Scalar> dY = activations_.take(Y.extent_int(0), Y.extent_int(1));
      result.loss += io_.loss(step, mb, Y, dY);
      slots.grad_output[key] = dY;
      break;
    }
    case ActionKind::send_act:
      send_boundary(message_of(action), take(slots.output[key], action, "output activation"));
      break;
    case ActionKind::recv_act:
      slots.input[key] = receive_boundary(message_of(action), waiting_for("activation"));
      break;
    case ActionKind::recv_grad:
      slots.grad_output[key] = receive_boundary(message_of(action), waiting_for("gradient"));
      break;
    case ActionKind::send_grad:
      send_boundary(message_of(action), take(slots.grad_input[key], action, "input gradient"));
      break;
    case ActionKind::backward_input:
    case ActionKind::backward: {
      model::Stage<Scalar>& stage = *chunks_[action.chunk];
      if (io_.documents) io_.documents(step, mb);
      const Matrix<Scalar> dY = take(slots.grad_output[key], action, "output gradient");
      // The first model stage's input is data: its gradient is never needed.
      Matrix<Scalar> dX;
      if (!is_first_stage(action.chunk)) dX = activations_.take(stage.input_rows(microbatch_size_), stage.input_dim());
      if (action.kind == ActionKind::backward)
        stage.backward(mb, dY, dX, gradients_final(action, index, result, step_start));
      else
        stage.backward_input(mb, dY, dX);
      if (io_.observe) {
        io_.observe("output_grad", step, mb, action.chunk, dY);
        if (dX.data() != nullptr) io_.observe("input_grad", step, mb, action.chunk, dX);
      }
      if (dX.data() != nullptr) {
        const int previous = local_neighbour(action.chunk, -1);
        (previous >= 0 ? slots.grad_output[slot_key(mb, previous)] : slots.grad_input[key]) = dX;
      }
      break;
    }
    case ActionKind::backward_weight:
      chunks_[action.chunk]->backward_weight(mb, gradients_final(action, index, result, step_start));
      break;
    case ActionKind::forward_backward:
      // Interleaved on the rank's one execution space: the F, then the BW.
      // Overlapping them needs a second instance (a CUDA stream) handed to
      // every kernel of a stage, which the stages do not take yet.
      execute(schedule::forward_half(action), index, step, slots, result, step_start);
      execute(schedule::backward_half(action), index, step, slots, result, step_start);
      break;
    case ActionKind::reduce_grads:
      transport_.complete_sends(fmt::format("before the gradient reduction of step {}", step));
      hooks_.reduce_gradients();
      break;
    case ActionKind::optimizer_step:
      hooks_.optimizer_step();
      break;
  }
}

template class Executor<float>;
template class Executor<double>;

}  // namespace kpipe::runtime
