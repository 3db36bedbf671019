// debug.dump_steps writes each rank's stage-boundary tensors of the chosen
// steps and microbatches to activations-rank<R>.h5 (docs/formats.md,
// "Activation dumps"): the datasets must be exactly those, the output of a
// stage must be its forward pass of the dumped input (step 0: the initial
// weights), and what one rank sent must be what the next one received.
#include <mpi.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"

using namespace kpipe;

namespace {

// One directory for every rank: named after rank 0's process id.
std::string shared_directory() {
  long pid = static_cast<long>(::getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const auto directory = std::filesystem::temp_directory_path() / fmt::format("kpipe-dump-test-{}", pid);
  if (comm::rank_of(comm::world()) == 0) std::filesystem::create_directories(directory);
  MPI_Barrier(MPI_COMM_WORLD);
  return directory.string();
}

std::vector<float> dataset(const std::string& file, int step, int mb, int stage, const std::string& what) {
  return io::hdf5::File::open(file)
      .open_group(fmt::format("step{}", step))
      .open_group(fmt::format("mb{}", mb))
      .open_group(fmt::format("stage{}", stage))
      .open_dataset(what)
      .read<float>();
}

}  // namespace

TEST_CASE("activation dumps hold the chosen steps' boundary tensors, equal to the stage outputs", "[runtime]") {
  const std::string directory = shared_directory();
  const config::RunConfig config = config::run_config(config::parse_deck(
      fmt::format("model.input_dim = 12\nmodel.hidden = [16, 16, 16]\nmodel.output_dim = 5\n"
                  "train.global_batch = 32\ntrain.microbatch_size = 4\ntrain.steps = 3\n"
                  "pipeline.stages = 2\npipeline.schedule = \"1f1b\"\nruntime.watchdog_seconds = 60\n"
                  "debug.dump_steps = [0, 2]\ndebug.dump_microbatches = [1, 6]\ndebug.dump_path = \"{}\"\n",
                  directory),
      "test.toml"));
  const int rank = comm::rank_of(comm::world());
  std::string file;
  {
    runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
    CHECK(pipeline.activation_dump() != nullptr);
    if (pipeline.activation_dump() != nullptr) file = pipeline.activation_dump()->file_name();
    for (int step = 0; step < 3; ++step) pipeline.run_step(step);
  }
  CHECK(file == runtime::dump_file_name(config.debug, rank));
  const int stage = rank;  // p = 2, v = 1, d = 1

  const auto root = io::hdf5::File::open(file);
  CHECK(root.string_attribute("format") == "kpipe activation dump");
  CHECK(root.int_attribute("pipeline_rank") == rank);
  CHECK(root.names() == std::vector<std::string>{"step0", "step2"});
  CHECK(root.open_group("step0").names() == std::vector<std::string>{"mb1", "mb6"});
  const std::vector<std::string> expected =
      stage == 0 ? std::vector<std::string>{"input", "output", "output_grad"}
                 : std::vector<std::string>{"input", "input_grad", "output", "output_grad"};
  CHECK(root.open_group("step2").open_group("mb6").open_group(fmt::format("stage{}", stage)).names() == expected);
  const auto output_set =
      root.open_group("step0").open_group("mb1").open_group(fmt::format("stage{}", stage)).open_dataset("output");
  CHECK(output_set.shape() == std::vector<std::uint64_t>{4, stage == 0 ? 16u : 5u});

  // The stage's forward pass of the dumped input, with the initial weights of step 0.
  const model::TrainerSpec spec = model::TrainerSpec::from_config(config);
  tensor::ExecContext exec;
  model::Stage<float> reference(spec.model, spec.stages.at(stage), spec.stage, exec);
  for (const int mb : {1, 6}) {
    const auto input = dataset(file, 0, mb, stage, "input");
    const auto X = tensor::zero_matrix<float>("test::input", 4, reference.input_dim());
    tensor::from_host<float>(input, X);
    const auto Y = tensor::zero_matrix<float>("test::output", 4, reference.output_dim());
    reference.forward_no_grad(X, Y);
    CHECK(tensor::to_host<float>(Y) == dataset(file, 0, mb, stage, "output"));  // bitwise
  }

  // What rank 0 sent is what rank 1 received, both ways.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    const std::string first = runtime::dump_file_name(config.debug, 0);
    for (const int step : {0, 2}) {
      CHECK(dataset(first, step, 6, 0, "output") == dataset(file, step, 6, 1, "input"));
      CHECK(dataset(first, step, 6, 0, "output_grad") == dataset(file, step, 6, 1, "input_grad"));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(directory);
}

TEST_CASE("an activation dump never writes through a link planted at its name", "[runtime]") {
  const std::string directory = shared_directory();
  const int rank = comm::rank_of(comm::world());
  const config::RunConfig config = config::run_config(config::parse_deck(
      fmt::format("model.input_dim = 12\nmodel.hidden = [16, 16, 16]\nmodel.output_dim = 5\n"
                  "train.global_batch = 32\ntrain.microbatch_size = 4\npipeline.stages = 2\n"
                  "runtime.watchdog_seconds = 60\ndebug.dump_steps = [0]\ndebug.dump_path = \"{}\"\n",
                  directory),
      "test.toml"));
  // Every rank's dump name is a link to a file of someone else's.
  const auto victim = std::filesystem::path(directory) / fmt::format("precious-{}.txt", rank);
  std::ofstream(victim) << "not kpipe's";
  std::filesystem::create_symlink(victim, runtime::dump_file_name(config.debug, rank));
  CHECK_THROWS_WITH((runtime::Pipeline<float>(config, MPI_COMM_WORLD, runtime::Mode::train)),
                    Catch::Contains("is a symbolic link; kpipe never writes through a link"));
  std::ifstream in(victim);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "not kpipe's");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(directory);
}
