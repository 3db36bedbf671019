// Pipelined training must give bitwise the weights of the sequential
// reference that accumulates in the same order (DESIGN.md §3), for every
// schedule (dualpipe-v's F&B's included), p in {2, 4}, d in {1, 2}, with and without recomputation (also
// with compute.gemm = packed, in bf16, and in fp16 with loss scaling); and the activations each rank stashes must
// peak where the simulator says. The same holds on an HDF5 dataset, whose
// shuffled epochs both draw from.
#include <mpi.h>

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bitwise_parameters.hpp"
#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/model/partition.hpp"
#include "kpipe/model/traffic.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"
#include "kpipe/runtime/data/dataset_source.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/tuning/traffic_report.hpp"
#include "kpipe/schedule/run_plan.hpp"
#include "kpipe/schedule/simulate.hpp"
#include "schedule_chunks.hpp"
#include "tiny_dataset.hpp"

using namespace kpipe;

namespace {

constexpr int steps = 5;

// A small model with enough layers for p · v = 8 model stages, m = 8
// microbatches per replica, and clipping tight enough to act every step.
config::RunConfig config_for(int p, int d, const std::string& schedule, const std::string& recompute,
                             const std::string& extra = "") {
  const int v = test::chunks_for(schedule);
  const std::string text = fmt::format(
      "model.input_dim = 12\nmodel.hidden = [16, 16, 16, 16, 16, 16, 16]\nmodel.output_dim = 5\n"
      "train.global_batch = {}\ntrain.microbatch_size = 4\ntrain.steps = {}\ntrain.grad_clip = 0.05\n"
      "pipeline.stages = {}\npipeline.data_parallel = {}\npipeline.schedule = \"{}\"\npipeline.virtual_stages = {}\n"
      "pipeline.recompute = \"{}\"\nruntime.watchdog_seconds = 60\n{}",
      32 * d, steps, p, d, schedule, v, recompute, extra);
  return config::run_config(config::parse_deck(text, "test.toml"));
}

using test::check_bitwise;

// `steps` pipelined steps of `config` against the sequential reference on the
// same data source, bitwise. The reference keeps every saved tensor:
// recomputation, full or selective, must change no bit.
void check_against_reference(const config::RunConfig& config) {
  runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
  for (int step = 0; step < steps; ++step) pipeline.run_step(step);
  tensor::ExecContext exec;
  auto spec = model::TrainerSpec::from_config(config);
  spec.stage.recompute = false;
  spec.stage.selective_recompute = false;
  model::SequentialTrainer<float> reference(
      spec, exec, runtime::make_data_source<float>(config.data, spec, io::Split::train, exec));
  for (int step = 0; step < steps; ++step) reference.step();
  INFO(fmt::format("stage {} replica {}", pipeline.grid().pipeline_rank(), pipeline.grid().replica()));
  check_bitwise(reference.parameters(), pipeline.parameters());
}

}  // namespace

TEST_CASE("pipelined training is bitwise the sequential reference", "[runtime]") {
  const int size = comm::size_of(comm::world());
  for (const int p : {2, 4}) {
    for (const int d : {1, 2}) {
      if (p * d != size) continue;
      // 1F1B and ZB-H1 also with pipeline.extra_warmup: forwards earlier on the
      // ranks before the last, each stage's microbatches still in ascending order.
      for (const auto& [schedule, keys] :
           std::vector<std::pair<std::string, std::string>>{{"gpipe", ""},
                                                            {"1f1b", ""},
                                                            {"1f1b", "pipeline.extra_warmup = 2\n"},
                                                            {"interleaved", ""},
                                                            {"zb-h1", ""},
                                                            {"zb-h1", "pipeline.extra_warmup = 1\n"},
                                                            {"zb-h2", ""},
                                                            {"zb-v", ""},
                                                            {"v-half", ""},
                                                            {"v-min", ""},
                                                            {"dualpipe-v", ""}}) {
        for (const std::string recompute : {"none", "full"}) {
          const config::RunConfig config = config_for(p, d, schedule, recompute, keys);
          runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
          const int rank = pipeline.grid().pipeline_rank();
          int peak_stashed = 0;
          for (int step = 0; step < steps; ++step) {
            peak_stashed = std::max(peak_stashed, pipeline.run_step(step).peak_stashed);
          }
          tensor::ExecContext exec;
          model::SequentialTrainer<float> reference(model::TrainerSpec::from_config(config), exec);
          for (int step = 0; step < steps; ++step) reference.step();

          INFO(fmt::format("{} {}p={} d={} recompute={} stage {} replica {}", schedule, keys, p, d, recompute, rank,
                           pipeline.grid().replica()));
          check_bitwise(reference.parameters(), pipeline.parameters());
          const auto simulated = schedule::simulate(pipeline.schedule(), pipeline.plan().costs);
          CHECK(peak_stashed == simulated.ranks[rank].peak_stashed);
        }
      }
    }
  }
}

