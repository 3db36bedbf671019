#include "kpipe/runtime/execution/gradient_sync.hpp"

#include "kpipe/comm/collectives.hpp"
#include "kpipe/model/training/optimizer.hpp"

namespace kpipe::runtime {

namespace {

// Data-parallel sums: tensors of at least 64 KiB are summed in place, smaller
// ones packed into buckets of at most 16 MiB (one MPI call each).
constexpr std::size_t gradient_bucket_bytes = 16u << 20;
constexpr std::size_t gradient_in_place_bytes = 64u << 10;
// The tied matrix's two ends swap their gradient in pieces of this size.
constexpr std::size_t tied_piece_bytes = 4u << 20;

// The squared norms of `parameters`' gradients as of the whole parameters: a
// shard's is summed over its tensor group in rank order (the same sum on
// every tensor rank); a parameter every tensor rank holds whole counts once.
template <class Scalar>
std::vector<double> whole_parameter_norms(comm::Communicator tensor,
                                          const std::vector<model::Parameter<Scalar>>& parameters,
                                          std::vector<double> norms) {
  const int ranks = comm::size_of(tensor);
  if (ranks == 1) return norms;
  const std::vector<double> all = comm::all_gather(tensor, norms);
  for (std::size_t i = 0; i < norms.size(); ++i) {
    if (parameters[i].shard.full()) continue;
    norms[i] = 0.0;
    for (int r = 0; r < ranks; ++r) norms[i] += all[r * norms.size() + i];
  }
  return norms;
}

// The ends of a tied matrix among this rank's parameters: none, one, or both.
template <class Scalar>
std::vector<model::Parameter<Scalar>> tied_ends(const std::vector<std::unique_ptr<model::Stage<Scalar>>>& chunks) {
  std::vector<model::Parameter<Scalar>> tied;
  for (auto& p : model::parameters_of(chunks)) {
    if (p.tie != model::Parameter<Scalar>::Tie::none) tied.push_back(std::move(p));
  }
  return tied;
}

}  // namespace

template <class Scalar>
GradientSync<Scalar>::GradientSync(const comm::ProcessGrid& grid, const schedule::Schedule& schedule,
                                   const std::vector<std::unique_ptr<model::Stage<Scalar>>>& chunks,
                                   bool stage_through_host, const comm::Watchdog& watchdog, tensor::ExecContext& exec)
    : grid_(grid),
      schedule_(schedule),
      chunks_(chunks),
      reducer_(grid.data(), gradient_bucket_bytes, gradient_in_place_bytes, stage_through_host, watchdog),
      tied_(tied_ends(chunks)),
      tied_group_(grid.pipeline(), tied_.size() == 1 ? 0 : -1, grid.pipeline_rank()),
      exec_(exec) {
  if (!tied_group_.empty()) {
    tied_sum_ =
        std::make_unique<comm::PairSum<Scalar>>(tied_group_.get(), tied_piece_bytes, stage_through_host, watchdog);
  }
  for (const auto& chunk : chunks_) started_.emplace_back(static_cast<std::size_t>(chunk->layers().count), false);
}

template <class Scalar>
void GradientSync<Scalar>::start(int chunk, int layer) {
  if (grid_.replicas() == 1) return;
  std::vector<typename comm::GradientReducer<Scalar>::Flat> grads;
  for (const auto& p : chunks_[chunk]->layer_parameters(layer)) grads.push_back(comm::flat<Scalar>(p.grad));
  reducer_.start(grads);
  started_[chunk][layer] = true;
}

template <class Scalar>
void GradientSync<Scalar>::progress() {
  reducer_.progress();
}

template <class Scalar>
void GradientSync<Scalar>::reduce() {
  if (grid_.replicas() > 1) {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      for (std::size_t layer = 0; layer < started_[c].size(); ++layer) {
        if (!started_[c][layer]) start(static_cast<int>(c), static_cast<int>(layer));
        started_[c][layer] = false;
      }
    }
    reducer_.finish();
  }
  // After the replicas' sums, as the sequential reference adds the two ends.
  if (model::sum_tied_gradients(exec_, tied_)) tied_sum_->sum(comm::flat<Scalar>(tied_.front().grad));
}

template <class Scalar>
double GradientSync<Scalar>::global_norm() {
  return global_norm(comm::all_gather_varying(grid_.pipeline(), squared_norms(), norm_counts()));
}

template <class Scalar>
std::vector<double> GradientSync<Scalar>::squared_norms() {
  std::vector<double> norms;
  for (const auto& chunk : chunks_) {
    const auto parameters = chunk->parameters();
    const auto own =
        whole_parameter_norms(grid_.tensor(), parameters, model::gradient_squared_norms(exec_, parameters));
    norms.insert(norms.end(), own.begin(), own.end());
  }
  return norms;
}

template <class Scalar>
const std::vector<int>& GradientSync<Scalar>::norm_counts() {
  if (rank_norm_counts_.empty()) {
    std::vector<int> counts;  // per chunk: how many norms
    for (const auto& chunk : chunks_) counts.push_back(static_cast<int>(chunk->parameters().size()));
    chunk_norm_counts_ = comm::all_gather(grid_.pipeline(), counts);
    rank_norm_counts_.assign(static_cast<std::size_t>(schedule_.p), 0);
    for (int r = 0; r < schedule_.p; ++r) {
      for (int c = 0; c < schedule_.v; ++c) rank_norm_counts_[r] += chunk_norm_counts_[r * schedule_.v + c];
    }
  }
  return rank_norm_counts_;
}

template <class Scalar>
double GradientSync<Scalar>::global_norm(const std::vector<double>& by_rank) const {
  const int v = schedule_.v;
  std::vector<std::size_t> rank_offsets(rank_norm_counts_.size(), 0);
  for (std::size_t r = 1; r < rank_offsets.size(); ++r)
    rank_offsets[r] = rank_offsets[r - 1] + rank_norm_counts_[r - 1];
  // Add the rank-major (rank, chunk) segments in model-stage order.
  std::vector<double> ordered;
  ordered.reserve(by_rank.size());
  for (int s = 0; s < schedule_.p * v; ++s) {
    const schedule::StagePlace place = schedule_.placement.place(s);
    std::size_t offset = rank_offsets[place.rank];
    for (int c = 0; c < place.chunk; ++c) offset += chunk_norm_counts_[place.rank * v + c];
    const auto first = by_rank.begin() + static_cast<std::ptrdiff_t>(offset);
    ordered.insert(ordered.end(), first, first + chunk_norm_counts_[place.rank * v + place.chunk]);
  }
  return model::global_norm(ordered);
}

template class GradientSync<float>;
template class GradientSync<double>;

}  // namespace kpipe::runtime
