#pragma once
// The executor (DESIGN.md §2, §4): runs one rank's action list of the schedule
// IR with the Kokkos stages this rank holds and the MPI transport. It adds no
// ordering of its own: what runs when is entirely the schedule's, so any
// schedule that passes the validator runs, hand-written ones included. The
// one liberty it takes changes no result: a rank that holds the whole model
// may run consecutive microbatches of its list at once (lanes,
// schedule/lanes.hpp), as no other rank waits on their order.

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kpipe/comm/process_grid.hpp"
#include "kpipe/comm/transport.hpp"
#include "kpipe/model/stage.hpp"
#include "kpipe/runtime/execution/timed_choice.hpp"
#include "kpipe/runtime/measurement/timeline.hpp"
#include "kpipe/schedule/lanes.hpp"
#include "kpipe/schedule/schedule.hpp"
#include "kpipe/schedule/speculation.hpp"
#include "kpipe/tensor/buffer_pool.hpp"
#include "kpipe/tensor/exec_context.hpp"

namespace kpipe::runtime {

template <class Scalar>
using Matrix = tensor::Matrix<Scalar>;

// Where microbatches enter and leave the pipeline: inputs for the first model
// stage, and the loss with its gradient at the last one.
template <class Scalar>
struct MicrobatchIO {
  // Fills X with the inputs of microbatch mb of this replica in step `step`.
  std::function<void(int step, int mb, const Matrix<Scalar>& X)> inputs;
  // Returns the scaled loss of Y for microbatch mb and writes dLoss/dY to dY.
  std::function<double(int step, int mb, const Matrix<Scalar>& Y, const Matrix<Scalar>& dY)> loss;
  // Forward-only schedules: receives the last stage's output of microbatch mb.
  std::function<void(int step, int mb, const Matrix<Scalar>& Y)> outputs;
  // Optional (activation dumps): sees each stage-boundary tensor as this rank
  // has it, "input" and "output" after F, "output_grad" and "input_grad" (not
  // on the first model stage) after B or BW.
  std::function<void(const char* what, int step, int mb, int chunk, const Matrix<Scalar>& tensor)> observe;
  // Optional (packed documents): assigns microbatch mb's documents, which the
  // stages' layers read, before each of its F, B and BW on this rank. Such
  // stages never run lanes: their attention is not row-wise.
  std::function<void(int step, int mb)> documents;
};

// The step-level actions, supplied by the training loop.
struct StepHooks {
  std::function<void()> reduce_gradients;
  std::function<void()> optimizer_step;
  // Optional: layer `layer` (its index in the chunk) of chunk `chunk` has
  // accumulated its last weight gradient of the step, so its data-parallel
  // sum may start; and a nudge between actions for sums in flight.
  std::function<void(int chunk, int layer)> gradients_final;
  std::function<void()> progress;
  // Optional (train.post_validation): the step then starts on its
  // speculative head (schedule/speculation.hpp) before the previous update
  // is known to stand, and this is called once, where the head ends. It
  // returns false when that update was rolled back: every rank then abandons
  // its head and runs the step again.
  std::function<bool()> previous_update_stands;
};

struct StepResult {
  double loss = 0.0;                  // Σ scaled losses computed on this rank (last model stage only)
  int peak_stashed = 0;               // most (microbatch, chunk) activations stashed at once on this rank
  std::vector<ActionTiming> timings;  // one per action, in list order
  // The data-parallel gradient sum, in seconds since the step began: from the
  // first gradients handed over (or the REDUCE_GRADS action) to the end of
  // REDUCE_GRADS; -1 until the first is handed over.
  double reduction_start = -1.0;
  double reduction_end = 0.0;
  // train.post_validation: the step's head ran twice (the last update was rolled back under it).
  bool head_ran_again = false;
  double loss_scale = 1.0;  // compute.precision = fp16: what the step's loss gradients were multiplied by
};

template <class Scalar>
class Executor {
 public:
  // `chunks[c]` is model stage schedule.placement.stage(rank, c). The transport must run over the
  // pipeline communicator of `grid`. `lanes` > 1: a rank that holds the whole
  // model runs that many microbatches at once where it can (schedule/lanes.hpp);
  // 0: one per host thread where its stage would otherwise split F and B into
  // row parts (model::Sequential: weights small enough for every thread to read).
  // `split`: how lanes share the threads (config::LaneSplit; "layers" and
  // "auto" where the stage can split by layers, in groups of
  // model::layer_split_lanes; "auto" times both ways, TimedChoice).
  Executor(const schedule::Schedule& schedule, const comm::ProcessGrid& grid, std::vector<model::Stage<Scalar>*> chunks,
           int microbatch_size, comm::Transport& transport, MicrobatchIO<Scalar> io, StepHooks hooks,
           tensor::ExecContext& exec, int lanes = 1, config::LaneSplit split = config::LaneSplit::microbatches);

