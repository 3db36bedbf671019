#pragma once
// lower() one rank at a time, for generate_lowered().

#include <cstdint>
#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule::detail {

// The lowered list of `rank`, whose compute actions are `compute`; p, v of `shape`.
std::vector<Action> lower_rank(const Schedule& shape, int rank, const std::vector<Action>& compute, bool training,
                               std::vector<std::int32_t>* origins);

}  // namespace kpipe::schedule::detail
