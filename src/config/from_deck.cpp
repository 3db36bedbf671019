#include "kpipe/config/from_deck.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "divisors.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/signals.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::config {

namespace {

using detail::nearest_divisor;

// A choice key as its enum. The schema already restricts the text to these
// names; a name missing here is a schema/table mismatch, reported, never
// mapped to some default.
// The value `key` spells (Choices<Enum>); the schema has already refused
// any other spelling, so this is the deck's own table read back.
template <class Enum>
Enum choice(const Deck& deck, const char* key) {
  const std::string& value = deck.string(key);
  for (const Spelling<Enum>& entry : Choices<Enum>::entries) {
    if (value == entry.name) return entry.value;
  }
  throw input_error(
      fmt::format("{}: unknown value; choose {}", deck.describe(key), join_choices(choice_names<Enum>())));
}

// train.microbatch_size; for "auto", until kpipe run has measured the sizes,
// the largest b that divides B / d and leaves every model stage a microbatch
// (m >= p·v), so that the deck's other checks see a size it could run with.
std::int64_t microbatch_size(const Deck& deck) {
  if (!deck.word("train.microbatch_size")) return deck.integer("train.microbatch_size");
  const std::int64_t per_replica = deck.integer("train.global_batch") / deck.integer("pipeline.data_parallel");
  const std::int64_t stages = deck.integer("pipeline.stages") * deck.integer("pipeline.virtual_stages");
  for (std::int64_t b = per_replica; b > 1; --b) {
    if (per_replica % b == 0 && per_replica / b >= stages) return b;
  }
  return 1;
}

int microbatch_count(const Deck& deck) {
  const std::int64_t B = deck.integer("train.global_batch");
  const std::int64_t b = microbatch_size(deck);
  const std::int64_t d = deck.integer("pipeline.data_parallel");
  if (B % d != 0) {
    throw input_error(
        fmt::format("train.global_batch = {} is not divisible by pipeline.data_parallel = {}; "
                    "set train.global_batch to a multiple of {} (e.g. {})",
                    B, d, d, (B / d + 1) * d));
  }
  if (B % (b * d) != 0) {
    throw input_error(
        fmt::format("m = B / (b * d) = {} / ({} * {}) is not an integer; the nearest valid "
                    "train.microbatch_size is {}",
                    B, b, d, nearest_divisor(B / d, b)));
  }
  return static_cast<int>(B / (b * d));
}

std::vector<int> ints(const IntegerList& list) { return {list.begin(), list.end()}; }

// runtime.preempt_signals: "TERM,USR1" as signal numbers.
std::vector<int> signal_numbers(const Deck& deck) {
  const std::vector<NamedSignal>& known = preemption_signals();
  const std::string& list = deck.string("runtime.preempt_signals");
  std::vector<int> numbers;
  for (std::size_t start = 0; start < list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    std::string word = list.substr(start, comma - start);
    start = comma + 1;
    word.erase(0, word.find_first_not_of(' '));
    word.erase(word.find_last_not_of(' ') + 1);
    const std::string name = word.rfind("SIG", 0) == 0 ? word.substr(3) : word;
    const auto found = std::find_if(known.begin(), known.end(), [&](const NamedSignal& s) { return s.name == name; });
    if (found == known.end()) {
      std::vector<std::string> names;
      for (const NamedSignal& signal : known) names.emplace_back(signal.name);
      throw input_error(fmt::format("{}: unknown signal '{}'; use {}, separated by commas",
                                    deck.describe("runtime.preempt_signals"), word, join_choices(names)));
    }
    numbers.push_back(found->number);
  }
  return numbers;
}

// The model section: the keys every family reads, then its family's.
ModelConfig model_config(const Deck& deck) {
  ModelConfig model;
  model.kind = deck.string("model.kind");
  const ModelFamily& family = model_family(model.kind, deck.describe("model.kind"));
  model.activation = choice<ActivationKind>(deck, "model.activation");
  model.loss = choice<LossKind>(deck, "model.loss");
  model.seed = static_cast<std::uint64_t>(deck.integer("model.seed"));
  model.init = choice<InitKind>(deck, "model.init");
  model.block = deck.string("model.block");
  if (!model.block.empty() && family.block.empty()) {
    std::vector<std::string> with_blocks;
    for (const std::string& name : model_family_names()) {
      if (!model_family(name).block.empty()) with_blocks.push_back(fmt::format("\"{}\"", name));
    }
    throw input_error(fmt::format("{}: the {} family has no repeated block; use model.kind = {}, or remove model.block",
                                  deck.describe("model.block"), family.name, join_choices(with_blocks, " or ")));
  }
  for (const KeySpec& key : family.keys) model.values.emplace(key.name, deck.value(key.name));
  if (family.read) family.read(deck, model);
  return model;
}

OptimizerConfig optimizer_config(const Deck& deck) {
  OptimizerConfig optimizer;
  optimizer.kind = choice<OptimizerKind>(deck, "train.optimizer");
  optimizer.lr = deck.real("train.lr");
  optimizer.momentum = deck.real("train.momentum");
  optimizer.weight_decay = deck.real("train.weight_decay");
  optimizer.beta1 = deck.real("train.beta1");
  optimizer.beta2 = deck.real("train.beta2");
  optimizer.epsilon = deck.real("train.epsilon");
  optimizer.grad_clip = deck.real("train.grad_clip");
  optimizer.lr_schedule = choice<LrSchedule>(deck, "train.lr_schedule");
  optimizer.warmup_steps = static_cast<int>(deck.integer("train.warmup_steps"));
  optimizer.total_steps = static_cast<int>(deck.integer("train.steps"));
  optimizer.on_nonfinite = choice<NonFinite>(deck, "train.on_nonfinite");
  optimizer.post_validation = deck.boolean("train.post_validation");
  optimizer.distributed = deck.boolean("train.distributed_optimizer");
  LossScaleConfig& scale = optimizer.loss_scale;
  scale.enabled = choice<Precision>(deck, "compute.precision") == Precision::fp16;
  scale.fixed = deck.real("train.loss_scale");
  scale.initial = deck.real("train.initial_loss_scale");
  scale.minimum = deck.real("train.min_loss_scale");
  scale.window = static_cast<int>(deck.integer("train.loss_scale_window"));
  scale.hysteresis = static_cast<int>(deck.integer("train.loss_scale_hysteresis"));
  return optimizer;
}

PipelineConfig pipeline_config(const Deck& deck) {
  PipelineConfig pipeline;
  pipeline.stages = static_cast<int>(deck.integer("pipeline.stages"));
  pipeline.virtual_stages = static_cast<int>(deck.integer("pipeline.virtual_stages"));
  pipeline.data_parallel = static_cast<int>(deck.integer("pipeline.data_parallel"));
  pipeline.tensor_parallel = static_cast<int>(deck.integer("pipeline.tensor_parallel"));
  pipeline.scatter_gather = deck.boolean("pipeline.scatter_gather");
  pipeline.sequence_parallel = deck.boolean("pipeline.sequence_parallel");
  pipeline.microbatches = microbatch_count(deck);
  pipeline.schedule = deck.string("pipeline.schedule");
  pipeline.schedule_entry = &schedule::find_schedule(pipeline.schedule);
  pipeline.partition = ints(deck.integers("pipeline.partition"));
  pipeline.recompute = choice<Recompute>(deck, "pipeline.recompute");
  pipeline.activation_store = choice<ActivationStore>(deck, "pipeline.activation_store");
  pipeline.activation_path = deck.string("pipeline.activation_path");
  pipeline.schedule_file = deck.string("pipeline.schedule_file");
  pipeline.validate_schedule = deck.boolean("pipeline.validate_schedule");
  pipeline.extra_warmup = static_cast<int>(deck.integer("pipeline.extra_warmup"));
  pipeline.lanes = static_cast<int>(deck.integer("pipeline.lanes"));
  pipeline.lane_split = choice<LaneSplit>(deck, "pipeline.lane_split");
  pipeline.overlap_grad_reduce = deck.boolean("pipeline.overlap_grad_reduce");
  return pipeline;
}

SimConfig sim_config(const Deck& deck) {
  SimConfig sim;
  sim.cost_forward = deck.real("sim.cost_forward");
  sim.cost_backward_input = deck.real("sim.cost_backward_input");
  sim.cost_backward_weight = deck.real("sim.cost_backward_weight");
  sim.overlap = deck.real("sim.overlap");
  sim.comm_latency = deck.real("sim.comm_latency");
  sim.comm_bandwidth = deck.real("sim.comm_bandwidth");
  sim.max_in_flight = static_cast<int>(deck.integer("sim.max_in_flight"));
  return sim;
}

InferenceConfig inference_config(const Deck& deck) {
  InferenceConfig inference;
  inference.batching = choice<Batching>(deck, "inference.batching");
  inference.token_budget = static_cast<int>(deck.integer("inference.token_budget"));
  inference.max_sequences = static_cast<int>(deck.integer("inference.max_sequences"));
  inference.kv_cache_mib = deck.real("inference.kv_cache_mib");
  inference.block_tokens = static_cast<int>(deck.integer("inference.block_tokens"));
  inference.temperature = deck.real("inference.temperature");
  inference.seed = static_cast<std::uint64_t>(deck.integer("inference.seed"));
  return inference;
}

// The shape the schedule registry judges, in deck keys.
schedule::ShapeCheck shape_check(const Deck& deck, const RunConfig& config) {
  const PipelineConfig& shape = config.pipeline;
  return {shape.stages,        shape.virtual_stages,
          shape.microbatches,  config.train.microbatch_size,
          shape.data_parallel, deck.describe("pipeline.virtual_stages")};
}

// The schedule's own rules on (p, v, m).
void check_shape(const Deck& deck, const RunConfig& config) {
  schedule::check_shape(*config.pipeline.schedule_entry, shape_check(deck, config));
}

void check_partition(const Deck& deck, const RunConfig& config) {
  const std::vector<int>& partition = config.pipeline.partition;
  if (partition.empty()) return;
  const int stages = config.pipeline.model_stages();
  if (static_cast<int>(partition.size()) != stages) {
    throw input_error(fmt::format("{} has {} entries, but p * v = {} * {} = {} model stages need one entry each",
                                  deck.describe("pipeline.partition"), partition.size(), config.pipeline.stages,
                                  config.pipeline.virtual_stages, stages));
  }
  const auto total = std::accumulate(partition.begin(), partition.end(), std::int64_t{0});
  if (total != config.layers) {
    throw input_error(fmt::format("{} sums to {} layers, but the model has {}; the entries must add up to {}",
                                  deck.describe("pipeline.partition"), total, config.layers, config.layers));
  }
}

// A token family predicts the next token of its sequences.
void check_token_model(const Deck& deck, const RunConfig& config) {
  const ModelConfig& model = config.model;
  if (!model.token_sequences()) return;
  if (config.data.task != Task::classification || model.loss != LossKind::cross_entropy) {
    throw input_error(
        fmt::format("a {} predicts the next token with cross-entropy; set data.task = "
                    "\"classification\" and model.loss = \"cross_entropy\" (now {} and {})",
                    model.kind, deck.string("data.task"), deck.string("model.loss")));
  }
}

// Each tensor rank holds 1/t of every split width, so t must divide each
// (or be a multiple of a shareable one).
void check_tensor_parallel(const Deck& deck, const RunConfig& config) {
  const int t = config.pipeline.tensor_parallel;
  if (t == 1) return;
  for (const auto& [what, width, shareable] : config.model.family().split_widths(config.model)) {
    if (width % t == 0 || (shareable && t % width == 0)) continue;
    if (shareable) {
      throw input_error(fmt::format(
          "{} neither divides nor is a multiple of {} = {}: each tensor rank holds 1/t of them, or one shared by "
          "t / {} ranks; choose t from the divisors or multiples of {} (e.g. {}) or change the model",
          deck.describe("pipeline.tensor_parallel"), what, width, width, width, nearest_divisor(width, t)));
    }
    throw input_error(
        fmt::format("{} does not divide {} = {}: each tensor rank holds 1/t of it; choose t from its divisors "
                    "(e.g. {}) or change the model",
                    deck.describe("pipeline.tensor_parallel"), what, width, nearest_divisor(width, t)));
  }
}

// Sequence parallelism gives each tensor rank 1/t of a microbatch's rows
// (its samples: whole sequences of a transformer).
void check_sequence_parallel(const Deck& deck, const RunConfig& config) {
  const int t = config.pipeline.tensor_parallel;
  if (!config.pipeline.sequence_parallel || t == 1) return;
  if (config.train.microbatch_size_auto) {
    throw input_error(
        fmt::format("{} needs a fixed microbatch size divisible by t = {}; set train.microbatch_size "
                    "to a multiple of {} instead of \"auto\"",
                    deck.describe("pipeline.sequence_parallel"), t, t));
  }
  if (config.train.microbatch_size % t != 0) {
    throw input_error(fmt::format(
        "{} splits each microbatch's rows over {}, but {} is not divisible by {}; use a multiple of {} (e.g. {}) or "
        "turn sequence parallelism off",
        deck.describe("pipeline.sequence_parallel"), deck.describe("pipeline.tensor_parallel"),
        deck.describe("train.microbatch_size"), t, t, (config.train.microbatch_size / t + 1) * t));
  }
}

// A uniform microbatch holds one decode of every running request.
void check_inference(const Deck& deck, const RunConfig& config) {
  const InferenceConfig& inference = config.inference;
  if (inference.batching == Batching::uniform && inference.max_sequences > inference.token_budget) {
    throw input_error(fmt::format(
        "{} exceeds {}: a uniform microbatch must hold one decode of every running request; raise "
        "inference.token_budget to at least {} or lower inference.max_sequences",
        deck.describe("inference.max_sequences"), deck.describe("inference.token_budget"), inference.max_sequences));
  }
}

// fp16 runs the Linear GEMMs in float16 with loss scaling: the scale keys
// belong to it, each scale is a power of two (so scaling is exact), and the
// paths it cannot take are refused.
void check_precision(const Deck& deck, const RunConfig& config) {
  const LossScaleConfig& scale = config.optimizer.loss_scale;
  // A key counts as set when its value differs from the default: a resolved
  // deck (a checkpoint's) spells every key out.
  const LossScaleConfig defaults;
  const std::pair<const char*, bool> keys[] = {
      {"train.loss_scale", scale.fixed != defaults.fixed},
      {"train.initial_loss_scale", scale.initial != defaults.initial},
      {"train.min_loss_scale", scale.minimum != defaults.minimum},
      {"train.loss_scale_window", scale.window != defaults.window},
      {"train.loss_scale_hysteresis", scale.hysteresis != defaults.hysteresis}};
  for (const auto& [key, set] : keys) {
    if (!set) continue;
    if (!scale.enabled) {
      throw input_error(
          fmt::format("{} applies to compute.precision = \"fp16\" only ({}): bf16 and fp32 keep "
                      "float32's exponent range and need no loss scaling; remove it",
                      deck.describe(key), deck.describe("compute.precision")));
    }
    if (key != keys[0].first && scale.fixed > 0) {
      throw input_error(fmt::format("{} applies to dynamic loss scaling, but {} is static; remove one of them",
                                    deck.describe(key), deck.describe("train.loss_scale")));
    }
  }
  for (const char* key : {"train.loss_scale", "train.initial_loss_scale", "train.min_loss_scale"}) {
    int exponent = 0;
    const double value = deck.real(key);
    if (value != 0 && std::frexp(value, &exponent) != 0.5) {
      throw input_error(fmt::format("{} is not a power of two; scaling by one is exact, use {} or {}",
                                    deck.describe(key), std::ldexp(1.0, exponent - 1), std::ldexp(1.0, exponent)));
    }
  }
  if (scale.minimum > scale.initial) {
    throw input_error(fmt::format("{} exceeds {}; the scale starts at the initial one and falls to the minimum",
                                  deck.describe("train.min_loss_scale"), deck.describe("train.initial_loss_scale")));
  }
  if (config.compute.precision != Precision::fp16) return;
  if (config.compute.gemm == GemmKind::packed) {
    throw input_error(
        fmt::format("{} has no packed path: no backend packs float16 weights; set compute.gemm = "
                    "\"vendor\" or \"portable\", or use compute.precision = \"bf16\"",
                    deck.describe("compute.precision")));
  }
  if (config.optimizer.post_validation) {
    throw input_error(fmt::format(
        "{} runs each step ahead with the previous loss scale, which an fp16 overflow check changes after it; "
        "{} cannot be combined with it yet, set one of them to its default",
        deck.describe("train.post_validation"), deck.describe("compute.precision")));
  }
}

// A SentencePiece tokenizer encodes a transformer's text with its model file.
void check_tokenizer(const Deck& deck, const RunConfig& config) {
  const DataConfig& data = config.data;
  if (data.tokenizer == TokenizerKind::character) {
    if (!data.tokenizer_model.empty()) {
      throw input_error(fmt::format("{} is set but {}; set data.tokenizer = \"sentencepiece\" or remove it",
                                    deck.describe("data.tokenizer_model"), deck.describe("data.tokenizer")));
    }
    return;
  }
  if (!config.model.token_sequences() || data.source != "text") {
    throw input_error(fmt::format(
        "{} tokenizes a language model's text, but {} and {}; set model.kind = {} and data.source = \"text\"",
        deck.describe("data.tokenizer"), deck.describe("model.kind"), deck.describe("data.source"),
        token_family_choices()));
  }
  if (data.tokenizer_model.empty()) {
    throw input_error(
        fmt::format("{} needs its model file; set data.tokenizer_model (examples/lm/prepare_bpe.sh trains one)",
                    deck.describe("data.tokenizer")));
  }
}

// Packed documents: a language model's, closed by a token of its vocabulary.
void check_documents(const Deck& deck, const RunConfig& config) {
  const DataConfig& data = config.data;
  if (!data.pack_documents) {
    if (data.document_separator >= 0) {
      throw input_error(fmt::format("{} is set but {}; set data.pack_documents = true or remove it",
                                    deck.describe("data.document_separator"), deck.describe("data.pack_documents")));
    }
    return;
  }
  if (!config.model.token_sequences()) {
    throw input_error(fmt::format("{} packs a language model's token sequences, but {}; set model.kind = {}",
                                  deck.describe("data.pack_documents"), deck.describe("model.kind"),
                                  token_family_choices()));
  }
  if (data.document_separator < 0) {
    throw input_error(fmt::format("{} needs the token that ends each document; set data.document_separator to its id",
                                  deck.describe("data.pack_documents")));
  }
  if (data.document_separator >= config.model.vocab) {
    throw input_error(
        fmt::format("{} is outside the vocabulary [0, {}) of model.vocab; set it to the id of the "
                    "token that ends each document",
                    deck.describe("data.document_separator"), config.model.vocab));
  }
}

// pipeline.extra_warmup deepens the warm-up of the generated schedules that
// take it. Under any other (a deck's schedule overridden on the command line,
// a schedule file) it does nothing: the run goes on without it, and says why.
std::optional<std::string> unused_extra_warmup(const Deck& deck, const RunConfig& config) {
  const PipelineConfig& shape = config.pipeline;
  if (shape.extra_warmup == 0) return std::nullopt;
  if (!shape.schedule_file.empty()) {
    return fmt::format("{} does nothing: {} runs as written", deck.describe("pipeline.extra_warmup"),
                       deck.describe("pipeline.schedule_file"));
  }
  if (!shape.schedule_entry->takes_extra_warmup) {
    std::vector<std::string> taking;
    for (const std::string& name : schedule::schedule_names()) {
      if (schedule::find_schedule(name).takes_extra_warmup) taking.push_back(name);
    }
    return fmt::format("{} does nothing under {}: the schedules that take it are {}",
                       deck.describe("pipeline.extra_warmup"), deck.describe("pipeline.schedule"),
                       fmt::join(taking, ", "));
  }
  return std::nullopt;
}

// Every rule that involves more than one key.
void check_cross_keys(const Deck& deck, const RunConfig& config) {
  check_token_model(deck, config);
  check_tokenizer(deck, config);
  check_documents(deck, config);
  check_tensor_parallel(deck, config);
  check_sequence_parallel(deck, config);
  check_inference(deck, config);
  check_precision(deck, config);
  check_shape(deck, config);
  const PipelineConfig& shape = config.pipeline;
  if (shape.model_stages() > config.layers) {
    throw input_error(fmt::format(
        "p * v = {} * {} = {} model stages, but the model has only {} layers; use at most {} "
        "stages or add widths to model.hidden",
        shape.stages, shape.virtual_stages, shape.model_stages(), config.layers, config.layers / shape.virtual_stages));
  }
  if ((config.data.task == Task::classification) != (config.model.loss == LossKind::cross_entropy)) {
    throw input_error(fmt::format("{} does not fit {}; classification uses \"cross_entropy\", regression \"mse\"",
                                  deck.describe("model.loss"), deck.describe("data.task")));
  }
  check_partition(deck, config);
  if (config.optimizer.post_validation && shape.activation_store == ActivationStore::hdf5) {
    throw input_error(fmt::format(
        "{} starts each step's forward passes before the last update is checked and drops them when the check "
        "fails, which {} cannot undo in its files; set one of them to its default",
        deck.describe("train.post_validation"), deck.describe("pipeline.activation_store")));
  }
  if (config.optimizer.distributed && shape.data_parallel == 1) {
    throw input_error(fmt::format(
        "{} shards the optimizer state over the data-parallel replicas, but {}: there is nothing to shard it over; "
        "set pipeline.data_parallel > 1 or remove it",
        deck.describe("train.distributed_optimizer"), deck.describe("pipeline.data_parallel")));
  }
}

}  // namespace

