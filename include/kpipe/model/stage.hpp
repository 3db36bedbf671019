#pragma once
// A model stage: the contiguous global layers [first, first + count) that one
// pipeline rank (or one of its virtual chunks) runs. It is the compute the
// executor drives action by action: F, B, W and BW per microbatch id, with
// everything a microbatch needs between them stashed here, keyed by that id.
//
// Buffers: the stage keeps its own copies of what it stashes, so a caller may
// reuse X, Y, dY and dX as soon as a call returns. Y and dX are written, never
// kept. Rows are samples; X is rows x input_dim(), Y output_rows(rows) x
// output_dim() (rows, except with sequence parallelism at the model's ends).
// Copies and intermediates come from the ExecContext's pool and go back when
// the microbatch's W (or BW) releases them: after the first step a stage
// allocates nothing. Every kernel runs on the context's instance; each action
// is a profiling region named as in the schedule IR: "kpipe::F", "kpipe::B",
// "kpipe::W", "kpipe::BW".
//
// Serving: a transformer stage with a KV cache (enable_kv_cache) runs
// infer() on token batches, one row per token of any sequence and position
// (DESIGN.md §5b); only those rows cross stage boundaries.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/model/collectives.hpp"
#include "kpipe/model/kernel_choice.hpp"
#include "kpipe/model/kv_cache.hpp"
#include "kpipe/model/layer.hpp"
#include "kpipe/model/layers/sequential.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"
#include "kpipe/model/stash_store.hpp"

namespace kpipe::model {

struct StageOptions {
  KernelChoice kernels;  // compute.gemm, compute.attention
  // pipeline.recompute = "full": F keeps only the stage input and B re-runs
  // the forward pass; results are bitwise the same as without.
  bool recompute = false;
  // pipeline.recompute = "selective": the layers keep their saved tensors but
  // those cheap to rebuild in B (LayerEnvironment::selective_recompute).
  bool selective_recompute = false;
  // pipeline.activation_store = "hdf5": where F moves the microbatch's stash
  // (its saved tensors, or with recompute the stage input) until its B or BW
  // takes it back. Not owned; it must outlive the stage. Null keeps the stash
  // in memory.
  StashStore* stash_store = nullptr;
  // pipeline.sequence_parallel with a tensor group of t > 1 ranks: between
  // the tensor-parallel pairs, and across stage boundaries, each rank holds
  // only its 1/t of a microbatch's rows (docs/model.md). No effect with t = 1.
  bool sequence_parallel = false;
  // data.pack_documents: the documents of the microbatch whose F or B runs,
  // assigned by the runner before each (LayerEnvironment::documents). Not
  // owned; it must outlive the stage. Null: a sequence is one document.
  const Documents* documents = nullptr;
};

template <class Scalar>
class Stage {
 public:
  // `exec` (and `collectives`) must outlive the stage. Without collectives the
  // layers get serial ones: a tensor-parallel group of one rank.
  Stage(const ModelSpec& model, LayerRange layers, StageOptions options, tensor::ExecContext& exec);
  Stage(const ModelSpec& model, LayerRange layers, StageOptions options, Collectives& collectives,
        tensor::ExecContext& exec);

  LayerRange layers() const { return layers_; }
  int input_dim() const { return body_->input_dim(); }
  int output_dim() const { return body_->output_dim(); }
  // The rows of a microbatch of b samples at this stage's input: b at the
  // model's first stage (the data), b/t past it with sequence parallelism
  // (a rank's share of a boundary), else b. And the rows of the output for
  // `rows` input rows: b at the model's last stage.
  int input_rows(int microbatch_size) const;
  int output_rows(int rows) const { return body_->output_rows(rows); }
  // The parts F and B split `rows` input rows into, one per host thread
  // (Sequential's row parts; 1: layer after layer).
  int row_parts(int rows) const { return body_->row_parts(rows); }
  // The element type the stage's boundaries are exact in, and travel in
  // between ranks: Scalar's, or bfloat16 and float16 under compute.precision
  // = bf16 and fp16 (kernels::stored_dtype).
  tensor::DType boundary_dtype() const { return kernels::stored_dtype<Scalar>(options_.kernels.precision); }

