#include "kpipe/model/kv_cache.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"

namespace kpipe::model {

KvBlockTable::KvBlockTable(int blocks, int block_tokens) : blocks_(blocks), block_tokens_(block_tokens) {
  if (blocks < 1 || block_tokens < 1) {
    throw input_error(
        fmt::format("a KV cache of {} blocks of {} tokens is empty; both must be at least 1", blocks, block_tokens));
  }
  for (int b = 0; b < blocks; ++b) free_.insert(free_.end(), b);
}

int KvBlockTable::blocks_to_extend(int sequence, int length) const {
  const int needed = (length + block_tokens_ - 1) / block_tokens_;
  return std::max(0, needed - static_cast<int>(blocks_of(sequence).size()));
}

void KvBlockTable::extend(int sequence, int length) {
  if (sequence < 0) throw input_error(fmt::format("KV cache sequence ids are non-negative, not {}", sequence));
  const int more = blocks_to_extend(sequence, length);
  if (more > free_blocks()) {
    throw runtime_error(fmt::format(
        "the KV cache cannot extend sequence {} to {} tokens: that takes {} more blocks of {} tokens, and {} of {} "
        "are free; check blocks_to_extend first, or release a sequence",
        sequence, length, more, block_tokens_, free_blocks(), blocks_));
  }
  Reserved& reserved = sequences_[sequence];
  for (int b = 0; b < more; ++b) {
    reserved.blocks.push_back(*free_.begin());
    free_.erase(free_.begin());
  }
  reserved.length = std::max(reserved.length, length);
}

void KvBlockTable::release(int sequence) {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) return;
  free_.insert(it->second.blocks.begin(), it->second.blocks.end());
  sequences_.erase(it);
}

int KvBlockTable::length(int sequence) const {
  const auto it = sequences_.find(sequence);
  return it == sequences_.end() ? 0 : it->second.length;
}

int KvBlockTable::slot(int sequence, int position) const {
  if (position < 0 || position >= length(sequence)) {
    throw runtime_error(
        fmt::format("position {} of sequence {} has no KV cache slot: {} tokens are reserved; "
                    "extend the sequence first",
                    position, sequence, length(sequence)));
  }
  return blocks_of(sequence)[static_cast<std::size_t>(position / block_tokens_)] * block_tokens_ +
         position % block_tokens_;
}

const std::vector<int>& KvBlockTable::blocks_of(int sequence) const {
  static const std::vector<int> none;
  const auto it = sequences_.find(sequence);
  return it == sequences_.end() ? none : it->second.blocks;
}

template <class Scalar>
KvCache<Scalar>::KvCache(const std::vector<int>& layers, int blocks, int block_tokens, int dim)
    : blocks_(blocks), block_tokens_(block_tokens), dim_(dim) {
  const int rows = blocks * block_tokens;
  for (const int layer : layers) {
    // Every row is written by attention before it is read.
    const auto prefix = fmt::format("kpipe::model::kv_cache.layer{}", layer);
    layers_.emplace(layer, Pools{tensor::uninitialized_matrix<Scalar>(prefix + ".keys", rows, dim),
                                 tensor::uninitialized_matrix<Scalar>(prefix + ".values", rows, dim)});
  }
}

template <class Scalar>
std::size_t KvCache<Scalar>::bytes_per_block(int attention_layers, int dim, int block_tokens) {
  return 2 * static_cast<std::size_t>(attention_layers) * static_cast<std::size_t>(block_tokens) *
         static_cast<std::size_t>(dim) * sizeof(Scalar);
}

template <class Scalar>
std::size_t KvCache<Scalar>::bytes() const {
  return static_cast<std::size_t>(blocks_) * bytes_per_block(static_cast<int>(layers_.size()), dim_, block_tokens_);
}

template <class Scalar>
const typename KvCache<Scalar>::Pools& KvCache<Scalar>::pools(int layer) const {
  const auto it = layers_.find(layer);
  if (it == layers_.end()) {
    throw runtime_error(fmt::format("the KV cache holds no pools for layer {}: it was built for {} attention layers",
                                    layer, layers_.size()));
  }
  return it->second;
}

