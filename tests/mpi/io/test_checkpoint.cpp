// Checkpoints (DESIGN.md §5): N steps, a checkpoint, a restart and N more
// steps give bitwise the weights of 2N uninterrupted steps, for 1f1b and
// interleaved; a checkpoint written on p = 2 restarts on p = 4 and on d = 2;
// one written with t = 2 tensor ranks holds global tensors and restarts on
// t = 1 and on t = 2; bf16 and fp32 checkpoints restart in either precision;
// a distributed optimizer's holds the whole state and restarts on any d.
#include <mpi.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <utility>

#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/model/tensor_parallel.hpp"
#include "kpipe/runtime/execution/grid_collectives.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/persistence/checkpoint.hpp"
#include "kpipe/runtime/persistence/checkpoint_ranks.hpp"

using namespace kpipe;

namespace {

// Every restart test trains N steps, checkpoints, and trains N more; CUDA's
// headers name a type `half`, hence no shorter name.
constexpr int steps_before_restart = 3;  // N

// A tiny MLP, or a tiny transformer whose vocabulary t does not divide: it
// is padded to 15 tokens at t = 1 and to 20 at t = 2; "tied": its LM head
// tied to the token table (one matrix in the checkpoint); "llama": the Llama
// family, 2 key/value groups of 2 query heads; "llama-kv1": one group of 4,
// whose projection every rank of t = 2 holds whole.
std::string model_keys(const std::string& kind) {
  if (kind == "llama" || kind == "llama-kv1") {
    return fmt::format(
        "model.kind = \"llama\"\nmodel.vocab = 13\nmodel.vocab_divisible_by = 5\nmodel.context = 8\n"
        "model.dim = 16\nmodel.heads = 4\nmodel.kv_heads = {}\nmodel.ffn_dim = 24\nmodel.layers = 2\n",
        kind == "llama" ? 2 : 1);
  }
  if (kind == "tied") return model_keys("transformer") + "model.head_bias = false\nmodel.tie_embeddings = true\n";
  if (kind == "transformer") {
    return "model.kind = \"transformer\"\nmodel.vocab = 13\nmodel.vocab_divisible_by = 5\nmodel.context = 8\n"
           "model.dim = 16\nmodel.heads = 4\nmodel.layers = 2\nmodel.mlp_ratio = 2\n";
  }
  return "model.input_dim = 12\nmodel.hidden = [16, 16, 16, 16, 16, 16, 16]\nmodel.output_dim = 5\n";
}

// The same data (B = 64) on every layout: d replicas of 64 / d samples each.
config::RunConfig config_for(int p, int d, const std::string& schedule, const std::string& directory, int t = 1,
                             const std::string& kind = "mlp") {
  const int v = schedule == "interleaved" ? 2 : 1;
  const std::string text =
      model_keys(kind) + fmt::format(
                             "train.global_batch = 64\ntrain.microbatch_size = 4\ntrain.steps = {}\n"
                             "pipeline.stages = {}\npipeline.data_parallel = {}\npipeline.schedule = "
                             "\"{}\"\npipeline.virtual_stages = {}\n"
                             "pipeline.tensor_parallel = {}\nruntime.watchdog_seconds = 60\ncheckpoint.every = {}\n"
                             "checkpoint.path = \"{}\"\ncheckpoint.keep = 2\n",
                             2 * steps_before_restart, p, d, schedule, v, t, steps_before_restart, directory);
  return config::run_config(config::parse_deck(text, "test.toml"));
}

using Weights = std::map<std::string, std::vector<float>>;

// Parameters by name, a padded vocabulary's padding (t-dependent) cut off.
Weights by_name(const std::vector<model::Parameter<float>>& parameters) {
  Weights values;
  for (const auto& p : parameters) {
    values[p.name] = tensor::to_host<float>(model::without_padding<float>(tensor::ExecutionSpace(), p.value, p.shard));
  }
  return values;
}

Weights train(const config::RunConfig& config, MPI_Comm comm, int first, int last, const std::string& restart = "",
              std::string* written = nullptr) {
  runtime::Pipeline<float> pipeline(config, comm, runtime::Mode::train);
  if (!restart.empty()) CHECK(runtime::load_checkpoint(pipeline, restart) == first);
  for (int step = first; step < last; ++step) pipeline.run_step(step);
  if (written) *written = runtime::save_checkpoint(pipeline, config.checkpoint, {"deck = \"test\"\n"}, last);
  return by_name(pipeline.parameters());
}

// The parameters of this rank's chunks, tensor-parallel shards gathered
// whole, padding cut off.
Weights whole(const runtime::Pipeline<float>& pipeline) {
  tensor::ExecContext exec;
  runtime::GridCollectives collectives(pipeline.grid(), exec);
  Weights values;
  for (const auto& p : pipeline.parameters()) {
    const auto gathered = model::gather_shards<float>(exec, collectives, p.shard, p.value);
    values[p.name] = tensor::to_host<float>(model::without_padding<float>(exec.space(), gathered, p.shard));
  }
  return values;
}

// A fresh directory made by world rank 0, known to every rank.
std::string scratch_directory() {
  char name[256] = {};
  if (comm::rank_of(comm::world()) == 0) {
    std::string pattern = (std::filesystem::current_path() / "kpipe-test-checkpoint-XXXXXX").string();
    std::snprintf(name, sizeof name, "%s", ::mkdtemp(pattern.data()));
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  return name;
}

void remove_directory(const std::string& directory) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (comm::rank_of(comm::world()) == 0) std::filesystem::remove_all(directory);
}

void compare(const Weights& expected, const Weights& actual, double tolerance) {
  CHECK(!actual.empty());
  for (const auto& [name, values] : actual) {
    INFO(name);
    CHECK(expected.count(name) == 1);
    if (expected.count(name) != 1) continue;
    const auto& reference = expected.at(name);
    CHECK(values.size() == reference.size());
    if (tolerance == 0.0) {
      CHECK(values == reference);  // bitwise: float ==
      continue;
    }
    double worst = 0.0;
    for (std::size_t i = 0; i < std::min(values.size(), reference.size()); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(values[i]) - reference[i]));
    CHECK(worst <= tolerance);
  }
}

}  // namespace

