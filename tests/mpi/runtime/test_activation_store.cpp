// pipeline.activation_store = "hdf5" moves each microbatch's stash to a
// per-rank file between its F and its B: the weights must stay bitwise those
// of the in-memory run (and so of the sequential reference), with and without
// recomputation, while the stash a stage keeps resident drops to what the
// microbatches in their backward need. The files are gone afterwards.
#include <mpi.h>

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "catch.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"

using namespace kpipe;

namespace {

constexpr int steps = 3;

config::RunConfig config_for(const std::string& schedule, const std::string& recompute, const std::string& store) {
  const std::string text = fmt::format(
      "model.input_dim = 12\nmodel.hidden = [16, 16, 16]\nmodel.output_dim = 5\n"
      "train.global_batch = 32\ntrain.microbatch_size = 4\ntrain.steps = {}\ntrain.grad_clip = 0.05\n"
      "pipeline.stages = 2\npipeline.schedule = \"{}\"\npipeline.recompute = \"{}\"\n"
      "pipeline.activation_store = \"{}\"\nruntime.watchdog_seconds = 60\n",
      steps, schedule, recompute, store);
  return config::run_config(config::parse_deck(text, "test.toml"));
}

struct Outcome {
  std::vector<float> weights;
  std::size_t peak_stashed_bytes = 0;
  int peak_stashed_microbatches = 0;
  std::string file;  // the activation store's file, empty in memory
  runtime::ActivationTraffic traffic;
};

Outcome train(const config::RunConfig& config) {
  runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
  for (int step = 0; step < steps; ++step) pipeline.run_step(step);
  Outcome outcome;
  outcome.weights = model::parameters_to_host(pipeline.parameters());
  for (int c = 0; c < pipeline.chunk_count(); ++c) {
    outcome.peak_stashed_bytes += pipeline.chunk(c).peak_stashed_bytes();
    outcome.peak_stashed_microbatches += pipeline.chunk(c).peak_stashed_microbatches();
  }
  if (const auto* store = pipeline.activation_store()) {
    outcome.file = store->file_name();
    outcome.traffic = store->traffic();
    CHECK(std::filesystem::exists(outcome.file));
    // In a directory of the rank's own that nobody else may enter.
    const auto own = std::filesystem::status(std::filesystem::path(outcome.file).parent_path()).permissions();
    CHECK(own == std::filesystem::perms::owner_all);
  }
  return outcome;
}

}  // namespace

TEST_CASE("the hdf5 activation store trains bitwise like memory, with less resident stash", "[runtime]") {
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    for (const std::string recompute : {"none", "full"}) {
      INFO(fmt::format("{} recompute={}", schedule, recompute));
      const Outcome memory = train(config_for(schedule, recompute, "memory"));
      const Outcome hdf5 = train(config_for(schedule, recompute, "hdf5"));

      CHECK(!hdf5.weights.empty());
      CHECK(hdf5.weights == memory.weights);  // bitwise: float ==
      // Resident: only the microbatch in its backward, so lower wherever more than one waits.
      CHECK(hdf5.peak_stashed_bytes <= memory.peak_stashed_bytes);
      if (memory.peak_stashed_microbatches > 1) CHECK(hdf5.peak_stashed_bytes < memory.peak_stashed_bytes);
      UNSCOPED_INFO(fmt::format("peak resident stash {} B in memory, {} B with hdf5", memory.peak_stashed_bytes,
                                hdf5.peak_stashed_bytes));
      CHECK(memory.file.empty());
      CHECK(!hdf5.file.empty());
      CHECK(!std::filesystem::exists(hdf5.file));  // removed with the pipeline, and its directory
      CHECK(!std::filesystem::exists(std::filesystem::path(hdf5.file).parent_path()));
      CHECK(hdf5.traffic.bytes_written > 0);
      CHECK(hdf5.traffic.bytes_read == hdf5.traffic.bytes_written);
      CHECK(hdf5.traffic.tensors_read == hdf5.traffic.tensors_written);

      const auto config = config_for(schedule, recompute, "hdf5");
      tensor::ExecContext exec;
      model::SequentialTrainer<float> reference(model::TrainerSpec::from_config(config), exec);
      for (int step = 0; step < steps; ++step) reference.step();
      // This rank's parameters are a contiguous run of the reference's, in global layer order.
      const auto all = model::parameters_to_host(reference.parameters());
      bool found = false;
      for (std::size_t at = 0; !found && at + hdf5.weights.size() <= all.size(); ++at) {
        found = std::equal(hdf5.weights.begin(), hdf5.weights.end(), all.begin() + static_cast<std::ptrdiff_t>(at));
      }
      CHECK(found);
    }
  }
}

// compute.precision = bf16 and fp16: the Linear layers stash bfloat16 or
// float16 copies of their inputs, which the store keeps as HDF5 float types
// of their own and reads back bit for bit; the bytes it moves shrink by the
// halved Linear inputs.
TEST_CASE("the hdf5 activation store keeps bf16 and fp16 stashes bitwise", "[runtime][bf16][fp16]") {
  const Outcome fp32 = train(config_for("1f1b", "none", "hdf5"));
  for (const auto precision : {config::Precision::bf16, config::Precision::fp16}) {
    INFO(config::name_of(precision));
    const auto reduced = [&](config::RunConfig config) {
      config.compute.precision = precision;
      return config;
    };
    const Outcome memory = train(reduced(config_for("1f1b", "none", "memory")));
    const Outcome hdf5 = train(reduced(config_for("1f1b", "none", "hdf5")));
    CHECK(!hdf5.weights.empty());
    CHECK(hdf5.weights == memory.weights);  // bitwise: float ==
    CHECK(hdf5.weights != fp32.weights);
    CHECK(hdf5.traffic.bytes_read == hdf5.traffic.bytes_written);
    CHECK(hdf5.traffic.tensors_written == fp32.traffic.tensors_written);
    CHECK(hdf5.traffic.bytes_written < fp32.traffic.bytes_written);
  }
}

TEST_CASE("a missing activation_path fails on every rank before any step", "[runtime]") {
  auto config = config_for("1f1b", "none", "hdf5");
  config.pipeline.activation_path = "no/such/directory";
  CHECK_THROWS_WITH(runtime::Pipeline<float>(config, MPI_COMM_WORLD, runtime::Mode::train),
                    Catch::Matchers::Contains("pipeline.activation_path = \"no/such/directory\""));
}

TEST_CASE("the activation store writes only a file of its own, whatever is planted where it writes", "[runtime]") {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto directory =
      std::filesystem::temp_directory_path() / fmt::format("kpipe-store-planted-{}-{}", ::getpid(), rank);
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  const auto victim = directory / "precious.txt";
  std::ofstream(victim) << "not kpipe's";
  // Links at the names a store could be expected to take, this process's pid included.
  for (const std::string& name : {fmt::format("kpipe-activations-{}-rank{}.h5", ::getpid(), rank),
                                  std::string("activations.h5"), fmt::format("kpipe-activations-rank{}", rank)}) {
    std::filesystem::create_symlink(victim, directory / name);
  }
  const auto before = std::distance(std::filesystem::directory_iterator(directory), {});
  config::RunConfig config = config_for("1f1b", "none", "hdf5");
  config.pipeline.activation_path = directory.string();
  train(config);
  std::ifstream in(victim);
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "not kpipe's");
  CHECK(std::distance(std::filesystem::directory_iterator(directory), {}) == before);
  std::filesystem::remove_all(directory);
}