RunConfig run_config(const Deck& deck, std::vector<std::string>* warnings) {
  RunConfig config;
  config.train.global_batch = static_cast<int>(deck.integer("train.global_batch"));
  config.train.microbatch_size = static_cast<int>(microbatch_size(deck));
  config.train.microbatch_size_auto = deck.word("train.microbatch_size").has_value();
  config.train.steps = static_cast<int>(deck.integer("train.steps"));
  config.train.eval_every = static_cast<int>(deck.integer("train.eval_every"));
  config.train.eval_batches = static_cast<int>(deck.integer("train.eval_batches"));
  config.model = model_config(deck);
  config.layers = static_cast<int>(config.model.family().layers(config.model).size());
  config.pipeline = pipeline_config(deck);
  config.optimizer = optimizer_config(deck);
  config.data.task = choice<Task>(deck, "data.task");
  config.data.seed = static_cast<std::uint64_t>(deck.integer("data.seed"));
  config.data.source = deck.string("data.source");
  config.data.path = deck.string("data.path");
  config.data.tokenizer = choice<TokenizerKind>(deck, "data.tokenizer");
  config.data.tokenizer_model = deck.string("data.tokenizer_model");
  config.data.pack_documents = deck.boolean("data.pack_documents");
  config.data.document_separator = static_cast<int>(deck.integer("data.document_separator"));
  config.compute.gemm = choice<GemmKind>(deck, "compute.gemm");
  config.compute.attention = choice<AttentionKind>(deck, "compute.attention");
  config.compute.precision = choice<Precision>(deck, "compute.precision");
  config.sim = sim_config(deck);
  config.inference = inference_config(deck);
  config.runtime.watchdog_seconds = deck.real("runtime.watchdog_seconds");
  config.runtime.memory_limit_mib = deck.real("runtime.memory_limit_mib");
  config.runtime.peak_gflops = deck.real("runtime.peak_gflops");
  config.runtime.preempt_signals = signal_numbers(deck);
  config.debug.dump_steps = ints(deck.integers("debug.dump_steps"));
  config.debug.dump_microbatches = ints(deck.integers("debug.dump_microbatches"));
  config.debug.dump_path = deck.string("debug.dump_path");
  config.checkpoint.every = static_cast<int>(deck.integer("checkpoint.every"));
  config.checkpoint.path = deck.string("checkpoint.path");
  config.checkpoint.keep = static_cast<int>(deck.integer("checkpoint.keep"));
  config.checkpoint.restart = deck.string("checkpoint.restart");
  check_cross_keys(deck, config);

  std::optional<std::string> unused_warmup = unused_extra_warmup(deck, config);
  if (unused_warmup) config.pipeline.extra_warmup = 0;
  if (warnings) {
    if (auto advice = schedule::shape_advice(*config.pipeline.schedule_entry, shape_check(deck, config))) {
      warnings->push_back(std::move(*advice));
    }
    if (unused_warmup) warnings->push_back(std::move(*unused_warmup));
  }
  return config;
}

}  // namespace kpipe::config
