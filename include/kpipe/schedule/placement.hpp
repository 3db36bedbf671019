#pragma once
// Stage placement (DESIGN.md §2): which model stage each (pipeline rank,
// chunk) holds. The model is cut into p·v model stages; activations flow from
// stage s to s+1, gradients from s+1 to s. Every consumer of a schedule (the
// lowering, validator, simulator, renderers and the executor) asks the
// schedule's placement, never a formula of its own.
//
//   looped(p, v)  Megatron's virtual pipeline: chunk c of rank r is stage c·p + r
//                 (v = 1 is the plain pipeline)
//   v_shape(p)    ZB-V: v = 2, rank r holds stages r and 2p-1-r, so the first
//                 and the last stage are on rank 0 and stages p-1, p share rank p-1

#include <cstddef>
#include <vector>

namespace kpipe::schedule {

struct StagePlace {
  int rank;
  int chunk;
};

// A table both ways, so that lookups in hot loops are one load.
class Placement {
 public:
  Placement() = default;  // p = v = 1
  static Placement looped(int p, int v);
  static Placement v_shape(int p);

  int p() const { return p_; }
  int v() const { return v_; }
  int stage_count() const { return p_ * v_; }
  // The model stage held by (rank, chunk).
  int stage(int rank, int chunk) const { return stages_[static_cast<std::size_t>(rank) * v_ + chunk]; }
  // Where model stage `stage` lives.
  StagePlace place(int stage) const { return places_[static_cast<std::size_t>(stage)]; }
  // Where the stage after (before) the one of (rank, chunk) lives; precondition: it is not the last (first).
  StagePlace next(int rank, int chunk) const { return place(stage(rank, chunk) + 1); }
  StagePlace previous(int rank, int chunk) const { return place(stage(rank, chunk) - 1); }
  // Whether `rank` holds both the first and the last model stage (p = 1, or ZB-V's rank 0).
  bool holds_first_and_last(int rank) const { return place(0).rank == rank && place(stage_count() - 1).rank == rank; }

 private:
  Placement(int p, int v, std::vector<int> stages);

  int p_ = 1;
  int v_ = 1;
  std::vector<int> stages_{0};              // per rank·v + chunk
  std::vector<StagePlace> places_{{0, 0}};  // per model stage
};

}  // namespace kpipe::schedule
