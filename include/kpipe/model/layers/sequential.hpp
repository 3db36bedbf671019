#pragma once
// The composite that runs layers one after the other.

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "kpipe/model/layer.hpp"

namespace kpipe::model {

// What a Sequential does to the activations and gradients between its layers
// under compute.precision = bf16 or fp16: a stage's body (the model's layers)
// rounds them to that type (held in float32 buffers, exact in the reduced
// type), so that a stage boundary may fall between any two; a composite
// inside a layer keeps them float32, and each part keeps what it saves in
// the reduced type.
enum class BetweenLayers { kept, rounded };

// Layers applied one after the other; the intermediates come from the pool.
// Saves nothing itself: one child context per layer.
//
// Where every layer is row-wise (Layer::row_wise) and the rank has several
// host threads, F and B split a microbatch's rows into parts, one per thread,
// and each thread carries its part through all the layers on its own: one
// parallel region per pass instead of a few per layer, and no thread reads
// rows another one wrote. Where a weight is larger than a quarter MiB each
// thread reading all of it costs more than the regions saved, and F and B stay
// whole. `row_parts` (0: one per host thread, at most one per four rows) fixes
// the number of parts, and the threads lanes run on; a test may ask for
// several on one thread, which then runs them one after the other.
//
// Lanes: where every layer is row-wise, several microbatches at once, each
// whole on a host thread of its own (a rank that holds the whole model runs
// them so, runtime/execution/executor.cpp). The begin of each microbatch's pass runs on
// the calling thread, then their rows at once, a microbatch per thread (each
// thread's products as large as a rank of one thread's, on weights each
// thread reads whole), then the ends; each microbatch's outputs, input
// gradients and context are bitwise what forward and backward_input give it
// alone. W of several microbatches adds theirs in the order given, each layer
// on the thread that owns it: the sums of one microbatch's W after the other.
//
// Lanes may instead split by layers: each thread holds a run of consecutive
// layers (balanced by their parameters' elements) and every microbatch of the
// group passes through the runs in turn, a thread handing its rows to the
// next as soon as they are done (a pipeline inside the rank), and W of a
// layer on the thread whose run holds it. A thread then reads only its own
// layers' weights and the rows it wrote, as a rank of a pipeline does; split
// by microbatches, both threads read every weight and W reads rows the other
// thread wrote. Every result is bitwise the same either way.
enum class LaneSplit { microbatches, layers };

// The microbatches a group split by layers holds: `lanes` where given (> 1),
// else eight per thread, at most `microbatches`. The pipeline inside the
// rank fills and drains once per pass of a group, idling (threads - 1) /
// (8 threads) of it at most.
constexpr int layer_split_lanes(int lanes, int microbatches, int threads) {
  return lanes > 1 ? lanes : std::max(1, std::min(microbatches, 8 * threads));
}

template <class Scalar>
class Sequential final : public Layer<Scalar> {
 public:
  Sequential(std::vector<std::unique_ptr<Layer<Scalar>>> layers, LayerEnvironment env,
             BetweenLayers between = BetweenLayers::kept, int row_parts = 0);

  const char* kind() const override { return "sequential"; }
  int input_dim() const override { return layers_.front()->input_dim(); }
  int output_dim() const override { return layers_.back()->output_dim(); }
  int output_rows(int rows) const override;
  int input_rows(int rows) const override;
  std::vector<TensorDecl> saved(int) const override { return {}; }
  void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const override;
  void backward_weight(Context& ctx) override { backward_weight(ctx, {}); }
  // W, calling after_layer(i) as soon as layer i's weight gradients are
  // accumulated: a data-parallel sum of them may start then.
  void backward_weight(Context& ctx, const std::function<void(int)>& after_layer);
  // W of `count` microbatches, in that order (lanes), clearing their contexts.
  void backward_weight(Context* const* contexts, std::size_t count, const std::function<void(int)>& after_layer);
  bool backward_weight_on_any_thread() const override;
  bool row_wise() const override { return row_wise_; }
  void forward_begin(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const override;
  void forward_rows(tensor::TensorList inputs, tensor::TensorList outputs, const Context* ctx, RowRange rows,
                    const tensor::ExecutionSpace& space) const override;
  void forward_end() const override;
  void backward_input_begin(tensor::TensorList output_grads, tensor::TensorList input_grads,
                            Context& ctx) const override;
  void backward_input_rows(tensor::TensorList output_grads, tensor::TensorList input_grads, const Context& ctx,
                           RowRange rows, const tensor::ExecutionSpace& space) const override;
  void backward_input_end(tensor::TensorList output_grads, Context& ctx) const override;
  void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& batch) const override;
  int token_output_dim() const override { return layers_.back()->token_output_dim(); }
  std::vector<Parameter<Scalar>> parameters() const override;
  void weights_changed() override;

  // The parts F and B split a microbatch of `rows` rows into (1: none).
  int row_parts(int rows) const;