  // F: Y from X, stashing what B and W of microbatch `mb` need.
  void forward(int mb, const tensor::ConstMatrix<Scalar>& X, const tensor::Matrix<Scalar>& Y);
  // B: dX from dY; keeps what W needs and frees the rest. An empty dX (the
  // first stage) skips the input gradient.
  void backward_input(int mb, const tensor::ConstMatrix<Scalar>& dY, const tensor::Matrix<Scalar>& dX);
  // Called with a layer's index in the stage (0 for layers().first) as soon
  // as W has accumulated its weight gradients.
  using LayerDone = std::function<void(int layer)>;
  // W: adds the weight gradients of `mb` to the gradient buffers and frees
  // the microbatch. Bitwise reproducibility needs W in ascending mb order.
  void backward_weight(int mb, const LayerDone& after_layer = {});
  // BW: B then W.
  void backward(int mb, const tensor::ConstMatrix<Scalar>& dY, const tensor::Matrix<Scalar>& dX,
                const LayerDone& after_layer = {});
  // Lanes (Sequential): F, B and W of the microbatches `mbs` at once, one per
  // host thread, each with its own X and Y (dY and dX); each microbatch's
  // results bitwise those of forward, backward_input and backward_weight run
  // for one after the other, W in the order of `mbs`. Only where runs_lanes():
  // every layer row-wise on a host backend, no recomputation, no stash store.
  // Split by layers (Sequential's LaneSplit) only where splits_layers().
  bool runs_lanes() const { return body_->runs_lanes() && !options_.recompute && options_.stash_store == nullptr; }
  bool splits_layers() const { return runs_lanes() && body_->splits_layers(); }
  void forward_lanes(const std::vector<int>& mbs, const std::vector<tensor::Matrix<Scalar>>& X,
                     const std::vector<tensor::Matrix<Scalar>>& Y, LaneSplit split = LaneSplit::microbatches);
  void backward_input_lanes(const std::vector<int>& mbs, const std::vector<tensor::Matrix<Scalar>>& dY,
                            const std::vector<tensor::Matrix<Scalar>>& dX, LaneSplit split = LaneSplit::microbatches);
  void backward_weight_lanes(const std::vector<int>& mbs, const LayerDone& after_layer = {});
  // Where lanes may split by layers, before any step: Sequential::weigh_by_layer_runs.
  void weigh_by_layer_runs() { body_->weigh_by_layer_runs(); }
  // Inference: Y from X, nothing stashed.
  void forward_no_grad(const tensor::ConstMatrix<Scalar>& X, const tensor::Matrix<Scalar>& Y) const;

  // Widths of one token's row in infer: a transformer's boundary holds T
  // positions per sample (input_dim()/T: 1 token id for the first stage, dim
  // after it; output_dim()/T: dim, or vocab logits for the last).
  int token_input_width() const { return input_dim() / positions_; }
  int token_output_width() const { return body_->token_output_dim(); }
  // The stage's decoder blocks, each with one attention layer in the cache.
  int attention_layers() const { return static_cast<int>(attention_layers_.size()); }
  // Allocates the stage's KV cache: `blocks` blocks of `block_tokens` tokens
  // for each attention layer, replacing any earlier one. A transformer only.
  void enable_kv_cache(int blocks, int block_tokens);
  // Bytes of the KV cache, 0 before enable_kv_cache.
  std::size_t kv_cache_bytes() const { return cache_ ? cache_->bytes() : 0; }
  // Incremental inference: Y (n x token_output_width()) from X (n x
  // token_input_width()) for the n tokens of `tokens`, whose slots `table`
  // has reserved; writes their K and V to the cache and stashes nothing.
  void infer(const KvBlockTable& table, const TokenBatch& tokens, const tensor::ConstMatrix<Scalar>& X,
             const tensor::Matrix<Scalar>& Y);

  void zero_grad();
  // Drops every stashed microbatch, for a step abandoned part-way (the
  // speculative head train.post_validation re-runs). Not with a stash store.
  void discard_stash();
  // Parameters in global layer order, named "layer<global index>.<...>".
  std::vector<Parameter<Scalar>> parameters() const { return body_->parameters(); }
  // The parameters of one layer, by its index in the stage.
  std::vector<Parameter<Scalar>> layer_parameters(int layer) const { return body_->layer(layer).parameters(); }
  // After the parameters' values changed (Layer::weights_changed).
  void weights_changed() { body_->weights_changed(); }