TEST_CASE("restart continues bitwise like an uninterrupted run", "[checkpoint][np2]") {
  const std::string directory = scratch_directory();
  // packed and bf16: the restored weights reach the products through their
  // packed or bfloat16 copies.
  for (const std::string schedule : {"1f1b", "interleaved", "1f1b packed", "1f1b bf16", "interleaved tied"}) {
    INFO(schedule);
    const bool tied = schedule.find("tied") != std::string::npos;
    auto config = config_for(2, 1, schedule.substr(0, schedule.find(' ')), directory, 1, tied ? "tied" : "mlp");
    if (schedule.find("packed") != std::string::npos) config.compute.gemm = config::GemmKind::packed;
    if (schedule.find("bf16") != std::string::npos) config.compute.precision = config::Precision::bf16;
    const Weights uninterrupted = train(config, MPI_COMM_WORLD, 0, 2 * steps_before_restart);
    std::string file;
    train(config, MPI_COMM_WORLD, 0, steps_before_restart, "", &file);
    CHECK(file == io::checkpoint_file(directory, steps_before_restart));
    const Weights restarted = train(config, MPI_COMM_WORLD, steps_before_restart, 2 * steps_before_restart, file);
    compare(uninterrupted, restarted, 0.0);
  }
  // keep = 2: the third checkpoint removes the first.
  const auto config = config_for(2, 1, "1f1b", directory);
  for (const int steps : {1, 2, 4}) {
    std::string file;
    train(config, MPI_COMM_WORLD, 0, steps, "", &file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(std::filesystem::exists(io::checkpoint_file(directory, 4)));
  CHECK(std::filesystem::exists(io::checkpoint_file(directory, 3)));
  CHECK_FALSE(std::filesystem::exists(io::checkpoint_file(directory, 2)));
  CHECK_FALSE(std::filesystem::exists(io::checkpoint_file(directory, 1)));
  remove_directory(directory);
}

// compute.precision changes the arithmetic, not what is stored: checkpoints
// hold the float32 master weights and optimizer state, so a bf16 or fp16
// checkpoint loads into an fp32 run (and back, and one reduced precision into
// the other) with every master bit, and runs on; an fp16 run restarted from
// another precision's checkpoint starts its loss scale afresh.
TEST_CASE("bf16, fp16 and fp32 checkpoints restart in each other's precision", "[checkpoint][bf16][fp16][np2]") {
  const std::string directory = scratch_directory();
  using config::Precision;
  for (const auto& [from, to] :
       {std::pair{Precision::bf16, Precision::fp32}, std::pair{Precision::fp32, Precision::bf16},
        std::pair{Precision::fp16, Precision::fp32}, std::pair{Precision::fp32, Precision::fp16},
        std::pair{Precision::fp16, Precision::bf16}}) {
    INFO(config::name_of(from) << " to " << config::name_of(to));
    auto written_with = config_for(2, 1, "1f1b", directory);
    written_with.compute.precision = from;
    std::string file;
    const Weights saved = train(written_with, MPI_COMM_WORLD, 0, steps_before_restart, "", &file);
    auto restarted_with = written_with;
    restarted_with.compute.precision = to;
    const Weights restored = train(restarted_with, MPI_COMM_WORLD, steps_before_restart, steps_before_restart, file);
    compare(saved, restored, 0.0);
    const Weights continued =
        train(restarted_with, MPI_COMM_WORLD, steps_before_restart, 2 * steps_before_restart, file);
    for (const auto& [name, values] : continued) {
      INFO(name);
      CHECK(values != saved.at(name));
      for (const float value : values) CHECK(std::isfinite(value));
    }
  }
  remove_directory(directory);
}

TEST_CASE("checkpoint.keep removes only kpipe's own older checkpoints", "[checkpoint][np2]") {
  const std::string directory = scratch_directory();
  // Not kpipe's: a text file and an HDF5 file without kpipe's format, one of a later step.
  const std::string foreign_text = io::checkpoint_file(directory, 1000),
                    foreign_hdf5 = io::checkpoint_file(directory, 0);
  if (comm::rank_of(comm::world()) == 0) {
    std::ofstream(foreign_text) << "someone else's";
    io::hdf5::File::create(foreign_hdf5).close();
  }
  auto config = config_for(2, 1, "1f1b", directory);
  config.checkpoint.keep = 1;
  for (const int steps : {1, 2}) {
    std::string file;
    train(config, MPI_COMM_WORLD, 0, steps, "", &file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(std::filesystem::exists(io::checkpoint_file(directory, 2)));
  CHECK_FALSE(std::filesystem::exists(io::checkpoint_file(directory, 1)));
  CHECK(std::filesystem::exists(foreign_text));
  CHECK(std::filesystem::exists(foreign_hdf5));
  remove_directory(directory);
}

TEST_CASE("a p = 2 checkpoint restarts on p = 4 and on d = 2", "[checkpoint][np4]") {
  const std::string directory = scratch_directory();
  // Ranks 0 and 1 write the p = 2 checkpoint; ranks 2 and 3 wait.
  MPI_Comm pair = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, comm::rank_of(comm::world()) < 2 ? 0 : 1, comm::rank_of(comm::world()), &pair);
  std::string file = io::checkpoint_file(directory, steps_before_restart);
  Weights p2_uninterrupted;  // ranks 0 and 1: the p = 2, d = 1 run without a restart
  if (comm::rank_of(comm::world()) < 2) {
    train(config_for(2, 1, "1f1b", directory), pair, 0, steps_before_restart, "", &file);
    p2_uninterrupted = train(config_for(2, 1, "1f1b", directory), pair, 0, 2 * steps_before_restart);
  }
  MPI_Comm_free(&pair);
  MPI_Barrier(MPI_COMM_WORLD);

  SECTION("p = 4, the same accumulation order: bitwise") {
    const auto config = config_for(4, 1, "1f1b", directory);
    compare(train(config, MPI_COMM_WORLD, 0, 2 * steps_before_restart),
            train(config, MPI_COMM_WORLD, steps_before_restart, 2 * steps_before_restart, file), 0.0);
  }
  SECTION("p = 4 interleaved (v = 2)") {
    const auto config = config_for(4, 1, "interleaved", directory);
    compare(train(config, MPI_COMM_WORLD, 0, 2 * steps_before_restart),
            train(config, MPI_COMM_WORLD, steps_before_restart, 2 * steps_before_restart, file), 0.0);
  }
  SECTION("p = 2, d = 2: replicas sum partial gradients, so close, not bitwise") {
    const Weights restarted = train(config_for(2, 2, "1f1b", directory), MPI_COMM_WORLD, steps_before_restart,
                                    2 * steps_before_restart, file);
    // World rank = replica * p + pipeline rank: ranks 0 and 1 hold what they held at p = 2, d = 1.
    // 1e-6: the bound for a restart that changes the summation order.
    if (comm::rank_of(comm::world()) < 2) compare(p2_uninterrupted, restarted, 1e-6);
  }
  remove_directory(directory);
}

// train.distributed_optimizer: each replica keeps its rows of the optimizer
// state, and a checkpoint gathers them into the whole tensors an unsharded
// run writes. It restarts bitwise on d = 2, sharded or not, and on d = 1 just
// as the unsharded run's checkpoint does.
TEST_CASE("a distributed optimizer's checkpoint holds the whole state and restarts on any d", "[checkpoint][np4]") {
  const std::string sharded_directory = scratch_directory(), plain_directory = scratch_directory();
  auto sharded = config_for(2, 2, "1f1b", sharded_directory);
  sharded.optimizer.distributed = true;
  const auto plain = config_for(2, 2, "1f1b", plain_directory);
  const Weights uninterrupted = train(sharded, MPI_COMM_WORLD, 0, 2 * steps_before_restart);
  compare(train(plain, MPI_COMM_WORLD, 0, 2 * steps_before_restart), uninterrupted, 0.0);
  std::string sharded_file, plain_file;
  train(sharded, MPI_COMM_WORLD, 0, steps_before_restart, "", &sharded_file);
  train(plain, MPI_COMM_WORLD, 0, steps_before_restart, "", &plain_file);
  compare(uninterrupted, train(sharded, MPI_COMM_WORLD, steps_before_restart, 2 * steps_before_restart, sharded_file),
          0.0);
  compare(uninterrupted, train(plain, MPI_COMM_WORLD, steps_before_restart, 2 * steps_before_restart, sharded_file),
          0.0);
  compare(uninterrupted, train(sharded, MPI_COMM_WORLD, steps_before_restart, 2 * steps_before_restart, plain_file),
          0.0);
  // d = 1 on ranks 0 and 1: the same weights from either file.
  MPI_Comm pair = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, comm::rank_of(comm::world()) < 2 ? 0 : 1, comm::rank_of(comm::world()), &pair);
  if (comm::rank_of(comm::world()) < 2) {
    const auto single = config_for(2, 1, "1f1b", plain_directory);
    compare(train(single, pair, steps_before_restart, 2 * steps_before_restart, plain_file),
            train(single, pair, steps_before_restart, 2 * steps_before_restart, sharded_file), 0.0);
  }
  MPI_Comm_free(&pair);
  remove_directory(sharded_directory);
  remove_directory(plain_directory);
}

TEST_CASE("a t = 2 checkpoint holds global tensors: it restarts on t = 1 and on t = 2", "[checkpoint][np4]") {
  // The transformer's padded vocabulary: the checkpoint holds its 13 tokens.
  const std::string kind = GENERATE("mlp", "transformer", "tied", "llama", "llama-kv1");
  INFO(kind);
  const std::string directory = scratch_directory();
  // t = 2 (p = 2, d = 1): N steps, a checkpoint, N more steps.
  const auto t2 = config_for(2, 1, "1f1b", directory, 2, kind);
  std::string file;
  Weights saved, uninterrupted;
  {
    runtime::Pipeline<float> pipeline(t2, MPI_COMM_WORLD, runtime::Mode::train);
    for (int step = 0; step < steps_before_restart; ++step) pipeline.run_step(step);
    file = runtime::save_checkpoint(pipeline, t2.checkpoint, {"deck = \"test\"\n"}, steps_before_restart);
    saved = whole(pipeline);
    for (int step = steps_before_restart; step < 2 * steps_before_restart; ++step) pipeline.run_step(step);
    uninterrupted = whole(pipeline);
  }
  SECTION("t = 1 (p = 2, d = 2) reads the global tensors and continues within 1e-5") {
    runtime::Pipeline<float> pipeline(config_for(2, 2, "1f1b", directory, 1, kind), MPI_COMM_WORLD,
                                      runtime::Mode::train);
    CHECK(runtime::load_checkpoint(pipeline, file) == steps_before_restart);
    // World rank (replica · p + stage) · t + tensor rank: ranks 0 and 3 hold
    // stage 0 and stage 1 in both layouts.
    const bool same_stage = comm::rank_of(comm::world()) % 3 == 0;
    if (same_stage) compare(saved, by_name(pipeline.parameters()), 0.0);
    for (int step = steps_before_restart; step < 2 * steps_before_restart; ++step) pipeline.run_step(step);
    // The tensor group's partial sums and the replicas' add in other orders.
    if (same_stage) compare(uninterrupted, by_name(pipeline.parameters()), 1e-5);
  }
  SECTION("t = 2 slices them back and continues bitwise like the uninterrupted run") {
    runtime::Pipeline<float> pipeline(t2, MPI_COMM_WORLD, runtime::Mode::train);
    CHECK(runtime::load_checkpoint(pipeline, file) == steps_before_restart);
    for (int step = steps_before_restart; step < 2 * steps_before_restart; ++step) pipeline.run_step(step);
    compare(uninterrupted, whole(pipeline), 0.0);
  }
  remove_directory(directory);
}

TEST_CASE("a damaged checkpoint is refused on every rank", "[checkpoint][np2]") {
  const std::string directory = scratch_directory();
  const auto config = config_for(2, 1, "1f1b", directory);
  std::string file;
  train(config, MPI_COMM_WORLD, 0, 1, "", &file);
  const std::string flipped = directory + "/flipped.h5";
  if (comm::rank_of(comm::world()) == 0) {
    std::filesystem::copy_file(file, flipped);
    // Flip one byte near the end: inside the data of the last dataset written.
    const auto bytes = std::filesystem::file_size(flipped);
    std::FILE* f = std::fopen(flipped.c_str(), "r+b");
    std::fseek(f, static_cast<long>(bytes) - 64, SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, static_cast<long>(bytes) - 64, SEEK_SET);
    std::fputc(c ^ 0x10, f);
    std::fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
  try {
    runtime::load_checkpoint(pipeline, flipped);
    FAIL("a flipped byte went unnoticed");
  } catch (const Error& error) {
    CHECK(error.exit_code() == 2);
    CHECK_THAT(error.what(), Catch::Contains("is corrupt"));
  }
  remove_directory(directory);
}

// The reader takes a dataset through its scratch buffer in blocks of 4 MiB
// (the rehearsal's child, and what a rank only checksums): a tensor of 1,100
// rows of 1,024 floats spans two blocks, and its checksum, taken piece by
// piece, must be the writer's, taken in one go. A byte flipped in the second
// block is caught there too.
TEST_CASE("tensors larger than a read block restart whole, and a flip in their second block is caught",
          "[checkpoint]") {
  const std::string directory = scratch_directory();
  constexpr int rows = 1100, cols = 1024;
  constexpr float marker = 12345.678f;  // the flipped row's values, found in the file by their bytes
  const auto make = [&](const std::string& name, float offset) {
    tensor::Matrix<float> value(name, rows, cols);
    const auto host = Kokkos::create_mirror_view(value);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j)
        host(i, j) = i == 1090 ? marker : offset + 0.001f * static_cast<float>(i * cols + j);
    Kokkos::deep_copy(value, host);
    return io::NamedMatrix<float>{name, value};
  };
  const bool holder = comm::rank_of(comm::world()) == 0;
  std::vector<io::NamedMatrix<float>> weights, moments;
  if (holder) {
    weights.push_back(make("big", 0.0f));
    moments.push_back(make("big.moment", 7.0f));
  }
  io::CheckpointInfo info;
  info.step = 1;
  info.schedule = "test";
  const std::string file = io::write_checkpoint<float>(runtime::CheckpointRanks(comm::world(), "a checkpoint write"),
                                                       directory, info, weights, moments, 1, -1);
  const std::vector<io::ModelShape> model{{"big", rows, cols}};

  // Weights only: the holder loads big and checksums big.moment (share 0 of 1).
  std::vector<io::NamedMatrix<float>> loaded;
  if (holder) loaded.push_back({"big", tensor::Matrix<float>("loaded", rows, cols)});
  CHECK(io::read_checkpoint<float>(file, model, loaded, {}, 0, 1).step == 1);
  if (holder) CHECK(tensor::to_host<float>(loaded[0].value) == tensor::to_host<float>(weights[0].value));

  const std::string flipped = directory + "/flipped.h5";
  if (holder) {
    // The marker row of the later dataset (big.moment: written second) lies in its second block.
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string row(cols * sizeof(float), '\0');
    for (int j = 0; j < cols; ++j) std::memcpy(&row[j * sizeof(float)], &marker, sizeof(float));
    const auto first = bytes.find(row), second = bytes.find(row, first + row.size());
    REQUIRE(second != std::string::npos);
    bytes[second + 3] = static_cast<char>(bytes[second + 3] ^ 0x10);
    std::ofstream(flipped, std::ios::binary) << bytes;
  }
  // The holder reads both datasets: it loads big and, alone (share 0 of 1),
  // verifies the optimizer state it does not load.
  if (holder) {
    try {
      io::read_checkpoint<float>(flipped, model, loaded, {}, 0, 1);
      FAIL("a flipped byte in the second block went unnoticed");
    } catch (const Error& error) {
      CHECK(error.exit_code() == 2);
      CHECK_THAT(error.what(), Catch::Contains("is corrupt"));
    }
  }
  remove_directory(directory);
}