// Replicas that each hold the whole model (p = 1, d = world) run their
// microbatches in lanes (schedule/lanes.hpp): three, then two, at once (one
// after the other on a Serial build), each layer's W in list order, the
// data-parallel sums overlapped with the last group's W. Bitwise the
// reference; the stash peaks at a group, as the memory estimate counts it.
// GPipe's list is not made of microbatch blocks: no lanes.
TEST_CASE("lanes of replicas holding the whole model are bitwise the sequential reference", "[runtime][lanes][np2]") {
  // At most two replicas, as above: the reference's sums are the replicas' bitwise up to two.
  const int d = comm::size_of(comm::world());
  for (const auto& [schedule, lanes] :
       std::vector<std::pair<std::string, int>>{{"1f1b", 3}, {"zb-h1", 2}, {"gpipe", 3}}) {
    const bool runs_lanes = schedule != "gpipe";
    std::vector<std::size_t> stashed;
    std::vector<std::int64_t> estimated;
    for (const int asked : {1, lanes}) {
      const config::RunConfig config = config_for(1, d, schedule, "none", fmt::format("pipeline.lanes = {}\n", asked));
      runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
      INFO(fmt::format("{} lanes = {} replica {}", schedule, asked, pipeline.grid().replica()));
      CHECK(pipeline.lanes() == (runs_lanes ? asked : 1));
      int peak_stashed = 0;
      for (int step = 0; step < steps; ++step) {
        const runtime::StepResult result = pipeline.run_step(step);
        peak_stashed = std::max(peak_stashed, result.peak_stashed);
        CHECK(result.timings.size() == pipeline.schedule().ranks[0].size());
      }
      CHECK(peak_stashed == (runs_lanes ? asked : pipeline.schedule().m));
      tensor::ExecContext exec;
      model::SequentialTrainer<float> reference(model::TrainerSpec::from_config(config), exec);
      for (int step = 0; step < steps; ++step) reference.step();
      check_bitwise(reference.parameters(), pipeline.parameters());
      stashed.push_back(pipeline.chunk(0).peak_stashed_bytes());
      estimated.push_back(pipeline.memory().activations);
    }
    INFO(schedule);
    if (runs_lanes) {
      CHECK(stashed[1] == stashed[0] * lanes);
      CHECK(estimated[1] == estimated[0] * lanes);
    }
  }
}

// At uneven costs and a message latency zb-v is planned by the V heuristic
// (a different order from the unit-cost plan, checked), which keeps each
// chunk's microbatches in ascending order: still bitwise.
TEST_CASE("zb-v planned at the deck's uneven costs is bitwise the sequential reference", "[runtime][np2][np4]") {
  const int p = comm::size_of(comm::world());
  const std::string costs =
      "sim.cost_forward = 2.0\nsim.cost_backward_input = 2.0\nsim.cost_backward_weight = 1.2\n"
      "sim.comm_latency = 0.3\n";
  const config::RunConfig config = config_for(p, 1, "zb-v", "none", costs);
  const config::RunConfig unit = config_for(p, 1, "zb-v", "none");
  CHECK(schedule::make_schedule(schedule::run_plan(config)).ranks !=
        schedule::make_schedule(schedule::run_plan(unit)).ranks);
  check_against_reference(config);
}

