#include "kpipe/runtime/execution/step_ledger.hpp"

#include <algorithm>

#include "kpipe/runtime/execution/pipeline.hpp"

namespace kpipe::runtime {

namespace {
constexpr int world_term_count = 3;  // counted loss, signal, last compute end
}  // namespace

StepLedger::StepLedger(const comm::ProcessGrid& grid, const schedule::Schedule& schedule, bool barrier)
    : grid_(grid), schedule_(schedule), barrier_(barrier) {}

void StepLedger::add(int step, double step_start, double seconds, StepResult result, int signal) {
  Gathering g;
  std::vector<double> terms = bubble_terms(schedule_, grid_.pipeline_rank(), result.timings, seconds);
  const double counted_loss = counts_loss(grid_) ? result.loss : 0.0;
  std::vector<double> mine = {counted_loss, static_cast<double>(signal), terms[2]};
  g.pipeline = std::make_unique<comm::PendingGather>(
      grid_.pipeline(), std::move(terms), std::vector<int>(static_cast<std::size_t>(schedule_.p), bubble_term_count));
  g.world = std::make_unique<comm::PendingGather>(
      grid_.world(), std::move(mine),
      std::vector<int>(static_cast<std::size_t>(comm::size_of(grid_.world())), world_term_count));
  g.outcome.step = step;
  g.outcome.step_start = step_start;
  g.outcome.seconds = seconds;
  g.outcome.result = std::move(result);
  gathering_.push_back(std::move(g));
}

std::optional<StepOutcome> StepLedger::next() {
  // Without a barrier the newest outcome waits a step: its slowest rank may still be computing it.
  const std::size_t lag = barrier_ ? 0 : 1;
  if (gathering_.size() <= lag) return std::nullopt;
  StepOutcome outcome = complete(gathering_.front());
  gathering_.pop_front();
  return outcome;
}

std::vector<StepOutcome> StepLedger::flush() {
  std::vector<StepOutcome> outcomes;
  for (; !gathering_.empty(); gathering_.pop_front()) outcomes.push_back(complete(gathering_.front()));
  return outcomes;
}

StepOutcome StepLedger::complete(Gathering& g) const {
  StepOutcome outcome = std::move(g.outcome);
  outcome.bubble = combine_bubble_terms(schedule_.p, g.pipeline->result(), barrier_);
  const std::vector<double>& all = g.world->result();
  for (std::size_t r = 0; r < all.size(); r += world_term_count) {
    outcome.loss += all[r];
    outcome.signal = std::max(outcome.signal, static_cast<int>(all[r + 1]));
    outcome.compute_end = std::max(outcome.compute_end, all[r + 2]);
  }
  return outcome;
}

}  // namespace kpipe::runtime
