#pragma once
// The schedule IR (DESIGN.md §2): for every pipeline rank an ordered list of
// actions, plus the stage placement every consumer agrees on.
//
// Placement: the model is cut into p·v model stages; rank r holds chunks
// c = 0..v-1, and chunk c of rank r is model stage s = c·p + r (Megatron's
// virtual pipeline; v = 1 is the plain pipeline). Activations flow from stage
// s to s+1, gradients from s+1 to s.

#include <cstddef>
#include <string>
#include <vector>

#include "kpipe/schedule/action.hpp"

namespace kpipe::schedule {

// What to generate: a schedule name (see schedule_names()) and its shape.
struct ScheduleSpec {
  std::string name = "1f1b";
  int p = 1;  // pipeline ranks
  int v = 1;  // model chunks per rank
  int m = 1;  // microbatches per step
};

// Which model stage each rank's chunk holds (looped: chunk c of rank r is stage c·p + r).
struct StagePlace {
  int rank;
  int chunk;
};
class Placement {
 public:
  static Placement looped(int p, int v) { return Placement(p, v); }
  int stage(int rank, int chunk) const { return chunk * p_ + rank; }
  StagePlace place(int stage) const { return {stage % p_, stage / p_}; }

 private:
  Placement(int p, int v) : p_(p), v_(v) {}
  int p_ = 1;
  int v_ = 1;
};

struct Schedule {
  std::string name;
  int p = 1;
  int v = 1;
  int m = 1;
  std::vector<std::vector<Action>> ranks;  // ranks[r]: rank r's actions in execution order
  Placement placement = Placement::looped(1, 1);

  std::size_t action_count() const;
  // True when any rank runs a backward pass; a forward-only schedule is for inference.
  bool training() const;
};

constexpr int model_stage(int rank, int chunk, int p) { return chunk * p + rank; }
constexpr int stage_rank(int stage, int p) { return stage % p; }
constexpr int stage_chunk(int stage, int p) { return stage / p; }

// Where model stage s ± 1 of (rank, chunk) lives: the neighbours in the
// placement, without the division of stage_rank() (they sit in hot loops).
constexpr StagePlace next_stage(int rank, int chunk, int p) {
  return rank + 1 < p ? StagePlace{rank + 1, chunk} : StagePlace{0, chunk + 1};
}
constexpr StagePlace previous_stage(int rank, int chunk, int p) {
  return rank > 0 ? StagePlace{rank - 1, chunk} : StagePlace{p - 1, chunk - 1};
}

// Message tags are unique per (microbatch, sending chunk, direction), so the
// executor can post every receive early and match it unambiguously:
// tag = 2·(microbatch·v + sending chunk) + direction.
enum class Direction { activation = 0, gradient = 1 };
constexpr int message_tag(int microbatch, int sending_chunk, int v, Direction direction) {
  return 2 * (microbatch * v + sending_chunk) + static_cast<int>(direction);
}

}  // namespace kpipe::schedule
