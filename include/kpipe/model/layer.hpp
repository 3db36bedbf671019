#pragma once
// The layer contract (v2). A layer is a host-side object whose methods launch
// Kokkos kernels on the execution-space instance of the tensor::ExecContext it
// was built with. It declares its named inputs, outputs and saved tensors as
// TensorSpecs for a microbatch of `rows` samples, takes lists of type-erased
// tensors, and keeps what a microbatch needs between its forward (F), input
// gradient (B) and weight gradient (W) in a Context the caller owns, by name,
// so one layer serves any number of microbatches in flight (DESIGN.md §1, §3).

#include <cstddef>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kpipe/kernels/choices.hpp"
#include "kpipe/model/collectives.hpp"
#include "kpipe/model/data/documents.hpp"
#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/tensor.hpp"

namespace kpipe::model {

// Which part of a parameter this rank holds. Tensor parallelism (Megatron)
// splits a column-parallel Linear's weight and bias along axis 1 and a
// row-parallel one's weight along axis 0 into `count` equal shards, shard
// `index` on tensor-parallel rank `index`; checkpoints then write each shard
// into its slice of the global tensor, and global-norm clipping counts a
// full parameter once per group but every shard. count == 1 is the whole
// parameter. With `blocks` > 1 the axis is that many equal blocks, each split
// into `count` shards, and the shard is slice `index` of every block: a fused
// Q|K|V projection whose rank holds the Q, K and V columns of its heads.
//
// A padded vocabulary pads the global tensor along `axis` past its first
// `valid` entries (0: none); the padding is zero, masked, and not stored in
// checkpoints, so a checkpoint restarts at any padding.
struct Shard {
  int axis = 0;
  int index = 0;
  int count = 1;
  int blocks = 1;
  int valid = 0;

  bool full() const { return count == 1; }
  bool padded() const { return valid > 0; }
  static Shard whole() { return {}; }
  static Shard along(int axis, int index, int count, int blocks = 1) { return {axis, index, count, blocks}; }
  // This shard of a global tensor whose first `valid` entries along `axis` are real.
  Shard padded_after(int padded_axis, int valid_entries) const {
    Shard shard = *this;
    if (full()) shard.axis = padded_axis;
    shard.valid = valid_entries;
    return shard;
  }
};

// A trainable matrix and its gradient buffer (same shape). Biases and norm
// scales are 1 x n rows. Names start with the global layer, "layer3.weight".
// `decays`: weight decay applies (weight matrices and embeddings), not to
// biases and normalisation scales.
template <class Scalar>
struct Parameter {
  std::string name;
  tensor::Matrix<Scalar> value;
  tensor::Matrix<Scalar> grad;
  Shard shard = Shard::whole();
  bool decays = false;
  // Sequence parallelism: the parameter is whole but its layer sees only this
  // rank's rows, so grad is a partial sum, to be summed over the tensor group
  // before clipping and the optimizer (model::sum_row_partials).
  bool row_partial = false;
  // Tied parameters (model.tie_embeddings): the token table (owner) and the LM
  // head (copy) hold one matrix under the owner's name, each on the rank of
  // its stage. After the data-parallel sums both gradients become their sum
  // (model::sum_tied_gradients, or across the two ranks), so the same
  // optimizer step keeps them equal; the copy stays out of checkpoints and
  // counts zero in the clipping norm, so the matrix counts once.
  enum class Tie { none, owner, copy } tie = Tie::none;
  // The host thread of the rank whose W writes grad, where a Sequential
  // spreads W over the threads (-1: none); the gradient is zeroed there too,
  // so its lines stay in that core's caches.
  int host_thread = -1;
};

// A named tensor a layer declares: "x" rows x 64 float32.
struct TensorDecl {
  std::string name;
  tensor::TensorSpec spec;

  friend bool operator==(const TensorDecl& a, const TensorDecl& b) { return a.name == b.name && a.spec == b.spec; }
};

// What one layer keeps for one microbatch, like autograd's saved tensors, by
// name. Composite layers keep one child context per sub-layer. A saved tensor
// holds its buffer: a pooled buffer is free again once the context drops it.
class Context {
 public:
  // Saves `tensor` as `name`, replacing an earlier tensor of that name.
  void save(const std::string& name, tensor::Tensor tensor);
  // Throws a runtime error naming the tensor and what is saved when absent.
  const tensor::Tensor& saved(const std::string& name) const;
  bool has(const std::string& name) const;
  // Drops one saved tensor (a no-op when absent).
  void drop(const std::string& name);
  // Drops every saved tensor, here and in the child contexts, which stay (empty)
  // with their storage for the next microbatch: no allocation per microbatch.
  void clear();
  // `count` empty child contexts (a composite layer's forward), reusing the
  // children, and their storage, that an earlier microbatch left here.
  void reset_children(std::size_t count);
  // Names and specs of the tensors saved here (children not included).
  std::vector<TensorDecl> saved_specs() const;

