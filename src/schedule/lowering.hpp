#pragma once
// lower() one rank at a time, for generate_lowered(): the lowering passes
// (stage boundaries: messages and LOSS; step actions) run over one rank.

#include <cstdint>
#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule::detail {

// The lowered list of `rank`, whose compute actions are `compute`; p, v and placement of `shape`.
std::vector<Action> lower_rank(const Schedule& shape, int rank, const std::vector<Action>& compute, bool training,
                               std::vector<std::int32_t>* origins);

}  // namespace kpipe::schedule::detail