// Kernel choices that change how each Linear multiplies, not where: with
// compute.gemm = packed each rank repacks its weights after every update, as
// the reference does with the same shapes; compute.precision = bf16 rounds
// the activations between layers to bfloat16 wherever the stage boundaries
// fall, and a boundary travels in bfloat16 exactly, so it changes nothing.
// The GEMMs of a shape are deterministic either way, so bitwise equality
// holds as in float32.
TEST_CASE("pipelined training with packed weights or bf16 GEMMs is bitwise the sequential reference",
          "[runtime][packed][bf16]") {
  const int size = comm::size_of(comm::world());
  for (const std::string variant : {"packed", "bf16", "packed bf16"}) {
    const std::vector<std::string> schedules =
        variant == "bf16" ? std::vector<std::string>{"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v"}
                          : std::vector<std::string>{"1f1b", "zb-v"};
    for (const int p : {2, 4}) {
      const int d = size / p;
      if (p * d != size || d > 2) continue;
      for (const std::string& schedule : schedules) {
        for (const std::string recompute : {"none", "full"}) {
          config::RunConfig config = config_for(p, d, schedule, recompute);
          if (variant.find("packed") != std::string::npos) config.compute.gemm = config::GemmKind::packed;
          if (variant.find("bf16") != std::string::npos) config.compute.precision = config::Precision::bf16;
          INFO(fmt::format("{} {} p={} d={} recompute={}", variant, schedule, p, d, recompute));
          check_against_reference(config);
        }
      }
    }
  }
}

// compute.precision = bf16 and fp16 send every boundary in 2 bytes and keep
// the stash in 2 bytes: each rank sends half of fp32's bytes, which is what
// model::stage_traffic predicts (and kpipe plan prints), and stashes half of
// fp32's bytes at its peak (this MLP's layers keep no statistics), which is
// what the memory estimate's activations come to.
TEST_CASE("reduced-precision boundaries and stashes take half the bytes, as predicted", "[runtime][bf16][fp16]") {
  const int size = comm::size_of(comm::world());
  for (const int p : {2, 4}) {
    const int d = size / p;
    if (p * d != size || d > 2) continue;
    for (const std::string schedule : {"1f1b", "zb-h1"}) {
      std::vector<std::uint64_t> sent;
      std::vector<std::size_t> stashed;
      std::vector<std::int64_t> estimated;
      for (const auto precision : {config::Precision::fp32, config::Precision::bf16, config::Precision::fp16}) {
        config::RunConfig config = config_for(p, d, schedule, "none");
        config.compute.precision = precision;
        runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
        for (int step = 0; step < 2; ++step) pipeline.run_step(step);
        const int rank = pipeline.grid().pipeline_rank();
        const auto stages = model::stage_traffic(config, model::partition_layers(config));
        const model::StepTraffic predicted = runtime::predicted_traffic(stages, pipeline.schedule(), d)[rank];
        INFO(fmt::format("{} {} p={} d={} rank {}", config::name_of(precision), schedule, p, d, rank));
        CHECK(pipeline.transport().bytes_sent() == static_cast<std::uint64_t>(2 * predicted.pipeline.bytes));
        sent.push_back(pipeline.transport().bytes_sent());
        std::size_t peak = 0;
        for (int c = 0; c < pipeline.chunk_count(); ++c) peak += pipeline.chunk(c).peak_stashed_bytes();
        stashed.push_back(peak);
        estimated.push_back(pipeline.memory().activations);
      }
      INFO(fmt::format("{} p={} d={}", schedule, p, d));
      CHECK(sent[0] > 0);
      CHECK(sent[1] * 2 == sent[0]);
      CHECK(sent[2] * 2 == sent[0]);
      CHECK(stashed[1] * 2 == stashed[0]);
      CHECK(stashed[2] * 2 == stashed[0]);
      CHECK(estimated[1] * 2 == estimated[0]);
      CHECK(estimated[2] * 2 == estimated[0]);
    }
  }
}

