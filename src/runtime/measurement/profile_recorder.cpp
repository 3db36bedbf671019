#include "kpipe/runtime/measurement/profile_recorder.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <map>
#include <utility>

#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/clock.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/version.hpp"
#include "kpipe/io/profile.hpp"
#include "kpipe/runtime/measurement/timeline.hpp"
#include "kpipe/schedule/simulate.hpp"

namespace kpipe::runtime {

namespace {

using schedule::Action;
using schedule::ActionKind;

// The columns of a gathered row: step, index, kind, microbatch, chunk, stage, peer, tag, start, end, bytes.
constexpr std::size_t row_width = 11;
constexpr double smallest_cost = 1e-9;  // seconds: below any clock's resolution

void add_row(io::ActionTable& t, int rank, int step, int index, const Action& a, int stage, double start, double end,
             std::int64_t bytes) {
  t.rank.push_back(rank);
  t.step.push_back(step);
  t.index.push_back(index);
  t.kind.push_back(static_cast<std::int32_t>(a.kind));
  t.microbatch.push_back(a.microbatch);
  t.chunk.push_back(a.chunk);
  t.stage.push_back(stage);
  t.peer.push_back(a.peer);
  t.tag.push_back(a.tag);
  t.start.push_back(start);
  t.end.push_back(end);
  t.bytes.push_back(bytes);
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

}  // namespace

ProfileRecorder::ProfileRecorder(const runtime::Pipeline<float>& pipeline, std::string path)
    : pipeline_(pipeline), path_(std::move(path)) {
  // The file's layout (docs/formats.md) has one rank per stage and replica.
  if (enabled() && pipeline.grid().tensor_size() > 1) {
    throw input_error(
        fmt::format("--profile records p * d ranks and cannot hold a tensor-parallel run yet; drop --profile or set "
                    "pipeline.tensor_parallel = 1 (it is {})",
                    pipeline.grid().tensor_size()));
  }
  for (const auto& p : pipeline.parameters())
    gradient_bytes_ += static_cast<std::int64_t>(p.grad.span() * sizeof(float));
}

void ProfileRecorder::add_step(int step, double step_start, const runtime::StepResult& result) {
  if (!enabled()) return;
  const schedule::Schedule& s = pipeline_.schedule();
  const int rank = pipeline_.grid().pipeline_rank();
  const auto& actions = s.ranks[rank];
  const double rows_per_microbatch = pipeline_.spec().microbatch_size;
  const bool summed = pipeline_.grid().replicas() > 1;
  for (const runtime::ActionTiming& t : result.timings) {
    const Action& a = actions[t.index];
    double start = t.start;
    std::int64_t bytes = 0;
    if (schedule::is_communication(a.kind)) {
      const auto& chunk = pipeline_.chunk(a.chunk);
      const int columns = schedule::towards_next_stage(a.kind) ? chunk.output_dim() : chunk.input_dim();
      bytes = static_cast<std::int64_t>(rows_per_microbatch) * columns *
              static_cast<std::int64_t>(tensor::size_of(chunk.boundary_dtype()));
    } else if (a.kind == ActionKind::reduce_grads && summed) {
      // The row spans the data-parallel sum, from the first gradients handed over.
      start = result.reduction_start;
      bytes = gradient_bytes_;
    }
    const int stage = a.chunk >= 0 ? s.placement.stage(rank, a.chunk) : -1;
    rows_.insert(rows_.end(), {static_cast<double>(step), static_cast<double>(t.index),
                               static_cast<double>(static_cast<int>(a.kind)), static_cast<double>(a.microbatch),
                               static_cast<double>(a.chunk), static_cast<double>(stage), static_cast<double>(a.peer),
                               static_cast<double>(a.tag), start, t.end, static_cast<double>(bytes)});
  }
  step_start_.push_back(step_start);
  timings_.push_back(result.timings);
}

void ProfileRecorder::write(const std::string& device, const std::string& deck,
                            const std::vector<std::string>& overrides) const {
  if (!enabled()) return;
  const auto& grid = pipeline_.grid();
  const schedule::Schedule& s = pipeline_.schedule();
  // The first step warms caches and pools; the costs of the others predict the run.
  const std::size_t warm_up = timings_.size() > 1 ? 1 : 0;
  const std::vector<std::vector<runtime::ActionTiming>> steady(timings_.begin() + warm_up, timings_.end());
  const schedule::CostModel costs = runtime::measured_costs(s, grid.pipeline_rank(), steady, grid.pipeline());
  std::vector<int> counts;
  const std::vector<double> rows = comm::gather_varying_to_root(grid.world(), rows_, &counts);
  const std::vector<double> step_starts = comm::gather_to_root(grid.world(), step_start_);
  comm::collectively(grid.world(), pipeline_.watchdog(), "writing the --profile file", [&] {
    if (comm::rank_of(grid.world()) != 0) return;
    io::Profile profile;
    io::ProfileInfo& info = profile.info;
    info.software_version = version_string;
    info.date = utc_timestamp();
    info.backend = Kokkos::DefaultExecutionSpace::name();
    info.device = device;
    info.schedule = s.name;
    info.deck = deck;
    info.overrides = joined(overrides);
    info.p = s.p;
    info.v = s.v;
    info.m = s.m;
    info.d = grid.replicas();
    info.steps = static_cast<std::int64_t>(step_start_.size());
    info.microbatch_size = pipeline_.spec().microbatch_size;
    info.scalar_bytes = sizeof(float);
    for (int k = 0; k < schedule::action_kind_count; ++k) {
      profile.kind_names.emplace_back(schedule::name(static_cast<ActionKind>(k)));
    }

    std::map<std::pair<int, int>, std::int64_t> bytes;  // (pipeline rank, index) → bytes, for the prediction
    std::size_t at = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      for (int i = 0; i < counts[r] / static_cast<int>(row_width); ++i, at += row_width) {
        const double* row = &rows[at];
        Action a;
        a.kind = static_cast<ActionKind>(static_cast<int>(row[2]));
        a.microbatch = static_cast<std::int32_t>(row[3]);
        a.chunk = static_cast<std::int8_t>(row[4]);
        a.peer = static_cast<std::int16_t>(row[6]);
        a.tag = static_cast<std::int32_t>(row[7]);
        const auto b = static_cast<std::int64_t>(row[10]);
        add_row(profile.measured, static_cast<int>(r), static_cast<int>(row[0]), static_cast<int>(row[1]), a,
                static_cast<int>(row[5]), row[8], row[9], b);
        bytes[{static_cast<int>(r) % s.p, static_cast<int>(row[1])}] = b;
      }
    }
    profile.step_start = step_starts;
    for (const auto& stage : costs.stages) {
      profile.stage_costs.insert(profile.stage_costs.end(),
                                 {stage.forward, stage.backward_input, stage.backward_weight});
    }
    // A schedule run unchecked (pipeline.validate_schedule = false) may be one the simulator rejects.
    if (pipeline_.plan().validate && !steady.empty()) {
      // The simulator takes positive costs only; what a run never executes
      // (B and W of a forward-only schedule) measured 0 and is never simulated.
      schedule::CostModel positive = costs;
      for (auto& stage : positive.stages) {
        for (double* cost : {&stage.forward, &stage.backward_input, &stage.backward_weight}) {
          *cost = std::max(*cost, smallest_cost);
        }
      }
      const schedule::SimulationResult predicted = schedule::simulate(s, positive);
      for (int r = 0; r < s.p; ++r) {
        for (std::size_t i = 0; i < s.ranks[r].size(); ++i) {
          const Action& a = s.ranks[r][i];
          const auto found = bytes.find({r, static_cast<int>(i)});
          add_row(profile.predicted, r, -1, static_cast<int>(i), a, a.chunk >= 0 ? s.placement.stage(r, a.chunk) : -1,
                  predicted.start(r, i), predicted.end[r][i], found == bytes.end() ? 0 : found->second);
        }
      }
    }
    require_writable(path_, "--profile");  // again: the path may have changed during the run
    const std::string temporary = create_temporary(path_, "--profile");
    try {
      io::write_profile(temporary, profile);
    } catch (...) {
      ::unlink(temporary.c_str());
      throw;
    }
    commit_output(temporary, path_, "--profile", true);
  });
}

}  // namespace kpipe::runtime