  // Microbatches whose F is done and whose B (or BW) is not.
  int stashed_microbatches() const;
  int peak_stashed_microbatches() const { return peak_microbatches_; }
  // Bytes of everything stashed and resident, including state kept between
  // B and W; tensors moved to the stash store do not count until taken back.
  std::size_t stashed_bytes() const;
  std::size_t peak_stashed_bytes() const { return peak_bytes_; }

 private:
  // One tensor moved to the stash store: its place in the context tree
  // (child indices, then the name), and the first tensor of the same buffer
  // when layers saved one buffer under several names (restored as one).
  struct Spilled {
    std::vector<int> path;
    std::string name;
    std::string key;  // the store's name for it
    tensor::TensorSpec spec;
    int alias_of = -1;  // index into spilled, or -1
  };

  struct Stashed {
    int rows = 0;
    tensor::Tensor input;  // the stage input, kept only with recompute
    Context context;
    bool input_gradient_done = false;
    std::vector<Spilled> spilled;  // in the store between F and B
  };

  Stashed& stashed(int mb, bool input_gradient_done, const char* action);
  using Stash = std::map<int, Stashed>;
  // F's start: checks the shapes, makes microbatch mb's entry in `entry` and
  // returns the stage's own copy of X (rounded past the first stage).
  tensor::Tensor admit(int mb, const tensor::ConstMatrix<Scalar>& X, const tensor::Matrix<Scalar>& Y,
                       typename Stash::node_type& entry);
  // F's end: rounds Y where another stage follows and stashes the entry.
  void stash(typename Stash::node_type entry, const tensor::Matrix<Scalar>& Y);
  // B's start, checks and anything spilled or recomputed, and its end.
  Stashed& begin_backward_input(int mb, const tensor::Tensor& dY, const tensor::Matrix<Scalar>& dX);
  void end_backward_input(Stashed& entry, const tensor::Matrix<Scalar>& dX);
  // An empty entry for microbatch mb, a retired one where spare_ has one.
  typename Stash::node_type fresh_entry(int mb);
  // Moves microbatch mb's entry from the stash to spare_, emptied.
  void retire(int mb);
  void run_backward_input(int mb, const tensor::Tensor& dY, const tensor::Matrix<Scalar>& dX);
  void update_peaks();
  // compute.precision = bf16, fp16: a boundary activation or gradient (the
  // output when another stage follows, the input and its gradient past the
  // first) rounded through the reduced type, so that a stage boundary is
  // exact in it, as the activations between layers are (Sequential).
  void round_boundary(const tensor::Tensor& boundary) const;
  void spill(int mb, Stashed& entry);
  void restore(int mb, Stashed& entry);

  LayerRange layers_;
  StageOptions options_;
  tensor::ExecContext& exec_;
  std::unique_ptr<SerialCollectives> serial_;  // only when no collectives were given (stable across moves)
  LayerEnvironment env_;
  std::unique_ptr<Sequential<Scalar>> body_;
  bool last_;                          // the model's last stage (its output goes to the loss)
  int positions_;                      // T for a transformer, 1 otherwise
  int kv_width_;                       // a token's K (and V) features per attention layer, 0 without
  std::vector<int> attention_layers_;  // global indices of the decoder blocks
  std::unique_ptr<KvCache<Scalar>> cache_;
  Stash stash_;
  // Entries of microbatches whose W has run, kept with their contexts' storage
  // for the next forward: a stage allocates nothing per microbatch.
  std::vector<typename Stash::node_type> spare_;
  int peak_microbatches_ = 0;
  std::size_t peak_bytes_ = 0;
  // Lanes' per-call lists, kept with their storage.
  std::vector<typename Stash::node_type> lane_entries_;
  std::vector<tensor::Tensor> lane_in_, lane_out_;
  std::vector<Context*> lane_contexts_;
};

}  // namespace kpipe::model