// compute.precision = fp16 with dynamic loss scaling: the loss gradients
// carry the scale, each Linear rounds them to float16, and a step that
// overflows (on any rank) is skipped everywhere and halves the scale. With a
// first scale of 2^22, hysteresis 1 and a window of 2 the five steps on one
// replica run skip, update, update (the scale doubles), skip, update (on two
// replicas, with twice the batch, another mix): both paths, and every bit
// of the weights and of the scale history is the sequential reference's.
TEST_CASE("pipelined fp16 training with loss scaling is bitwise the sequential reference, overflows included",
          "[runtime][fp16]") {
  const int size = comm::size_of(comm::world());
  const std::string fp16 =
      "compute.precision = \"fp16\"\ntrain.initial_loss_scale = 4194304\ntrain.loss_scale_hysteresis = 1\n"
      "train.loss_scale_window = 2\n";
  for (const int p : {2, 4}) {
    const int d = size / p;
    if (p * d != size || d > 2) continue;
    for (const std::string schedule : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"}) {
      for (const std::string recompute : {"none", "full"}) {
        const config::RunConfig config = config_for(p, d, schedule, recompute, fp16);
        INFO(fmt::format("fp16 {} p={} d={} recompute={}", schedule, p, d, recompute));
        runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
        std::vector<double> scales;
        for (int step = 0; step < steps; ++step) scales.push_back(pipeline.run_step(step).loss_scale);
        tensor::ExecContext exec;
        model::SequentialTrainer<float> reference(model::TrainerSpec::from_config(config), exec);
        std::vector<double> reference_scales;
        for (int step = 0; step < steps; ++step) {
          reference_scales.push_back(reference.loss_scale());
          reference.step();
        }
        CHECK(scales == reference_scales);
        const int skipped = pipeline.update()->skipped();
        CHECK(skipped == reference.skipped_steps());
        CHECK((skipped > 0 && skipped < steps));  // both an overflow and an update
        if (p == 2 && d == 1) CHECK(pipeline.update()->skipped_steps() == std::vector<int>{0, 3});
        CHECK(pipeline.update()->loss_scale() == reference.loss_scale());
        check_bitwise(reference.parameters(), pipeline.parameters());
      }
    }
  }
}

// The data-parallel sums of each layer start inside the chunk's last backward
// (the REDUCE_GRADS action then only waits), or, turned off, in REDUCE_GRADS:
// either way every bit of the weights is the sequential reference's.
TEST_CASE("overlapped gradient sums start before REDUCE_GRADS and change no bit", "[runtime][data_parallel][np4]") {
  const int p = 2, d = 2;
  for (const std::string schedule : {"1f1b", "interleaved", "zb-h2"}) {
    for (const bool overlap : {true, false}) {
      config::RunConfig config = config_for(p, d, schedule, "none");
      config.pipeline.overlap_grad_reduce = overlap;
      runtime::Pipeline<float> pipeline(config, MPI_COMM_WORLD, runtime::Mode::train);
      const auto& actions = pipeline.schedule().ranks[pipeline.grid().pipeline_rank()];
      for (int step = 0; step < steps; ++step) {
        const runtime::StepResult result = pipeline.run_step(step);
        for (const auto& t : result.timings) {
          if (actions[t.index].kind != schedule::ActionKind::reduce_grads) continue;
          INFO(fmt::format("{} overlap={} step {}", schedule, overlap, step));
          CHECK(result.reduction_end == t.end);
          if (overlap) {
            CHECK(result.reduction_start < t.start);
          } else {
            CHECK(result.reduction_start == t.start);
          }
        }
      }
      tensor::ExecContext exec;
      model::SequentialTrainer<float> reference(model::TrainerSpec::from_config(config), exec);
      for (int step = 0; step < steps; ++step) reference.step();
      INFO(fmt::format("{} overlap={} stage {}", schedule, overlap, pipeline.grid().pipeline_rank()));
      check_bitwise(reference.parameters(), pipeline.parameters());
    }
  }
}

TEST_CASE("pipelined training on an HDF5 dataset is bitwise the sequential reference", "[runtime][dataset][np2][np4]") {
  const int size = comm::size_of(comm::world());
  const int p = 2, d = size / 2;
  // 40 training rows and B = 32 · d: batches straddle epochs from step 1 on.
  const std::string path = fmt::format("kpipe-test-pipeline-dataset-np{}.h5", size);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) test::write_tiny_dataset(path, 40, 16, 12, 5);
  MPI_Barrier(MPI_COMM_WORLD);
  for (const std::string schedule : {"1f1b", "zb-h1"}) {
    config::RunConfig config = config_for(p, d, schedule, "none");
    config.data.source = "hdf5";
    config.data.path = path;
    INFO(fmt::format("{} p={} d={}", schedule, p, d));
    check_against_reference(config);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::remove(path.c_str());
}

