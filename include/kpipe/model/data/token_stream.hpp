#pragma once
// Sequences of a language model from one split of a token stream held in
// host memory (runtime::make_data_source loads it from text, HDF5 or the
// synthetic chain). A sample is T = context tokens: its inputs are the ids of
// tokens [start, start + T) as exact Scalar values, its T labels the ids of
// [start + 1, start + T], the next token at every position.
//
// Packed documents (separator >= 0): the stream holds documents each closed
// by the separator token, and the label of a position holding a separator is
// kernels::ignored_label: no loss is taken across a boundary.
//
// random_windows (training): the sequence at (step, position) starts at
//   offset random_bits(key(data.seed, step), position) mod (N - T), uniform
//   in [0, N - T - 1]: a pure function of (step, position), the same on every
//   rank and for any split into microbatches or replicas.
// windows (validation, inference): the stream cut into W = (N - 1) / T
//   non-overlapping windows; position k of step s is window (s·B + k) mod W,
//   and samples() = W, so an evaluation pass reads each window once.
//
// Rows are gathered into host buffers and copied to the device; the buffers
// are reused, so steps after the first allocate nothing.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/model/data/data_source.hpp"
#include "kpipe/model/training/loss.hpp"
#include "kpipe/tensor/exec_context.hpp"

namespace kpipe::model {

enum class TokenSampling { random_windows, windows };

struct TokenStreamSpec {
  TokenSampling sampling = TokenSampling::random_windows;
  std::uint64_t seed = 0;  // data.seed
  int context = 0;         // T
  int global_batch = 1;    // B
  int separator = -1;      // packed documents' closing token; -1: none
};

template <class Scalar>
class TokenStreamSource final : public DataSource<Scalar> {
 public:
  // `tokens` must hold at least T + 1 ids (callers check with the data's name
  // in the message; here it is a runtime error). `exec` must outlive the source.
  TokenStreamSource(std::shared_ptr<const std::vector<std::int32_t>> tokens, const TokenStreamSpec& spec,
                    tensor::ExecContext& exec);

  // X: rows x T token ids.
  void fill_inputs(std::int64_t step, std::int64_t first, const tensor::Matrix<Scalar>& X) const override;
  // targets.labels: rows·T ids, label[r·T + t] = the token after input (r, t).
  void fill_targets(std::int64_t step, std::int64_t first, const Targets<Scalar>& targets) const override;
  // The separators among the inputs of those positions.
  std::int64_t ignored_predictions(std::int64_t step, std::int64_t first, std::int64_t count) const override;
  // W = (N - 1) / T: sequences in one pass over the stream.
  std::int64_t samples() const override { return windows(); }

  // Offset of the first input token of the sequence at (step, position).
  std::int64_t start(std::int64_t step, std::int64_t position) const;
  std::int64_t windows() const { return (static_cast<std::int64_t>(tokens_->size()) - 1) / spec_.context; }
  const std::vector<std::int32_t>& tokens() const { return *tokens_; }

 private:
  // Copies `count` sequences of T tokens from offset `shift` (0 inputs, 1 labels) into `out`.
  template <class T>
  void gather(std::int64_t step, std::int64_t first, std::int64_t count, int shift, std::vector<T>& out) const;

  std::shared_ptr<const std::vector<std::int32_t>> tokens_;
  TokenStreamSpec spec_;
  tensor::ExecContext& exec_;
  // Host staging, reused by every microbatch.
  mutable std::vector<Scalar> staged_inputs_;
  mutable std::vector<int> staged_labels_;
};

}  // namespace kpipe::model
