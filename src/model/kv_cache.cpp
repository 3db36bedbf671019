#include "kpipe/model/kv_cache.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/core/error.hpp"
#include "kpipe/model/layer_kind.hpp"

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

int kv_width(const ModelSpec& model, int tensor_ranks) {
  for (const LayerSpec& layer : model.layers()) {
    if (layer.kind->attention_layers > 0) return layer.kind->kv_width(model, tensor_ranks);
  }
  return 0;
}

std::size_t kv_block_bytes(int attention_layers, int width, int block_tokens, tensor::DType stored) {
  return 2 * static_cast<std::size_t>(attention_layers) * static_cast<std::size_t>(block_tokens) *
         static_cast<std::size_t>(width) * tensor::size_of(stored);
}

template <class Scalar>
KvCache<Scalar>::KvCache(const std::vector<int>& layers, int blocks, int block_tokens, int dim, tensor::DType stored)
    : blocks_(blocks), block_tokens_(block_tokens), dim_(dim), stored_(stored) {
  const int rows = blocks * block_tokens;
  for (const int layer : layers) {
    // Every row is written by attention before it is read.
    const auto prefix = fmt::format("kpipe::model::kv_cache.layer{}", layer);
    tensor::with_element_type(stored, [&](auto element) {
      using Stored = decltype(element);
      layers_.emplace(layer, Pools{tensor::uninitialized_matrix<Stored>(prefix + ".keys", rows, dim),
                                   tensor::uninitialized_matrix<Stored>(prefix + ".values", rows, dim)});
    });
  }
}

template <class Scalar>
std::size_t KvCache<Scalar>::bytes() const {
  return static_cast<std::size_t>(blocks_) *
         kv_block_bytes(static_cast<int>(layers_.size()), dim_, block_tokens_, stored_);
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

}  // namespace

std::vector<int> decoder_blocks(const ModelSpec& model, LayerRange layers) {
  const auto specs = model.layers();
  std::vector<int> blocks;
  for (int index = layers.first; index < layers.end(); ++index) {
    if (specs.at(static_cast<std::size_t>(index)).kind->attention_layers > 0) blocks.push_back(index);
  }
  return blocks;
}

template <class Scalar>
Kokkos::View<int*, tensor::MemorySpace> KvCache<Scalar>::index_space(std::size_t ints) {
  if (indices_.extent(0) < ints) {
    indices_ = Kokkos::View<int*, tensor::MemorySpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "kpipe::model::kv_cache.indices"), ints);
  }
  return indices_;
}

template <class Scalar>
CachedBatch<Scalar>::CachedBatch(KvCache<Scalar>& cache, const KvBlockTable& table, const TokenBatch& tokens,
                                 const tensor::ExecContext& exec)
    : cache_(cache) {
  if (table.block_tokens() != cache.block_tokens() || table.blocks() > cache.blocks()) {
    throw input_error(fmt::format("a block table of {} blocks of {} tokens does not fit a KV cache of {} blocks of {}",
                                  table.blocks(), table.block_tokens(), cache.blocks(), cache.block_tokens()));
  }
  check_tokens(table, tokens);
  // One host array, one copy: the slots, positions and block-table rows of
  // the n tokens, then each sequence's blocks padded with -1 (past its end,
  // never read) to the widest.
  const auto count = static_cast<std::size_t>(tokens.size());
  std::vector<int> host(3 * count);
  std::vector<int> sequences;  // in order of first appearance: their rows of the block table
  for (std::size_t i = 0; i < count; ++i) {
    const int sequence = tokens.sequence[i];
    if (sequences.empty() || sequences.back() != sequence) sequences.push_back(sequence);
    host[i] = table.slot(sequence, tokens.position[i]);
    host[count + i] = tokens.position[i];
    host[2 * count + i] = static_cast<int>(sequences.size()) - 1;
  }
  std::size_t widest = 1;
  for (const int sequence : sequences) widest = std::max(widest, table.blocks_of(sequence).size());
  host.resize(3 * count + sequences.size() * widest, -1);
  for (std::size_t r = 0; r < sequences.size(); ++r) {
    const auto& own = table.blocks_of(sequences[r]);
    std::copy(own.begin(), own.end(), host.begin() + static_cast<std::ptrdiff_t>(3 * count + r * widest));
  }
  const Kokkos::View<int*, tensor::MemorySpace> device = cache.index_space(host.size());
  using Host = Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  const auto used = Kokkos::subview(device, std::make_pair(std::size_t{0}, host.size()));
  Kokkos::deep_copy(exec.space(), used, Host(host.data(), host.size()));
  // Kokkos::deep_copy from pageable host memory returns once the source is
  // staged, so `host` may go when this constructor returns.
  const auto part = [&](std::size_t first) { return Kokkos::subview(device, std::make_pair(first, first + count)); };
  paged_.slot = part(0);
  paged_.position = part(count);
  paged_.sequence = part(2 * count);
  paged_.blocks = kernels::PagedTokens::Table(device.data() + 3 * count, sequences.size(), widest);
  paged_.block_tokens = table.block_tokens();
}

template class KvCache<float>;
template class KvCache<double>;
template class CachedBatch<float>;
template class CachedBatch<double>;

}  // namespace kpipe::model
