#pragma once
// The stage-local paged KV cache of pipelined serving (DESIGN.md §5b). A
// KvBlockTable (host, deterministic) hands out fixed-size blocks of cache
// rows to sequences; every rank replays the same extend and release calls,
// so all stages agree on each token's slot without sending it. A KvCache
// holds, per attention layer of a stage, K and V pools of blocks ·
// block_tokens rows. A TokenBatch says which sequence and position each token
// of a serving microbatch is; CachedBatch is its device description, built
// once per microbatch, that the layers' infer() reads.

#include <cstddef>
#include <map>
#include <set>
#include <vector>

#include "kpipe/kernels/attention_cached.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/spec.hpp"
#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/tensor.hpp"

namespace kpipe::model {

// Which blocks each sequence holds. Sequences are any non-negative ids;
// blocks are handed out lowest-numbered first and come back on release.
class KvBlockTable {
 public:
  KvBlockTable(int blocks, int block_tokens);

  int blocks() const { return blocks_; }
  int block_tokens() const { return block_tokens_; }
  int free_blocks() const { return static_cast<int>(free_.size()); }

  // New blocks that extend(sequence, length) would take (0 if it holds them).
  int blocks_to_extend(int sequence, int length) const;
  // Reserves room for `length` tokens of `sequence` (never shrinks). Throws a
  // runtime error when fewer than blocks_to_extend blocks are free: callers
  // check first.
  void extend(int sequence, int length);
  // Frees every block of `sequence` (a no-op when it holds none).
  void release(int sequence);

  // Tokens reserved for `sequence`, 0 if unknown.
  int length(int sequence) const;
  // The cache row of `position` of `sequence`: block · block_tokens +
  // position % block_tokens. Throws unless the position is reserved.
  int slot(int sequence, int position) const;
  // Its blocks in position order (empty if unknown).
  const std::vector<int>& blocks_of(int sequence) const;

 private:
  struct Reserved {
    int length = 0;
    std::vector<int> blocks;
  };

  int blocks_;
  int block_tokens_;
  std::set<int> free_;
  std::map<int, Reserved> sequences_;
};

// Token i of a serving microbatch is position[i] of sequence[i]. Tokens of
// one sequence are consecutive and in increasing position; a microbatch may
// hold several sequences (decode tokens of many, prefill chunks of others).
struct TokenBatch {
  std::vector<int> sequence;
  std::vector<int> position;

  int size() const { return static_cast<int>(sequence.size()); }
};

// Global indices of the decoder blocks among `layers`: the attention layers
// whose K and V a stage holding them caches.
std::vector<int> decoder_blocks(const ModelSpec& model, LayerRange layers);

// The features of K (and of V) one token caches per attention layer of
// `model` on one of `tensor_ranks` ranks (its attention kind's kv_width); 0
// without attention.
int kv_width(const ModelSpec& model, int tensor_ranks = 1);

// Bytes of one KV block: 2 · attention_layers · block_tokens · width elements
// of `stored` (width: a rank's kv_width), so callers size the block count from a
// memory budget.
std::size_t kv_block_bytes(int attention_layers, int width, int block_tokens, tensor::DType stored);

// K and V pools ((blocks · block_tokens) x dim, default memory space) for
// each attention layer of a stage, found by the global index of the layer
// (the decoder block) that owns it. The pools hold `stored` elements: the
// stage's Scalar, or bfloat16 or float16 for a float stage under
// compute.precision = bf16, fp16 (kernels::stored_dtype), which holds twice
// the tokens in the same bytes.
template <class Scalar>
class KvCache {
 public:
  KvCache(const std::vector<int>& layers, int blocks, int block_tokens, int dim,
          tensor::DType stored = tensor::dtype_of<Scalar>());

  int blocks() const { return blocks_; }
  int block_tokens() const { return block_tokens_; }
  tensor::DType stored() const { return stored_; }
  std::size_t bytes() const;

  // The pools of global layer `layer`, matrices of stored(); throws unless
  // the cache has them.
  const tensor::Tensor& keys(int layer) const { return pools(layer).keys; }
  const tensor::Tensor& values(int layer) const { return pools(layer).values; }

  // Device space for a microbatch's index arrays (CachedBatch), at least
  // `ints` long: grown when a microbatch needs more than any before, so
  // serving allocates nothing once it has seen its largest microbatch. One
  // microbatch at a time: the next CachedBatch reuses it.
  Kokkos::View<int*, tensor::MemorySpace> index_space(std::size_t ints);

 private:
  struct Pools {
    tensor::Tensor keys;
    tensor::Tensor values;
  };
  const Pools& pools(int layer) const;

  int blocks_;
  int block_tokens_;
  int dim_;
  tensor::DType stored_;
  std::map<int, Pools> layers_;
  Kokkos::View<int*, tensor::MemorySpace> indices_;
};

// A microbatch as the layers see it in infer(): where each token's K and V go
// and what it attends to (kernels::PagedTokens), and the stage's cache.
template <class Scalar>
class CachedBatch {
 public:
  // Checks `tokens` against `table` (equal lengths, sequences consecutive
  // and increasing in position, every position reserved) and copies its
  // description to the device on `exec`'s instance. `cache` must outlive
  // the batch and be the one `table` hands out blocks of.
  CachedBatch(KvCache<Scalar>& cache, const KvBlockTable& table, const TokenBatch& tokens,
              const tensor::ExecContext& exec);

  int tokens() const { return paged_.tokens(); }
  const kernels::PagedTokens& paged() const { return paged_; }
  KvCache<Scalar>& cache() const { return cache_; }

 private:
  KvCache<Scalar>& cache_;
  kernels::PagedTokens paged_;
};

}  // namespace kpipe::model
