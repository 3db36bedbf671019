#pragma once
// The typed run configuration (DESIGN.md §2): built once from a deck by
// config::run_config() and validated once there, every cross-key rule
// included. Model, schedule and runtime take these plain structs and never see
// a Deck, so they can be built and tested without one. Every choice is an
// enum converted in one place; the schedule and the model family are named
// entries of their registries (the registries, not this header, know which
// exist). The structs' defaults are the deck's: the schema reads
// them from a default RunConfig, so a default is written once.

#include <csignal>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/config/model_family.hpp"
#include "kpipe/config/value.hpp"

namespace kpipe::schedule {
struct ScheduleInfo;
}

namespace kpipe::config {

enum class InitKind { automatic, uniform, he, xavier, gpt2 };
enum class ActivationKind { gelu, gelu_tanh, relu, tanh };
enum class LossKind { cross_entropy, mse };
enum class OptimizerKind { sgd, adamw };
enum class Task { classification, regression };
enum class GemmKind { vendor, packed, portable };
enum class AttentionKind { gemm, fused };
enum class TokenizerKind { character, sentencepiece };
enum class Precision { fp32, bf16, fp16 };
enum class LrSchedule { constant, cosine };
enum class NonFinite { stop, skip };
enum class Recompute { none, selective, full };
enum class ActivationStore { memory, hdf5 };
enum class Batching { request, uniform };
enum class LaneSplit { automatic, microbatches, layers };

// One table per choice: how a deck spells each value. The schema's choices,
// the deck's conversion (run_config) and messages all read it, and kernels
// take the same enums, so a value is added in one line.
template <class Enum>
struct Spelling {
  std::string_view name;
  Enum value;
};
template <class Enum>
struct Choices;  // static constexpr std::array<Spelling<Enum>, N> table

#define KPIPE_CHOICES(Enum, ...)                                                  \
  template <>                                                                     \
  struct Choices<Enum> {                                                          \
    static constexpr Spelling<Enum> entries[] = {__VA_ARGS__};                    \
    static constexpr std::size_t size = sizeof(entries) / sizeof(Spelling<Enum>); \
  };
KPIPE_CHOICES(InitKind, {"auto", InitKind::automatic}, {"uniform", InitKind::uniform}, {"he", InitKind::he},
              {"xavier", InitKind::xavier}, {"gpt2", InitKind::gpt2})
KPIPE_CHOICES(ActivationKind, {"gelu", ActivationKind::gelu}, {"gelu_tanh", ActivationKind::gelu_tanh},
              {"relu", ActivationKind::relu}, {"tanh", ActivationKind::tanh})
KPIPE_CHOICES(LossKind, {"cross_entropy", LossKind::cross_entropy}, {"mse", LossKind::mse})
KPIPE_CHOICES(OptimizerKind, {"sgd", OptimizerKind::sgd}, {"adamw", OptimizerKind::adamw})
KPIPE_CHOICES(Task, {"classification", Task::classification}, {"regression", Task::regression})
KPIPE_CHOICES(GemmKind, {"vendor", GemmKind::vendor}, {"packed", GemmKind::packed}, {"portable", GemmKind::portable})
KPIPE_CHOICES(AttentionKind, {"gemm", AttentionKind::gemm}, {"fused", AttentionKind::fused})
KPIPE_CHOICES(Precision, {"fp32", Precision::fp32}, {"bf16", Precision::bf16}, {"fp16", Precision::fp16})
KPIPE_CHOICES(TokenizerKind, {"char", TokenizerKind::character}, {"sentencepiece", TokenizerKind::sentencepiece})
KPIPE_CHOICES(LrSchedule, {"constant", LrSchedule::constant}, {"cosine", LrSchedule::cosine})
KPIPE_CHOICES(NonFinite, {"stop", NonFinite::stop}, {"skip", NonFinite::skip})
KPIPE_CHOICES(Recompute, {"none", Recompute::none}, {"selective", Recompute::selective}, {"full", Recompute::full})
KPIPE_CHOICES(ActivationStore, {"memory", ActivationStore::memory}, {"hdf5", ActivationStore::hdf5})
KPIPE_CHOICES(Batching, {"request", Batching::request}, {"uniform", Batching::uniform})
KPIPE_CHOICES(LaneSplit, {"auto", LaneSplit::automatic}, {"microbatches", LaneSplit::microbatches},
              {"layers", LaneSplit::layers})
#undef KPIPE_CHOICES

// "adamw" for OptimizerKind::adamw.
template <class Enum>
constexpr std::string_view name_of(Enum value) {
  for (const Spelling<Enum>& entry : Choices<Enum>::entries) {
    if (entry.value == value) return entry.name;
  }
  return {};
}

// Every spelling of Enum, in the table's order.
template <class Enum>
std::vector<std::string> choice_names() {
  std::vector<std::string> names;
  for (const Spelling<Enum>& entry : Choices<Enum>::entries) names.emplace_back(entry.name);
  return names;
}

// model.*: the family (model.kind) and the keys it reads. The widths are
// per sample; a token family's samples are model.context token ids with a
// next-token prediction at each position (input_dim = T, output_dim =
// T·padded_vocab(1), set by the family).
struct ModelConfig {
  std::string kind = "mlp";  // model.kind: a registered family's name
  int input_dim = 64;
  std::vector<int> hidden = {256, 256, 256, 256};
  int output_dim = 10;
  ActivationKind activation = ActivationKind::gelu;
  LossKind loss = LossKind::cross_entropy;
  std::uint64_t seed = 1234;
  InitKind init = InitKind::automatic;  // automatic: gpt2 for a language model, uniform otherwise
  // Language models (transformer, llama)
  int vocab = 0;  // symbols of the token data
  // The embedding and LM head hold vocab rounded up to a multiple of this
  // times t (Megatron-LM's make-vocab-size-divisible-by); the padding is masked.
  int vocab_divisible_by = 128;
  bool head_bias = true;        // transformer: the LM head adds a bias (GPT-2's has none)
  bool tie_embeddings = false;  // the LM head is the token embedding's transpose (GPT-2)
  int context = 64;             // T: tokens per sequence
  int dim = 128;                // model width
  int heads = 4;
  int blocks = 4;     // model.layers: decoder blocks
  int mlp_ratio = 4;  // transformer: MLP width / width
  std::string block;  // model.block: the registered layer kind of the repeated block; empty: the family's
  // Every key the family declares, as the deck set it (or as the family
  // resolved it: model.kv_heads = 0 is model.heads): what a family and its
  // layer kinds read (integer("model.kv_heads")).
  std::map<std::string, Value, std::less<>> values;