  std::vector<Context> children;

  std::size_t bytes() const;

 private:
  std::vector<std::pair<std::string, tensor::Tensor>> saved_;
};

template <class Scalar>
class CachedBatch;  // kv_cache.hpp

// Throws the logic error of a row-wise method called on a layer of `kind` that is not.
[[noreturn]] void not_row_wise(const char* kind);

// Rows [begin, end) of a microbatch's tensors.
struct RowRange {
  int begin = 0;
  int end = 0;

  // All the rows of `tensor`.
  static RowRange all_of(const tensor::Tensor& tensor) { return {0, static_cast<int>(tensor.spec().extent(0))}; }
  // Part `part` of `parts` nearly equal parts of `rows` rows, in order.
  static RowRange part_of(int rows, int part, int parts) {
    const auto at = [rows, parts](int p) { return static_cast<int>(static_cast<long long>(rows) * p / parts); };
    return {at(part), at(part + 1)};
  }
  // Those rows of `matrix`: the same memory, still row-major.
  template <class Matrix>
  Matrix of(const Matrix& matrix) const {
    return Kokkos::subview(matrix, std::make_pair(begin, end), Kokkos::ALL);
  }
};

template <class Scalar>
class Layer {
 public:
  virtual ~Layer() = default;

  // "linear", "activation", "layer_norm", "sequential", "residual": names its
  // profiling regions, "kpipe::model::<kind>::forward".
  virtual const char* kind() const = 0;
  virtual int input_dim() const = 0;
  virtual int output_dim() const = 0;
  // Sequence parallelism: the rows of the output for `rows` input rows (a
  // layer that gathers the tensor group's rows has t times as many, one that
  // reduce-scatters 1/t), and the inverse. Most layers keep their rows.
  virtual int output_rows(int rows) const { return rows; }
  virtual int input_rows(int rows) const { return rows; }

  // The tensors of a microbatch of `rows` samples: inputs and outputs of
  // forward (and, in the same order, the gradients of backward_input), and
  // what forward saves for the backward passes.
  virtual std::vector<TensorDecl> inputs(int rows) const {
    return {{"x", tensor::TensorSpec::matrix<Scalar>(rows, input_dim())}};
  }
  virtual std::vector<TensorDecl> outputs(int rows) const {
    return {{"y", tensor::TensorSpec::matrix<Scalar>(output_rows(rows), output_dim())}};
  }
  virtual std::vector<TensorDecl> saved(int rows) const = 0;

  // F: outputs from inputs. With a context, saves there what backward_input
  // needs; with nullptr (inference, recomputation) saves nothing.
  virtual void forward(tensor::TensorList inputs, tensor::TensorList outputs, Context* ctx) const = 0;

  // B: input gradients from output gradients, leaving in ctx only what
  // backward_weight needs. The output gradients must stay unchanged until
  // backward_weight. An empty input gradient (no gradient wanted, the first
  // stage's input) skips computing it.
  virtual void backward_input(tensor::TensorList output_grads, tensor::TensorList input_grads, Context& ctx) const = 0;

  // W: grad = grad + dW of this microbatch for every parameter; empties ctx.
  virtual void backward_weight(Context& ctx) = 0;
  // Whether backward_weight may run on any host thread while other layers'
  // run on the others: it touches only its own gradients and ctx, takes
  // nothing from the pool and calls no collective, and each of its kernels
  // runs on the calling thread when called from a parallel region (as
  // kernels::gemm does). Sequential then spreads its layers' W over the
  // rank's host threads, one parallel region instead of a few per layer.
  virtual bool backward_weight_on_any_thread() const { return false; }

  // Row-wise layers: each row of the output depends on the same row of the
  // input alone (and the parameters), with no collective. A rank's host
  // threads may then each carry their own rows of a microbatch through a run
  // of such layers, one parallel region per pass instead of a few per layer
  // (Sequential does), with F and B each in three parts, called in order for
  // one microbatch, or for several at once (Sequential's lanes: each one's
  // begin, then their rows on different threads, then the ends, F's one end
  // for all), so a layer keeps what a pass needs in its ctx, not in members:
  //  * forward_begin, on the calling thread: takes from the pool, and saves in
  //    ctx (when given), all that the rows and the backward passes need;
  //  * forward_rows: those rows of the outputs from the inputs' on `space`,
  //    from any host thread of a parallel region at once with other rows:
  //    takes nothing from the pool, changes nothing in ctx, and runs its
  //    kernels on the calling thread;
  //  * forward_end, on the calling thread after all rows: lets go of what
  //    only the rows needed;
  //  * backward_input_begin, backward_input_rows and backward_input_end the
  //    same for B's input gradients, the end leaving in ctx what
  //    backward_input would.
  // A composite of row-wise layers is row-wise. forward and backward_input
  // compute each row as the parts do. The rows of a layer that is not
  // row-wise throw a logic error naming it; begin and end do nothing unless
  // a layer says otherwise.
  virtual bool row_wise() const { return false; }
  virtual void forward_begin(tensor::TensorList /*inputs*/, tensor::TensorList /*outputs*/, Context* /*ctx*/) const {}
  virtual void forward_rows(tensor::TensorList /*inputs*/, tensor::TensorList /*outputs*/, const Context* /*ctx*/,
                            RowRange /*rows*/, const tensor::ExecutionSpace& /*space*/) const {
    not_row_wise(kind());
  }
  virtual void forward_end() const {}
  virtual void backward_input_begin(tensor::TensorList /*output_grads*/, tensor::TensorList /*input_grads*/,
                                    Context& /*ctx*/) const {}
  virtual void backward_input_rows(tensor::TensorList /*output_grads*/, tensor::TensorList /*input_grads*/,
                                   const Context& /*ctx*/, RowRange /*rows*/,
                                   const tensor::ExecutionSpace& /*space*/) const {
    not_row_wise(kind());
  }
  virtual void backward_input_end(tensor::TensorList /*output_grads*/, Context& /*ctx*/) const {}

