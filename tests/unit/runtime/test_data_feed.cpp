// DataFeed: a rank that runs the first and the last model stage computes each
// microbatch's targets from the inputs it handed to F, once, and draws them
// afresh otherwise.
#include <memory>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "kpipe/runtime/data/data_feed.hpp"

using namespace kpipe;

namespace {

// Records which DataSource call each request took, and the inputs given.
class RecordingSource final : public model::DataSource<float> {
 public:
  struct Calls {
    int inputs = 0, targets = 0, targets_of_inputs = 0;
    const float* held = nullptr;
  };
  explicit RecordingSource(Calls& calls) : calls_(calls) {}
  void fill_inputs(std::int64_t, std::int64_t, const tensor::Matrix<float>&) const override { ++calls_.inputs; }
  void fill_targets(std::int64_t, std::int64_t, const model::Targets<float>&) const override { ++calls_.targets; }
  void fill_targets_of_inputs(std::int64_t, std::int64_t, const tensor::ConstMatrix<float>& inputs,
                              const model::Targets<float>&) const override {
    ++calls_.targets_of_inputs;
    calls_.held = inputs.data();
  }

 private:
  Calls& calls_;
};

model::TrainerSpec trainer_spec() {
  model::TrainerSpec spec;
  spec.model.input_dim = 3;
  spec.model.output_dim = 2;
  spec.global_batch = 8;
  spec.microbatch_size = 2;
  return spec;
}

}  // namespace

TEST_CASE("a rank with the first and the last stage turns the inputs it handed out into targets", "[runtime]") {
  RecordingSource::Calls calls;
  runtime::DataFeed<float> feed(trainer_spec(), 0, std::make_unique<RecordingSource>(calls), true);
  const auto X0 = tensor::zero_matrix<float>("test::x0", 2, 3);
  const auto X1 = tensor::zero_matrix<float>("test::x1", 2, 3);
  feed.inputs(7, 0, X0);
  feed.inputs(7, 1, X1);
  CHECK(X0.use_count() == 2);  // held until its targets are taken
  feed.targets(7, 1);
  CHECK(calls.targets_of_inputs == 1);
  CHECK(calls.held == X1.data());
  feed.targets(7, 0);
  CHECK(calls.held == X0.data());
  CHECK(X0.use_count() == 1);
  CHECK(calls.targets == 0);
  // Taken once: a second request, another step's or one without inputs draws afresh.
  feed.targets(7, 0);
  feed.inputs(8, 2, X0);
  feed.targets(9, 2);
  feed.targets(8, 3);
  CHECK(calls.targets == 3);
  CHECK(calls.targets_of_inputs == 2);
}

TEST_CASE("a rank without both ends of the pipeline keeps no inputs", "[runtime]") {
  RecordingSource::Calls calls;
  runtime::DataFeed<float> feed(trainer_spec(), 0, std::make_unique<RecordingSource>(calls));
  const auto X = tensor::zero_matrix<float>("test::x", 2, 3);
  feed.inputs(7, 0, X);
  CHECK(X.use_count() == 1);
  feed.targets(7, 0);
  CHECK(calls.inputs == 1);
  CHECK(calls.targets == 1);
  CHECK(calls.targets_of_inputs == 0);
}