namespace {

// Throws unless the tokens of each sequence are consecutive, in increasing
// position, and reserved in `table`.
void check_tokens(const KvBlockTable& table, const TokenBatch& tokens) {
  if (tokens.position.size() != tokens.sequence.size()) {
    throw input_error(fmt::format("a token batch of {} sequence ids and {} positions; give one of each per token",
                                  tokens.sequence.size(), tokens.position.size()));
  }
  std::set<int> done;
  for (int i = 0; i < tokens.size(); ++i) {
    const int sequence = tokens.sequence[static_cast<std::size_t>(i)];
    const int position = tokens.position[static_cast<std::size_t>(i)];
    const bool continues = i > 0 && tokens.sequence[static_cast<std::size_t>(i - 1)] == sequence;
    if (!continues && !done.insert(sequence).second) {
      throw input_error(
          fmt::format("token {} of the batch returns to sequence {}; a sequence's tokens must be "
                      "consecutive",
                      i, sequence));
    }
    if (continues && position <= tokens.position[static_cast<std::size_t>(i - 1)]) {
      throw input_error(
          fmt::format("token {} of the batch is position {} of sequence {}, not after the one "
                      "before; a sequence's positions must increase",
                      i, position, sequence));
    }
    if (position < 0 || position >= table.length(sequence)) {
      throw runtime_error(
          fmt::format("token {} of the batch, position {} of sequence {}, has no KV cache slot: {} "
                      "tokens are reserved; extend the sequence first",
                      i, position, sequence, table.length(sequence)));
    }
  }
}

// A device copy of `values` (row-major, of the given extents), queued on
// `space`. The host vector may go right after: a copy from pageable memory
// returns once the source is staged (CUDA), and host backends copy at once.
template <class View, class... Extents>
View to_device(const tensor::ExecutionSpace& space, const char* label, const std::vector<int>& values,
               Extents... extents) {
  using Host =
      Kokkos::View<typename View::data_type, typename View::array_layout, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  const typename View::non_const_type device(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                                             extents...);
  Kokkos::deep_copy(space, device, Host(values.data(), extents...));
  return device;
}

}  // namespace

template <class Scalar>
CachedBatch<Scalar>::CachedBatch(KvCache<Scalar>& cache, const KvBlockTable& table, const TokenBatch& tokens,
                                 const tensor::ExecContext& exec)
    : cache_(cache) {
  if (table.block_tokens() != cache.block_tokens() || table.blocks() > cache.blocks()) {
    throw input_error(fmt::format("a block table of {} blocks of {} tokens does not fit a KV cache of {} blocks of {}",
                                  table.blocks(), table.block_tokens(), cache.blocks(), cache.block_tokens()));
  }
  check_tokens(table, tokens);
  const int n = tokens.size();
  std::vector<int> slot, row;
  std::vector<int> sequences;  // in order of first appearance: their rows of the block table
  for (int i = 0; i < n; ++i) {
    const int sequence = tokens.sequence[static_cast<std::size_t>(i)];
    if (sequences.empty() || sequences.back() != sequence) sequences.push_back(sequence);
    slot.push_back(table.slot(sequence, tokens.position[static_cast<std::size_t>(i)]));
    row.push_back(static_cast<int>(sequences.size()) - 1);
  }
  std::size_t widest = 1;
  for (const int sequence : sequences) widest = std::max(widest, table.blocks_of(sequence).size());
  std::vector<int> blocks(sequences.size() * widest, -1);  // -1: past the sequence's end, never read
  for (std::size_t r = 0; r < sequences.size(); ++r) {
    const auto& own = table.blocks_of(sequences[r]);
    std::copy(own.begin(), own.end(), blocks.begin() + static_cast<std::ptrdiff_t>(r * widest));
  }
  using Indices = kernels::PagedTokens::Indices;
  const auto& space = exec.space();
  paged_.slot = to_device<Indices>(space, "kpipe::model::cached_batch.slot", slot, n);
  paged_.position = to_device<Indices>(space, "kpipe::model::cached_batch.position", tokens.position, n);
  paged_.sequence = to_device<Indices>(space, "kpipe::model::cached_batch.sequence", row, n);
  paged_.blocks = to_device<kernels::PagedTokens::Table>(space, "kpipe::model::cached_batch.blocks", blocks,
                                                         static_cast<int>(sequences.size()), static_cast<int>(widest));
  paged_.block_tokens = table.block_tokens();
}

template class KvCache<float>;
template class KvCache<double>;
template class CachedBatch<float>;
template class CachedBatch<double>;

}  // namespace kpipe::model