  // Incremental inference (serving): outputs from inputs for the n tokens of
  // `batch`, one row each (n x the per-token width), reading and extending
  // the stage's KV cache; saves nothing. Position-wise layers compute a row
  // from that row alone, so forward serves them.
  virtual void infer(tensor::TensorList inputs, tensor::TensorList outputs, CachedBatch<Scalar>& /*batch*/) const {
    forward(inputs, outputs, nullptr);
  }
  // The width of one token's output row in infer: output_dim() for
  // position-wise layers, a position's share for layers over whole sequences.
  virtual int token_output_dim() const { return output_dim(); }

  virtual std::vector<Parameter<Scalar>> parameters() const { return {}; }
  // The values of parameters() changed (an optimizer step, a checkpoint
  // restore): refresh whatever was derived from them, such as a Linear's
  // packed weight; composites pass it to their children. A hook rather than a
  // version counter on each parameter: weights change only in those two
  // places, which hold the whole model, whereas a counter would need a bump in
  // every writer and a check in every forward.
  virtual void weights_changed() {}
};

// What layers are built with: the instance and pool they run on, and the
// collectives of their tensor-parallel group (serial in the reference), and
// whether the regions between tensor-parallel pairs hold only this rank's
// rows (sequence parallelism; false whenever the group has one rank), and
// compute.precision: with bf16 or fp16 float layers keep what they save
// between passes in that type (kernels::stored_dtype; per-row statistics and
// token ids excepted) and a stage rounds the activations and gradients
// between the model's layers to it (docs/model.md, Precision).
//
// pipeline.recompute = "selective" (Korthikanti et al. 2022): a layer saves
// in F only what B cannot rebuild cheaply from the rest of what it saves, and
// rebuilds the remainder in B, bitwise as F computed it; saved(rows) lists
// what it keeps, and its kind's footprint (layer_kind.hpp) says so and what
// the rebuilding costs. Linear inputs stay: rebuilding them is a GEMM. A
// layer with nothing cheap to rebuild ignores it.
//
// data.pack_documents: `documents` holds the documents of the microbatch whose
// F or B runs, which the runner assigns before each (data/documents.hpp);
// layers over positions take their masks and places from it, and what a
// deferred W needs they keep in ctx. nullptr: a sequence is one document.
struct LayerEnvironment {
  tensor::ExecContext& exec;
  Collectives& collectives;
  bool sequence_parallel = false;
  kernels::Precision precision = kernels::Precision::fp32;
  bool selective_recompute = false;
  const Documents* documents = nullptr;
};

namespace detail {
template <class T>
const T& owner(const T& object) {
  return object;
}
template <class T>
const T& owner(const std::unique_ptr<T>& pointer) {
  return *pointer;
}
template <class T>
const T& owner(T* pointer) {
  return *pointer;
}
}  // namespace detail

// Every parameter of `owners` (layers or stages, held by value or pointer),
// one owner after the other: global layer order when the owners are in it.
template <class Owners>
auto parameters_of(const Owners& owners) {
  decltype(detail::owner(*std::begin(owners)).parameters()) all;
  for (const auto& owner : owners) {
    const auto own = detail::owner(owner).parameters();
    all.insert(all.end(), own.begin(), own.end());
  }
  return all;
}

// Every parameter of `parameters`, flattened row-major one after the other,
// copied to the host: for bitwise comparisons and I/O.
template <class Scalar>
std::vector<Scalar> parameters_to_host(const std::vector<Parameter<Scalar>>& parameters) {
  std::vector<Scalar> values;
  for (const auto& p : parameters) {
    const auto host = tensor::to_host<Scalar>(p.value);
    values.insert(values.end(), host.begin(), host.end());
  }
  return values;
}

}  // namespace kpipe::model
