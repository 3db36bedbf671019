#pragma once
// The validator: a lowered schedule is accepted only if the executor can run
// it to the end with the right result.
//  * every action's fields are in range, messages go to the rank the
//    placement says, with the tag message_tag() gives;
//  * every (microbatch, chunk) has exactly one F and, when training, one BW or
//    one B and one W; no action appears twice; LOSS only on the last stage;
//  * every action's data dependencies exist and come first on its rank;
//  * weight gradients of each chunk accumulate in ascending microbatch order
//    (DESIGN.md §3); REDUCE_GRADS follows every compute action, OPTIMIZER_STEP
//    follows REDUCE_GRADS;
//  * every send has exactly one matching receive, and running the ranks with
//    non-blocking sends and blocking receives finishes (no cycle across ranks).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/schedule/schedule.hpp"

namespace kpipe::schedule {

struct Problem {
  int rank = -1;             // -1 when the problem is not tied to one rank
  std::int64_t action = -1;  // index in ranks[rank]; -1 when not tied to one action
  std::string message;       // one line: "rank 1, action 4 (BW mb=0 chunk=0): needs ..."
};

// Checks::per_rank is every rule but the last (the cross-rank run), for
// callers that simulate next: simulate() makes the same run and reports its
// problems the same way, so a large plan is traversed once, not twice.
enum class Checks { all, per_rank };

// The first problem found, or nullopt for a valid schedule.
std::optional<Problem> find_problem(const Schedule& schedule, Checks checks = Checks::all);
// Every rank's first problem, in rank order; where every rank's list passes
// its own checks, the one problem of the whole (a cycle across ranks, an
// unmatched send). Empty for a valid schedule.
std::vector<Problem> find_problems(const Schedule& schedule, Checks checks = Checks::all);

// The actions around each problem's, rank by rank, with those the problems
// name marked (">F3<"), for a person to see where a hand-written schedule
// goes wrong; "" when no problem names an action.
std::string problem_grid(const Schedule& schedule, const std::vector<Problem>& problems);

// Throws an input error "invalid <name> schedule: <problem>" for an invalid schedule.
void validate(const Schedule& schedule, Checks checks = Checks::all);

}  // namespace kpipe::schedule