TEST_CASE("pipelined transformer training is bitwise the sequential reference", "[runtime][transformer]") {
  const int size = comm::size_of(comm::world());
  for (const int p : {2, 4}) {
    const int d = size / p;
    if (p * d != size || d > 2) continue;
    for (const std::string schedule :
         {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "v-half", "v-min", "dualpipe-v"}) {
      for (const std::string recompute : {"none", "selective", "full"}) {
        const int v = test::chunks_for(schedule);
        // 8 partition units (embedding, 6 blocks, head) for p · v <= 8; the
        // fused attention under the split-backward schedules, GEMM attention
        // elsewhere and wherever selective recomputation rebuilds its
        // probabilities; warm-up, cosine decay, decay and clipping all act.
        const bool split_backward = schedule.rfind("zb", 0) == 0 || schedule.rfind("v-", 0) == 0;
        const std::string attention = split_backward && recompute != "selective" ? "fused" : "gemm";
        const std::string text = fmt::format(
            "model.kind = \"transformer\"\nmodel.vocab = 11\nmodel.context = 8\nmodel.dim = 16\nmodel.heads = 2\n"
            "model.layers = 6\nmodel.mlp_ratio = 2\ntrain.global_batch = {}\ntrain.microbatch_size = 2\n"
            "train.steps = {}\ntrain.grad_clip = 0.5\ntrain.weight_decay = 0.1\ntrain.warmup_steps = 2\n"
            "train.lr_schedule = \"cosine\"\npipeline.stages = {}\npipeline.data_parallel = {}\n"
            "pipeline.schedule = \"{}\"\npipeline.virtual_stages = {}\npipeline.recompute = \"{}\"\n"
            "compute.attention = \"{}\"\nruntime.watchdog_seconds = 60\n",
            16 * d, steps, p, d, schedule, v, recompute, attention);
        config::RunConfig config = config::run_config(config::parse_deck(text, "transformer.toml"));
        INFO(fmt::format("transformer {} p={} d={} recompute={}", schedule, p, d, recompute));
        check_against_reference(config);
        // bf16 and fp16 under one schedule of each family: the Linear layers
        // of the attention and MLP blocks and the LM head round their operands.
        if (schedule == "1f1b" || schedule == "zb-v") {
          config.compute.precision = config::Precision::bf16;
          INFO("bf16");
          check_against_reference(config);
          config.compute.precision = config::Precision::fp16;
          INFO("fp16");
          check_against_reference(config);
          // GPT-2's head (no bias) and GELU (tanh form), as kpipe export writes them.
          config.compute.precision = config::Precision::fp32;
          config.model.head_bias = false;
          config.model.activation = config::ActivationKind::gelu_tanh;
          INFO("GPT-2 head and GELU");
          check_against_reference(config);
        }
        // Tied embeddings: the first and last stage on two ranks (1F1B,
        // interleaved) or on one (a V places both on rank 0).
        if (schedule != "gpipe" && schedule != "zb-h1" && schedule != "zb-h2") {
          config.compute.precision = config::Precision::fp32;
          config.model.head_bias = false;
          config.model.tie_embeddings = true;
          INFO("tied embeddings");
          check_against_reference(config);
        }
      }
    }
  }
}