  // Whether F and B of several microbatches may run as lanes: every layer
  // row-wise, on a host backend.
  bool runs_lanes() const { return !lane_spaces_.empty(); }
  // Whether lanes may split by layers: lanes run, and the runs of at least
  // two threads hold parameters.
  bool splits_layers() const { return layer_runs_.size() > 1; }
  // Where lanes may split by layers and every layer's W may run on any
  // thread: W of each layer (and the zeroing of its gradients,
  // Parameter::host_thread) on the thread whose run holds it,
  // however a step's lanes split, so that a thread's gradients stay in its
  // core's caches; W is then balanced as the runs are.
  void weigh_by_layer_runs();
  // F and B of microbatch l = 0, 1, ... in lane l: inputs, outputs (or
  // gradients) and contexts one per microbatch.
  void forward_lanes(tensor::TensorList inputs, tensor::TensorList outputs, Context* const* contexts,
                     LaneSplit split = LaneSplit::microbatches) const;
  void backward_input_lanes(tensor::TensorList output_grads, tensor::TensorList input_grads, Context* const* contexts,
                            LaneSplit split = LaneSplit::microbatches) const;

  int size() const { return static_cast<int>(layers_.size()); }
  const Layer<Scalar>& layer(int i) const { return *layers_.at(static_cast<std::size_t>(i)); }

 private:
  // Runs step(i, input, output) for each layer i in order, the intermediates
  // from the pool, width(layer) columns wide.
  template <class Width, class Step>
  void chain(tensor::TensorList inputs, tensor::TensorList outputs, const Width& width, const Step& step) const;

  // Rows of an activation or gradient between two layers, rounded through the reduced type in place.
  void round_between(const tensor::Tensor& between, RowRange rows, const tensor::ExecutionSpace& space) const;
  // An instance for each row part's thread to launch on, or none where F and B
  // do not split: a layer that is not row-wise, a weight past the limit, a device, one host thread.
  std::vector<tensor::ExecutionSpace> row_spaces(int parts) const;
  // The instances lanes run on, one per thread: none unless every layer is
  // row-wise on a host backend (whatever the weights' size: a lane multiplies
  // all of a microbatch's rows).
  std::vector<tensor::ExecutionSpace> lane_spaces(int threads) const;
  // Runs lane(l, space) for l in [0, lanes), spread over the lane threads
  // (thread t takes l = t, t + threads, ...), or one after the other on the
  // calling thread with the context's instance inside another region or with
  // a tool attached.
  template <class Lane>
  void on_lanes(const char* label, std::size_t lanes, const Lane& lane) const;
  // Consecutive layers for each of `threads` threads, balanced by their
  // parameters' elements, or none where fewer than two would hold any.
  std::vector<std::vector<std::size_t>> layer_runs(std::size_t threads) const;
  // Runs run(r, l, space) for each layer run r and microbatch l in [0,
  // microbatches): run r on thread r, microbatch after microbatch, each once
  // the run before it in the data flow (F: r - 1, B: r + 1) has finished
  // that microbatch; or run after run, in the flow's order, on the calling
  // thread inside another region, with a tool attached or with fewer threads
  // than runs.
  template <class Run>
  void on_layer_runs(const char* label, std::size_t microbatches, bool forward, const Run& run) const;
  // The rows of layers [first, end) of a begun pass, F in order, B in
  // reverse: all of them are forward_rows and backward_input_rows, a run's
  // are its share of a microbatch split by layers.
  void forward_layers(const Context* ctx, std::size_t first, std::size_t end, RowRange rows,
                      const tensor::ExecutionSpace& space) const;
  void backward_input_layers(const Context& ctx, std::size_t first, std::size_t end, RowRange rows,
                             const tensor::ExecutionSpace& space) const;
  [[noreturn]] static void no_layer_runs();

  // A pass's tensors between the layers, from its begin to its end: entry i
  // is layer i's input in F (its output gradient in B).
  std::vector<tensor::Tensor>& open_pass(const Context* ctx) const;
  const std::vector<tensor::Tensor>& pass_of(const Context* ctx) const;
  void close_pass(const Context* ctx) const;
  // The layers whose W each host thread runs at once, or none where W runs
  // layer after layer: one host thread, a device, a layer that must run on
  // the calling thread, fewer than two with parameters. Fixed by the layers,
  // so worked out once, not on every microbatch's W.
  std::vector<std::vector<std::size_t>> spread_weight_gradients() const;

  LayerEnvironment env_;
  std::vector<std::unique_ptr<Layer<Scalar>>> layers_;
  BetweenLayers between_;
  std::vector<std::vector<std::size_t>>
      weight_threads_;  // spread_weight_gradients(), or layer_runs_ (weigh_by_layer_runs)
  bool row_wise_;
  std::vector<tensor::ExecutionSpace> row_spaces_;    // row_spaces()
  std::vector<tensor::ExecutionSpace> lane_spaces_;   // lane_spaces()
  std::vector<std::vector<std::size_t>> layer_runs_;  // layer_runs(), for lanes split by layers
  // How many microbatches each layer run has finished in the current pass,
  // each on a line of its own (the next run's thread polls it), and whether
  // a run threw (the others stop waiting).
  struct alignas(64) RunProgress {
    std::atomic<std::size_t> done{0};
  };
  std::unique_ptr<RunProgress[]> run_progress_;
  mutable std::atomic<bool> run_failed_{false};
  // The passes begun and not yet ended, by the context they run in (null:
  // F without one); more than one while lanes run. Their first open_ entries
  // are in use, the rest kept with their storage for the next.
  struct Pass {
    const Context* ctx = nullptr;
    std::vector<tensor::Tensor> tensors;
  };
  mutable std::vector<Pass> passes_;
  mutable std::size_t open_ = 0;
};

}  // namespace kpipe::model