  const ModelFamily& family() const { return model_family(kind); }
  bool token_sequences() const { return family().token_sequences; }
  // Predictions per sample: T for a token family (one per position), else 1.
  // The loss treats each as a sample of its own (targets hold rows·positions
  // labels), so the mean loss is over all B·T positions.
  int positions() const { return token_sequences() ? context : 1; }
  // The vocabulary rounded up to a multiple of vocab_divisible_by · t, so each
  // of t tensor ranks holds an equal share (Megatron-LM). Tokens at or past
  // vocab are padding: never an input, their logits masked.
  int padded_vocab(int tensor_ranks) const {
    const int multiple = vocab_divisible_by * tensor_ranks;
    return (vocab + multiple - 1) / multiple * multiple;
  }
  // A key of `values`; an input error naming the family when it declares no
  // such key (a layer kind used under a family that lacks its key).
  std::int64_t integer(std::string_view key) const;
  double real(std::string_view key) const;
  bool boolean(std::string_view key) const;
  const std::string& string(std::string_view key) const;
};

// compute.precision = fp16: loss scaling (train.loss_scale and the
// train.*loss_scale* keys), with Megatron-LM's DynamicGradScaler semantics:
// the loss gradient is multiplied by the scale, the update reads the
// gradients divided by it; a step whose loss or gradients overflow is
// skipped, and `hysteresis` overflowing steps in a row halve the scale (not
// below `minimum`); `window` steps without one double it.
struct LossScaleConfig {
  bool enabled = false;    // compute.precision = fp16
  double fixed = 0;        // train.loss_scale: a static scale; 0 scales dynamically
  double initial = 65536;  // 2^16, DeepSpeed's initial_scale_power = 16
  double minimum = 1;
  int window = 1000;
  int hysteresis = 2;
};

// train.* keys of the optimizer.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 1e-3;
  double momentum = 0.9;                          // SGD
  double weight_decay = 0.0;                      // SGD: L2 term; AdamW: decoupled decay
  double beta1 = 0.9;                             // AdamW
  double beta2 = 0.999;                           // AdamW
  double epsilon = 1e-8;                          // AdamW
  double grad_clip = 0.0;                         // global L2 norm limit; 0 disables clipping
  LrSchedule lr_schedule = LrSchedule::constant;  // after the warm-up
  int warmup_steps = 0;                           // linear from lr / warmup_steps to lr
  int total_steps = 0;                            // train.steps: where a cosine schedule reaches 0
  // A step whose loss or gradient norm is NaN or Inf: the run stops before
  // its update, or the update is skipped (weights, state and update count unchanged).
  NonFinite on_nonfinite = NonFinite::stop;
  // Each rank updates once its own gradients are final, guessing the clip
  // factor; the global check completes later and a wrong guess is rolled back.
  bool post_validation = false;
  // ZeRO stage 1 over the data-parallel group: each replica keeps the state
  // of, and updates, its share of the parameters' rows, then the replicas
  // all-gather the updated rows.
  bool distributed = false;
  LossScaleConfig loss_scale;
};

// train.* keys of the batch and the run length.
struct TrainConfig {
  int global_batch = 256;    // B
  int microbatch_size = 16;  // b
  // train.microbatch_size = "auto": kpipe run measures the sizes first;
  // until then microbatch_size is a size the deck could run with.
  bool microbatch_size_auto = false;
  int steps = 50;
  int eval_every = 0;     // steps between validation evaluations; 0: none
  int eval_batches = 10;  // batches per evaluation; 0: the whole validation split
};