TEST_CASE("pipelined llama training is bitwise the sequential reference", "[runtime][llama]") {
  const int size = comm::size_of(comm::world());
  for (const int p : {2, 4}) {
    const int d = size / p;
    if (p * d != size || d > 2) continue;
    for (const std::string schedule : {"1f1b", "interleaved", "zb-v", "dualpipe-v"}) {
      for (const std::string recompute : {"none", "full"}) {
        // Grouped-query attention (4 query heads over 2 key/value heads) with
        // rotary positions, RMSNorm and SwiGLU; 8 partition units for p · v <= 8.
        const std::string text = fmt::format(
            "model.kind = \"llama\"\nmodel.vocab = 11\nmodel.context = 8\nmodel.dim = 16\nmodel.heads = 4\n"
            "model.kv_heads = 2\nmodel.ffn_dim = 24\nmodel.layers = 6\nmodel.rope_theta = 500.0\n"
            "train.global_batch = {}\ntrain.microbatch_size = 2\ntrain.steps = {}\ntrain.grad_clip = 0.5\n"
            "train.weight_decay = 0.1\ntrain.warmup_steps = 2\ntrain.lr_schedule = \"cosine\"\n"
            "pipeline.stages = {}\npipeline.data_parallel = {}\npipeline.schedule = \"{}\"\n"
            "pipeline.virtual_stages = {}\npipeline.recompute = \"{}\"\nruntime.watchdog_seconds = 60\n",
            16 * d, steps, p, d, schedule, test::chunks_for(schedule), recompute);
        config::RunConfig config = config::run_config(config::parse_deck(text, "llama.toml"));
        INFO(fmt::format("llama {} p={} d={} recompute={}", schedule, p, d, recompute));
        check_against_reference(config);
        if (recompute != "none") continue;
        // The fused attention, selective recomputation on the GEMM path, bf16, and a tied head.
        config.compute.attention = config::AttentionKind::fused;
        INFO("fused attention");
        check_against_reference(config);
        config.compute.attention = config::AttentionKind::gemm;
        config.pipeline.recompute = config::Recompute::selective;
        INFO("selective recomputation");
        check_against_reference(config);
        config.pipeline.recompute = config::Recompute::none;
        config.compute.precision = config::Precision::bf16;
        INFO("bf16");
        check_against_reference(config);
        config.compute.precision = config::Precision::fp32;
        config.model.tie_embeddings = true;
        INFO("tied embeddings");
        check_against_reference(config);
      }
    }
  }
}

// Packed documents, token 0 of the synthetic stream closing each: every rank
// draws its microbatches' documents before their F and B, so the masks, the
// restarted positions and the loss that skips the boundaries (its mean over
// the predictions that count) are bitwise the sequential reference's.
TEST_CASE("pipelined training on packed documents is bitwise the sequential reference", "[runtime][documents]") {
  const int size = comm::size_of(comm::world());
  for (const int p : {2, 4}) {
    const int d = size / p;
    if (p * d != size || d > 2) continue;
    for (const std::string kind : {"transformer", "llama"}) {
      for (const std::string schedule : {"1f1b", "interleaved", "zb-v", "dualpipe-v"}) {
        const std::string family =
            kind == "llama" ? "model.kv_heads = 2\nmodel.ffn_dim = 24\n" : "model.mlp_ratio = 2\n";
        const std::string text = fmt::format(
            "model.kind = \"{}\"\nmodel.vocab = 11\nmodel.context = 16\nmodel.dim = 16\nmodel.heads = 4\n"
            "model.layers = 6\n{}data.pack_documents = true\ndata.document_separator = 0\n"
            "train.global_batch = {}\ntrain.microbatch_size = 2\ntrain.steps = {}\ntrain.grad_clip = 0.5\n"
            "pipeline.stages = {}\npipeline.data_parallel = {}\npipeline.schedule = \"{}\"\n"
            "pipeline.virtual_stages = {}\nruntime.watchdog_seconds = 60\n",
            kind, family, 16 * d, steps, p, d, schedule, test::chunks_for(schedule));
        config::RunConfig config = config::run_config(config::parse_deck(text, "packed.toml"));
        {
          tensor::ExecContext exec;
          const auto spec = model::TrainerSpec::from_config(config);
          const auto data = runtime::make_data_source<float>(config.data, spec, io::Split::train, exec);
          REQUIRE(data->ignored_predictions(0, 0, spec.global_batch) > 0);  // the documents are packed
        }
        for (const std::string attention : {"gemm", "fused"}) {
          config.compute.attention = attention == "gemm" ? config::AttentionKind::gemm : config::AttentionKind::fused;
          config.pipeline.recompute = schedule == "1f1b" ? config::Recompute::full : config::Recompute::none;
          INFO(fmt::format("{} {} p={} d={} {} attention", kind, schedule, p, d, attention));
          check_against_reference(config);
        }
      }
    }
  }
}
