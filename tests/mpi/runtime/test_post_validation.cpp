// train.post_validation and train.on_nonfinite = "skip" against the
// sequential reference, bitwise: each rank updates with the previous step's
// clip factor before the global check completes, and rolls back and redoes
// the update when the factor changed or skips it when a loss or the gradient
// norm is NaN; the synchronous path skips the same step. The NaN comes from
// the data: a registered source (the extension point a project's data uses)
// that poisons one sample of one step, so both sides meet it.
#include <mpi.h>

#include <fmt/format.h>

#include <limits>
#include <string>
#include <vector>

#include "bitwise_parameters.hpp"
#include "catch.hpp"
#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/data/synthetic.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "schedule_chunks.hpp"

using namespace kpipe;

namespace {

constexpr int steps = 6;
constexpr int poisoned_step = 2;

// Synthetic samples, except that sample 0 of step `poisoned_step` starts with a NaN.
template <class Scalar>
class PoisonedStep final : public model::DataSource<Scalar> {
 public:
  PoisonedStep(const model::DataSpec& spec, tensor::ExecContext& exec) : synthetic_(spec, exec) {}
  void fill_inputs(std::int64_t step, std::int64_t first, const tensor::Matrix<Scalar>& X) const override {
    synthetic_.fill_inputs(step, first, X);
    if (step == poisoned_step && first == 0) {
      Kokkos::deep_copy(Kokkos::subview(X, 0, 0), std::numeric_limits<Scalar>::quiet_NaN());
    }
  }
  void fill_targets(std::int64_t step, std::int64_t first, const model::Targets<Scalar>& targets) const override {
    synthetic_.fill_targets(step, first, targets);
  }

 private:
  model::SyntheticData<Scalar> synthetic_;
};

void register_poisoned_source() {
  static const bool registered = [] {
    runtime::DataSourceKind kind{"poisoned_step", {}, {}, {}, {}};
    runtime::set_factories(kind, [](auto scalar, const runtime::DataBuild& build) {
      using Scalar = decltype(scalar);
      return std::unique_ptr<model::DataSource<Scalar>>(
          std::make_unique<PoisonedStep<Scalar>>(build.spec.data, build.exec));
    });
    runtime::register_data_source(std::move(kind));
    return true;
  }();
  (void)registered;
}

config::RunConfig config_for(int p, int d, const std::string& schedule, double grad_clip, bool post_validation,
                             const std::string& on_nonfinite) {
  const int v = test::chunks_for(schedule);
  const std::string text = fmt::format(
      "model.input_dim = 12\nmodel.hidden = [16, 16, 16, 16, 16, 16, 16]\nmodel.output_dim = 5\n"
      "train.global_batch = {}\ntrain.microbatch_size = 4\ntrain.steps = {}\ntrain.grad_clip = {}\n"
      "train.post_validation = {}\ntrain.on_nonfinite = \"{}\"\ndata.source = \"poisoned_step\"\n"
      "pipeline.stages = {}\npipeline.data_parallel = {}\npipeline.schedule = \"{}\"\npipeline.virtual_stages = {}\n"
      "runtime.watchdog_seconds = 60\n",
      32 * d, steps, grad_clip, post_validation, on_nonfinite, p, d, schedule, v);
  return config::run_config(config::parse_deck(text, "test.toml"));
}

using test::check_bitwise;

model::SequentialTrainer<float> reference_for(const config::RunConfig& config, tensor::ExecContext& exec) {
  const auto spec = model::TrainerSpec::from_config(config);
  return model::SequentialTrainer<float>(spec, exec,
                                         runtime::make_data_source<float>(config.data, spec, io::Split::train, exec));
}

}  // namespace

TEST_CASE("post-validated and skipped updates are bitwise the sequential reference", "[runtime][post_validation]") {
  register_poisoned_source();
  const int size = comm::size_of(comm::world());
  for (const int p : {2, 4}) {
    for (const int d : {1, 2}) {
      if (p * d != size) continue;
      for (const std::string schedule : {"1f1b", "zb-h1", "zb-h2", "zb-v"}) {
        // Clipping at every step (the factor changes: every guess is wrong),
        // and never (factor 1: every guess is right).
        for (const double grad_clip : {0.05, 1e9}) {
          tensor::ExecContext exec;
          auto reference = reference_for(config_for(p, d, schedule, grad_clip, false, "skip"), exec);
          for (int step = 0; step < steps; ++step) reference.step();
          REQUIRE(reference.skipped_steps() == 1);
          for (const bool post_validation : {false, true}) {
            const config::RunConfig config = config_for(p, d, schedule, grad_clip, post_validation, "skip");
            runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
            int heads_run_again = 0;
            for (int step = 0; step < steps; ++step) heads_run_again += pipeline.run_step(step).head_ran_again;
            pipeline.settle();
            INFO(fmt::format("{} p={} d={} grad_clip={} post_validation={} stage {} replica {}", schedule, p, d,
                             grad_clip, post_validation, pipeline.grid().pipeline_rank(), pipeline.grid().replica()));
            check_bitwise(reference.parameters(), pipeline.parameters());
            CHECK(pipeline.update()->skipped() == 1);
            CHECK(pipeline.optimizer()->steps() == steps - 1);
            if (!post_validation || grad_clip > 1) {
              CHECK(pipeline.update()->redone() == 0);
              // Step 3 ran ahead of the skipped step 2's check and ran again.
              CHECK(heads_run_again == (post_validation ? 1 : 0));
            } else {
              // Every applied update guessed the last factor, which changed. Step 1 ran
              // ahead of the first wrong guess and ran again; later steps wait for the check.
              CHECK(pipeline.update()->redone() == steps - 1);
              CHECK(heads_run_again == 1);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("a NaN loss stops a post-validated run with its update rolled back", "[runtime][post_validation][np2][np4]") {
  register_poisoned_source();
  const int p = comm::size_of(comm::world());
  const config::RunConfig config = config_for(p, 1, "zb-h2", 0.05, true, "stop");
  runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
  std::string message;
  int failed_in = -1;
  for (int step = 0; step <= steps && failed_in < 0; ++step) {
    try {
      if (step < steps) {
        pipeline.run_step(step);
      } else {
        pipeline.settle();
      }
    } catch (const comm::AgreedError& e) {
      message = e.what();
      failed_in = step;
    }
  }
  // The poisoned step's check completes as the next step starts.
  CHECK(failed_in == poisoned_step + 1);
  CHECK_THAT(message, Catch::Contains(fmt::format("in step {}", poisoned_step)));
  tensor::ExecContext exec;
  auto reference = reference_for(config, exec);
  for (int step = 0; step < poisoned_step; ++step) reference.step();
  check_bitwise(reference.parameters(), pipeline.parameters());
  CHECK(pipeline.optimizer()->steps() == poisoned_step);
}