// data.*
struct DataConfig {
  // A registered data source (runtime/data/data_source_kind.hpp): kpipe's own
  // synthetic, hdf5 and text, or a project's.
  std::string source = "synthetic";
  std::string path;  // what the source reads: the HDF5 dataset (hdf5), UTF-8 text (text)
  Task task = Task::classification;
  std::uint64_t seed = 42;
  // A transformer's text: one token per character, or SentencePiece subwords
  // of the model file tokenizer_model.
  TokenizerKind tokenizer = TokenizerKind::character;
  std::string tokenizer_model;
  // A language model's sequences pack several documents, each closed by the
  // token document_separator (an id of model.vocab); -1: none.
  bool pack_documents = false;
  int document_separator = -1;
};

// pipeline.*, with the derived microbatch count m = B / (b·d).
struct PipelineConfig {
  int stages = 2;           // p: pipeline ranks
  int virtual_stages = 1;   // v: model chunks per rank
  int data_parallel = 1;    // d
  int tensor_parallel = 1;  // t: ranks sharing each model stage's layers
  int microbatches = 16;    // m = B/(b·d), derived
  std::string schedule = "1f1b";
  const schedule::ScheduleInfo* schedule_entry = nullptr;  // the registry's entry for `schedule`, set by run_config
  std::vector<int> partition;                              // layers per model stage; empty balances by FLOPs
  Recompute recompute = Recompute::none;
  ActivationStore activation_store = ActivationStore::memory;
  std::string activation_path;  // directory of the per-rank files; empty: $TMPDIR, else /tmp
  std::string schedule_file;    // empty: generate `schedule`
  bool validate_schedule = true;
  int extra_warmup = 0;  // forwards beyond 1F1B's warm-up on every rank but the last
  int lanes = 0;         // microbatches at once on a rank holding the whole model; 0: one per host thread
  LaneSplit lane_split = LaneSplit::automatic;  // how lanes share the rank's threads; auto: by timing
  bool overlap_grad_reduce = true;              // start each layer's data-parallel sum once its gradient is final
  bool scatter_gather = true;                   // t > 1: each tensor rank sends 1/t of a boundary tensor
  bool sequence_parallel = false;  // t > 1: outside the tensor-parallel pairs each rank holds 1/t of the rows

  int world_size() const { return stages * tensor_parallel * data_parallel; }
  int model_stages() const { return stages * virtual_stages; }
};

// compute.*
struct ComputeConfig {
  GemmKind gemm = GemmKind::vendor;
  AttentionKind attention = AttentionKind::gemm;
  Precision precision = Precision::fp32;
};

// sim.*: the simulator's cost model, per pipeline rank's share of the model.
struct SimConfig {
  double cost_forward = 1.0;
  double cost_backward_input = 1.0;
  double cost_backward_weight = 1.0;
  double overlap = 0.0;  // of an F&B's shorter half, hidden behind the longer
  double comm_latency = 0.0;
  double comm_bandwidth = 0.0;  // bytes per time unit; 0: transfers cost only latency
  int max_in_flight = 0;        // 0: unlimited
};

// inference.*: how kpipe serve batches requests and sizes its KV cache.
struct InferenceConfig {
  Batching batching = Batching::uniform;
  int token_budget = 64;     // uniform: tokens per microbatch
  int max_sequences = 16;    // requests served at once
  double kv_cache_mib = 64;  // per stage
  int block_tokens = 16;     // tokens per KV cache block
  double temperature = 0.0;  // 0: greedy
  std::uint64_t seed = 0;
};

// runtime.*
struct RuntimeConfig {
  double watchdog_seconds = 120.0;
  double memory_limit_mib = 0.0;  // 0: the node's available memory shared by its ranks
  // One rank's reference rate in GFLOP/s, that throughput is reported as a share of; 0: none.
  double peak_gflops = 0.0;
  // runtime.preempt_signals: signal numbers that make kpipe run checkpoint at
  // the next step boundary and exit (runtime/preemption.hpp); empty: none.
  std::vector<int> preempt_signals = {SIGTERM, SIGUSR1};
};

// checkpoint.*
struct CheckpointConfig {
  int every = 0;                     // steps between checkpoints; 0: never
  std::string path = "checkpoints";  // directory of step-<N>.h5
  int keep = 2;                      // the last `keep` checkpoints stay
  std::string restart;               // empty: start from model.seed
};

// debug.*: activation dumps (docs/formats.md, "Activation dumps").
struct DebugConfig {
  std::vector<int> dump_steps;         // empty: no dumps
  std::vector<int> dump_microbatches;  // empty: every microbatch of a dumped step
  std::string dump_path = "dumps";     // directory of activations-rank<R>.h5
};

struct RunConfig {
  ModelConfig model;
  OptimizerConfig optimizer;
  TrainConfig train;
  DataConfig data;
  PipelineConfig pipeline;
  ComputeConfig compute;
  SimConfig sim;
  InferenceConfig inference;
  RuntimeConfig runtime;
  CheckpointConfig checkpoint;
  DebugConfig debug;
  int layers = 1;  // partitionable layers of the model (its family's plan)
};

}  // namespace kpipe::config
