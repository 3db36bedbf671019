#include "kpipe/schedule/placement.hpp"

#include <utility>

namespace kpipe::schedule {

Placement::Placement(int p, int v, std::vector<int> stages)
    : p_(p), v_(v), stages_(std::move(stages)), places_(stages_.size(), StagePlace{0, 0}) {
  for (int r = 0; r < p; ++r) {
    for (int c = 0; c < v; ++c) places_[static_cast<std::size_t>(stage(r, c))] = {r, c};
  }
}

Placement Placement::looped(int p, int v) {
  std::vector<int> stages(static_cast<std::size_t>(p) * v);
  for (int r = 0; r < p; ++r) {
    for (int c = 0; c < v; ++c) stages[static_cast<std::size_t>(r) * v + c] = c * p + r;
  }
  return {p, v, std::move(stages)};
}

Placement Placement::v_shape(int p) {
  std::vector<int> stages(2 * static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    stages[2 * static_cast<std::size_t>(r)] = r;
    stages[2 * static_cast<std::size_t>(r) + 1] = 2 * p - 1 - r;
  }
  return {p, 2, std::move(stages)};
}

}  // namespace kpipe::schedule