  StepResult run_step(int step);
  // The microbatches this rank runs at once: 1 but where lanes run (a host
  // backend, the whole model's one stage running lanes, a list of microbatch
  // blocks, no activation dump and no post-validation).
  int lanes() const { return lane_groups_.empty() ? 1 : static_cast<int>(lane_groups_.front().blocks.size()); }
  // The microbatches a group split by layers holds, 0 where none runs; and
  // whether steps choose between the two splits by their times.
  int layer_lanes() const { return layer_groups_.empty() ? 0 : static_cast<int>(layer_groups_.front().blocks.size()); }
  bool times_lane_split() const { return choice_.has_value(); }
  // Steps run so far with lanes split by layers.
  int steps_split_by_layers() const { return steps_split_by_layers_; }

 private:
  struct Slots;  // per (microbatch, chunk) tensors of the step in flight

  // One pass over the action list; false when hooks_.previous_update_stands
  // said the head must run again (the head is then abandoned).
  bool run_actions(int step, bool validated, StepResult& result);
  // Leaves an abandoned head as if it never ran: receives and drops the
  // messages the other heads sent this rank and this head did not take,
  // completes its own sends, and drops what its chunks stashed.
  void abandon_head(int step);

  void execute(const schedule::Action& action, std::size_t index, int step, Slots& slots, StepResult& result,
               double step_start);
  // Runs a group of microbatch blocks as lanes; each action's time is its
  // share of its phase (the group's F's, B's, W's), its loss its own.
  void run_lanes(const schedule::LaneGroup& group, model::LaneSplit split, int step, StepResult& result,
                 double step_start);
  // For the action that completes a chunk's weight gradients of the step:
  // hands each layer's over to hooks_.gradients_final as soon as it is done
  // (noting when the first went); for any other action, nothing.
  typename model::Stage<Scalar>::LayerDone gradients_final(const schedule::Action& action, std::size_t index,
                                                           StepResult& result, double step_start) const;
  // Keeps receive_window_ receives posted, in list order, before action `limit`.
  void post_receives_ahead(std::size_t limit);
  comm::Message message_of(const schedule::Action& action) const;
  // A stage boundary to or from another rank, in the stages' boundary type
  // (model::Stage::boundary_dtype): bfloat16 and float16 rounded from the
  // float32 matrix and widened back, exactly, since stages make their
  // boundaries exact in it.
  void send_boundary(const comm::Message& message, const Matrix<Scalar>& data);
  Matrix<Scalar> receive_boundary(const comm::Message& message, FunctionRef<std::string()> what);
  int stage_of(int chunk) const { return schedule_.placement.stage(rank_, chunk); }
  std::size_t slot_key(int microbatch, int chunk) const {
    return static_cast<std::size_t>(microbatch) * schedule_.v + chunk;
  }
  // The chunk of this rank that holds model stage stage_of(chunk) + step
  // (step = ±1), or -1 when that stage is on another rank or does not exist.
  int local_neighbour(int chunk, int step) const {
    const int stage = stage_of(chunk) + step;
    if (stage < 0 || stage >= schedule_.p * schedule_.v) return -1;
    const schedule::StagePlace place = schedule_.placement.place(stage);
    return place.rank == rank_ ? place.chunk : -1;
  }
  bool is_first_stage(int chunk) const { return stage_of(chunk) == 0; }
  bool is_last_stage(int chunk) const { return stage_of(chunk) == schedule_.p * schedule_.v - 1; }

  const schedule::Schedule& schedule_;
  const std::vector<schedule::Action>& actions_;
  int rank_;
  std::vector<model::Stage<Scalar>*> chunks_;
  int microbatch_size_;
  comm::Transport& transport_;
  MicrobatchIO<Scalar> io_;
  StepHooks hooks_;
  // The action that completes chunk c's weight gradients in a step (its last B or W), -1 if none.
  std::vector<std::ptrdiff_t> last_gradient_action_;
  schedule::SpeculativeHead head_;            // with hooks_.previous_update_stands only
  std::vector<std::size_t> receive_indices_;  // positions of RECV_* actions in actions_
  std::size_t next_receive_ = 0;              // first entry of receive_indices_ not yet posted
  // How many receives are posted ahead of need: the schedule's peak number of
  // activations stashed on this rank, plus one, so the pool is bounded by the
  // schedule's in-flight count, not by m.
  int receive_window_ = 1;
  bool training_;
  tensor::ExecContext& exec_;              // the chunks' instance: compute is enqueued there, never fenced globally
  std::vector<std::string> region_names_;  // "kpipe::F", ... per ActionKind
  tensor::BufferPool<Matrix<Scalar>> activations_;
  std::vector<schedule::LaneGroup> lane_groups_;   // where this rank runs lanes: all its microbatches; else none
  std::vector<schedule::LaneGroup> layer_groups_;  // the same split by layers, where that may run; else none
  std::optional<TimedChoice> choice_;              // split_ = "auto" with both: way 1 splits by layers
  int steps_split_by_layers_ = 0;
  struct Lanes {  // a group's microbatches and tensors, kept with their storage
    std::vector<int> microbatches;
    std::vector<Matrix<Scalar>> X, Y, dY, dX;
    std::vector<std::pair<double, double>> losses;  // each LOSS's start and end
  } lane_;
  static constexpr bool host_synchronous = std::is_same_v<tensor::ExecutionSpace, Kokkos::DefaultHostExecutionSpace>;
};

}  // namespace kpipe::runtime
