#include "kpipe/config/schema.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kpipe/config/keys.hpp"
#include "kpipe/config/run_config.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/signals.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/schedule/registry.hpp"

namespace kpipe::config {

namespace {

using namespace keys;

template <class Enum>
std::string name(Enum value) {
  return std::string(name_of(value));
}

// "TERM,USR1": runtime.preempt_signals as the deck spells it.
std::string signal_names(const std::vector<int>& numbers) {
  std::string names;
  for (int number : numbers) {
    if (const NamedSignal* signal = named_signal(number))
      names += (names.empty() ? "" : ",") + std::string(signal->name);
  }
  return names;
}

std::string family_doc();

std::vector<KeySpec> shared_model_keys(const RunConfig& d) {
  return {
      choice("model.kind", d.model.kind, model_family_names(), family_doc()),
      text("model.block", d.model.block,
           "Layer kind of the repeated block (residual_mlp: one per hidden width; transformer, llama: one per "
           "model.layers), any registered kind that keeps the width, e.g. a project's (docs/architecture.md); "
           "empty: the family's own (residual_block, decoder_block, llama_block)"),
      choice("model.activation", name(d.model.activation), choice_names<ActivationKind>(),
             "Activation after each hidden Linear; transformer: in each block's MLP (gelu: the exact erf form, "
             "gelu_tanh: GPT-2's tanh approximation, Hugging Face's gelu_new); llama's MLP is SwiGLU whatever it says"),
      choice("model.loss", name(d.model.loss), choice_names<LossKind>(),
             "Loss: softmax cross-entropy (classification) or mean squared error (regression)"),
      integer("model.seed", d.model.seed, 0, int_max,
              "Weight initialisation seed; weights depend only on it and the layer index"),
      choice("model.init", name(d.model.init), choice_names<InitKind>(),
             "Weight initialisation: uniform +-1/sqrt(fan_in), he normal(0, sqrt(2/fan_in)), xavier uniform "
             "+-sqrt(6/(fan_in+fan_out)), gpt2 normal(0, 0.02) with residual projections scaled by 1/sqrt(2 layers); "
             "auto: gpt2 for a language model (transformer, llama), uniform otherwise"),
  };
}

// model.kind's doc: each registered family and what it is.
std::string family_doc() {
  std::string doc = "Model family, a registered one (docs/model.md, docs/architecture.md):";
  const std::vector<std::string> names = model_family_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    doc += fmt::format("{} {}, {}", i == 0 ? "" : ";", names[i], model_family(names[i]).doc);
  }
  return doc;
}

// The keys every family reads, then each family's own.
std::vector<KeySpec> model_keys() {
  const RunConfig d;
  std::vector<KeySpec> keys = shared_model_keys(d);
  for (KeySpec& key : model_family_keys()) {
    const bool shared = std::any_of(keys.begin(), keys.end(), [&](const KeySpec& k) { return k.name == key.name; });
    if (!shared) keys.push_back(std::move(key));
  }
  return keys;
}

std::vector<KeySpec> run_keys() {
  const RunConfig d;  // every key's default
  return {
      // training
      integer("train.global_batch", d.train.global_batch, 1, 1 << 30,
              "Samples per optimizer step over all data-parallel replicas (B)"),
      integer_or("train.microbatch_size", d.train.microbatch_size, 1, 1 << 30, {"auto"},
                 "Samples per microbatch (b); m = B / (b * d). auto: kpipe run first measures 3 steps at every b "
                 "that divides B / d and leaves every stage a microbatch (m >= p * v), then trains with the fastest "
                 "(kpipe sweep shows the same measurement in full)"),
      integer("train.steps", d.train.steps, 0, int_max, "Optimizer steps to run"),
      choice("train.optimizer", name(d.optimizer.kind), choice_names<OptimizerKind>(),
             "SGD with momentum, or AdamW (bias-corrected)"),
      real("train.lr", d.optimizer.lr, 0.0, 10.0, true, "Learning rate"),
      real("train.momentum", d.optimizer.momentum, 0.0, 1.0, false, "SGD momentum"),
      real("train.weight_decay", d.optimizer.weight_decay, 0.0, 1.0, false,
           "Decoupled weight decay (AdamW) or L2 term (SGD)"),
      real("train.beta1", d.optimizer.beta1, 0.0, 1.0, false, "AdamW first-moment decay"),
      real("train.beta2", d.optimizer.beta2, 0.0, 1.0, false, "AdamW second-moment decay"),
      real("train.epsilon", d.optimizer.epsilon, 0.0, 1.0, true, "AdamW denominator epsilon"),
      real("train.grad_clip", d.optimizer.grad_clip, 0.0, std::nullopt, false,
           "Clip gradients to this global L2 norm; 0 disables"),
      choice("train.lr_schedule", name(d.optimizer.lr_schedule), choice_names<LrSchedule>(),
             "Learning rate after the warm-up: constant, or cosine decay to 0 at train.steps"),
      integer("train.warmup_steps", d.optimizer.warmup_steps, 0, int_max,
              "Steps of linear learning-rate warm-up from train.lr / warmup_steps"),
      choice("train.on_nonfinite", name(d.optimizer.on_nonfinite), choice_names<NonFinite>(),
             "A step whose loss or global gradient norm is NaN or Inf: \"stop\" ends the run before its update "
             "(one line naming step and microbatch); \"skip\" leaves weights, optimizer state and the update count "
             "(so the learning-rate schedule) as they were and goes on with the next batch"),
      boolean("train.post_validation", d.optimizer.post_validation,
              "Post-validated optimizer steps (Zero Bubble PP, arXiv 2401.10241 section 4): each rank updates as soon "
              "as its gradients are final, with the previous step's clip factor, while the global NaN/Inf and norm "
              "check completes; a step whose check disagrees is rolled back and redone (or skipped), bitwise as the "
              "synchronous path. Keeps a copy of the weights and optimizer state"),
      boolean("train.distributed_optimizer", d.optimizer.distributed,
              "ZeRO stage 1 (Megatron-LM's distributed optimizer) over the pipeline.data_parallel replicas: each "
              "keeps the optimizer state of, and updates, 1/d of its parameters' rows, then the replicas all-gather "
              "the updated rows; the gradients are summed as without, so results are bitwise the same. Needs d > 1"),
      real("train.loss_scale", d.optimizer.loss_scale.fixed, 0.0, 0x1p64, false,
           "compute.precision = \"fp16\": a static loss scale (a power of two), or 0 for dynamic loss scaling: the "
           "loss gradient is multiplied by the scale so that small gradients survive float16's range, the update "
           "reads the gradients divided by it, and a step whose loss or gradients overflow (NaN or Inf) is skipped "
           "on every rank (Megatron-LM's semantics; docs/model.md, Precision)"),
      real("train.initial_loss_scale", d.optimizer.loss_scale.initial, 1.0, 0x1p64, false,
           "Dynamic loss scaling: the scale of the first step, a power of two (2^16, as DeepSpeed's "
           "initial_scale_power = 16)"),
      real("train.min_loss_scale", d.optimizer.loss_scale.minimum, 1.0, 0x1p64, false,
           "Dynamic loss scaling: the scale never falls below this power of two; an overflow at it follows "
           "train.on_nonfinite (stop: the run ends; skip: the step is skipped)"),
      integer("train.loss_scale_window", d.optimizer.loss_scale.window, 1, int_max,
              "Dynamic loss scaling: steps without an overflow after which the scale doubles"),
      integer("train.loss_scale_hysteresis", d.optimizer.loss_scale.hysteresis, 1, 1 << 20,
              "Dynamic loss scaling: the overflowing step, counted since the scale last grew, that halves the scale, "
              "as does every later one (1: every overflow halves it); every overflowing step is skipped"),
      integer("train.eval_every", d.train.eval_every, 0, int_max,
              "Print the validation loss every this many steps (token data: the validation split); 0: never"),
      integer("train.eval_batches", d.train.eval_batches, 0, int_max,
              "Batches of train.global_batch sequences each train.eval_every evaluation reads; 0: the whole split"),
      // data
      text("data.source", d.data.source,
           "Training data: \"synthetic\" (generated from seeded teachers for MLPs or a seeded token stream for a "
           "transformer), \"hdf5\" (the HDF5 dataset data.path, docs/formats.md \"Datasets\"), \"text\" (for a "
           "transformer, the UTF-8 text file data.path, one token per character, the first 90% trains, the rest "
           "validates), or a source a project registered (runtime::register_data_source)"),
      text("data.path", d.data.path,
           "HDF5 dataset read when data.source = \"hdf5\" (examples/data/ makes them), or the UTF-8 text "
           "when data.source = \"text\""),
      choice("data.tokenizer", name(d.data.tokenizer), choice_names<TokenizerKind>(),
             "transformer with data.source = \"text\": one token per character (char), or the subwords of the "
             "SentencePiece model data.tokenizer_model (examples/lm/prepare_bpe.sh trains one); model.vocab must "
             "equal its size"),
      text("data.tokenizer_model", d.data.tokenizer_model,
           "The SentencePiece model file (.model) of data.tokenizer = \"sentencepiece\""),
      boolean("data.pack_documents", d.data.pack_documents,
              "Language models: each sequence packs several documents, each closed by the token "
              "data.document_separator. A position attends to its own document only (a block-diagonal causal mask "
              "in both attention paths), its learned or rotary position restarts at each document, and no loss is "
              "taken across a boundary: the prediction at a separator counts for nothing, and a step's loss is the "
              "mean over the predictions that count (docs/model.md, Packed documents)"),
      integer("data.document_separator", d.data.document_separator, -1, int_max,
              "With data.pack_documents: the id of the token that ends each document (GPT-2's <|endoftext|> is "
              "50256), in [0, model.vocab); -1: none"),
      choice("data.task", name(d.data.task), choice_names<Task>(),
             "Classification (integer labels, cross_entropy) or regression (float targets, mse)"),
      integer("data.seed", d.data.seed, 0, int_max,
              "Seed of the synthetic data, or of the per-epoch shuffle of an HDF5 dataset"),
      // pipeline
      integer("pipeline.stages", d.pipeline.stages, 1, limits::pipeline_ranks, "Pipeline ranks (p)"),
      choice("pipeline.schedule", d.pipeline.schedule, schedule::schedule_names(),
             "Pipeline schedule (docs/schedules.md)"),
      integer("pipeline.virtual_stages", d.pipeline.virtual_stages, 1, limits::chunks_per_rank,
              "Model chunks per pipeline rank (v); > 1 needs the interleaved schedule; zb-v, v-half, v-min and "
              "dualpipe-v need 2"),
      integer("pipeline.data_parallel", d.pipeline.data_parallel, 1, limits::replicas,
              "Data-parallel replicas (d); world size is p * t * d"),
      integer("pipeline.tensor_parallel", d.pipeline.tensor_parallel, 1, 4096,
              "Tensor-parallel ranks per stage (t): Megatron column/row-parallel Linear pairs, attention heads "
              "and vocabulary split over t ranks; must divide an MLP's hidden widths, a transformer's heads, dim, "
              "MLP width and vocab; world size is p * t * d"),
      boolean("pipeline.scatter_gather", d.pipeline.scatter_gather,
              "With pipeline.tensor_parallel > 1: each tensor rank sends 1/t of a boundary activation (and "
              "gradient) to its counterpart, which all-gathers it in its tensor group (Megatron-LM); bitwise the "
              "same results, 1/t of the bytes between stages"),
      boolean("pipeline.sequence_parallel", d.pipeline.sequence_parallel,
              "With pipeline.tensor_parallel > 1: LayerNorms, residual sums and the activations between the "
              "tensor-parallel pairs (and across stage boundaries) hold only each tensor rank's 1/t of a "
              "microbatch's rows, with all-gather / reduce-scatter instead of all-reduce (Megatron-LM); t must "
              "divide train.microbatch_size; results within 1e-5 of off, 1/t of those activations per rank"),
      integers("pipeline.partition", d.pipeline.partition, 1,
               "Layers per model stage (p * v entries summing to the layer count); empty balances by FLOPs"),
      choice("pipeline.recompute", name(d.pipeline.recompute), choice_names<Recompute>(),
             "selective: the layers keep all but what B rebuilds cheaply (the gemm attention's T x T "
             "probabilities); full: stash only stage inputs and recompute the forward pass inside backward; "
             "results bitwise none's"),
      choice("pipeline.activation_store", name(d.pipeline.activation_store), choice_names<ActivationStore>(),
             "Where a stage keeps its stash between F and B: memory, or hdf5 (a per-rank file in "
             "pipeline.activation_path, read back before B; bitwise the same results, less memory)"),
      text("pipeline.activation_path", d.pipeline.activation_path,
           "Existing writable directory (node-local scratch) of the activation_store = \"hdf5\" files, removed at the "
           "end of the run; empty: $TMPDIR, else /tmp"),
      text("pipeline.schedule_file", d.pipeline.schedule_file,
           "Run a hand-written schedule in kpipe's text form instead of a generated one"),
      integer(
          "pipeline.extra_warmup", d.pipeline.extra_warmup, 0, limits::microbatches,
          "1f1b and zb-h1: forwards each rank but the last runs before its first backward beyond 1F1B's p - r - 1, so "
          "that a late gradient from the next rank finds work queued instead of stalling the rank; each "
          "stashes one more microbatch on those ranks (docs/schedules.md, \"Warm-up slack\")"),
      integer(
          "pipeline.lanes", d.pipeline.lanes, 0, limits::microbatches,
          "A rank that holds the whole model (pipeline.stages = 1, one chunk, a schedule that runs each "
          "microbatch's F, LOSS and backward together, such as 1f1b) runs this many microbatches at once, each on "
          "a host thread of its own, its products as large as one thread's, and each layer's weight gradients "
          "added in the schedule's order (bitwise the same results); 0: one per host thread (OMP_NUM_THREADS) where "
          "F and B would otherwise split a microbatch's rows over the threads (weights of at most a quarter MiB), "
          "1: one at a time. Where every layer is row-wise (an MLP in float32 on the vendor GEMM) on a host "
          "backend, without recompute or the hdf5 activation store"),
      choice("pipeline.lane_split", name(d.pipeline.lane_split), choice_names<LaneSplit>(),
             "How such a rank's host threads share its microbatches: \"microbatches\", each whole on a thread (the "
             "lanes above); \"layers\", each thread a run of consecutive layers that every microbatch of a group "
             "passes through, rows handed from thread to thread (a pipeline inside the rank: each thread reads only "
             "its own layers' weights, for cores far apart; groups of pipeline.lanes microbatches, 0: eight per "
             "thread); \"auto\", whichever runs the rank's steps faster, by microbatches (where pipeline.lanes = 0 "
             "runs none, one microbatch at a time) or by layers, timed at the start and again every 64 steps. "
             "Bitwise the same results every way"),
      boolean("pipeline.validate_schedule", d.pipeline.validate_schedule,
              "Check the schedule before running; turn off only to debug a hand-written schedule (the watchdog then "
              "catches hangs)"),
      boolean("pipeline.overlap_grad_reduce", d.pipeline.overlap_grad_reduce,
              "With data_parallel > 1: start summing each layer's gradients across the replicas as soon as its last "
              "microbatch's weight gradient is done, overlapped with the rest of the backward pass and the "
              "cool-down; false sums all of them after the last backward"),
      // compute
      choice("compute.gemm", name(d.compute.gemm), choice_names<GemmKind>(),
             "GEMM path: vendor BLAS (CBLAS, cuBLAS) where available, float32 on oneDNN's matmul where its kernels "
             "beat the BLAS's, and float32 weight gradients over up to 64 rows whose gradient is at least a core's L2 "
             "streamed by kpipe's own kernel where the CPU has AVX-512 (the run log's GEMM line says which); "
             "packed: as vendor, but each Linear's weight is "
             "reordered once per step into oneDNN's blocked layout, W for the forward and W^T for the "
             "input-gradient products, and the weight gradient X^T dY runs on oneDNN's matmul (the vendor path in "
             "builds without oneDNN, on CUDA and in double precision); on CPUs for which oneDNN has no blocked "
             "layout, such as AVX2 ones, libxsmm kernels on weights packed in panels, where the build has libxsmm; "
             "or the portable Kokkos kernel"),
      choice("compute.attention", name(d.compute.attention), choice_names<AttentionKind>(),
             "transformer attention: batched GEMMs and a causal-softmax kernel (keeps b*heads*T*T probabilities), or "
             "one fused kernel with online softmax that recomputes them in backward"),
      choice("compute.precision", name(d.compute.precision), choice_names<Precision>(),
             "Arithmetic of the Linear layers' GEMMs: fp32, or bf16: inputs rounded to bfloat16 (the weights from "
             "their float32 master copy after every optimizer step), products summed in float32 (oneDNN's bf16 "
             "matmul, on AMX or AVX512-BF16 where the CPU has them, with compute.gemm = vendor, and on weights "
             "packed in bfloat16 with packed; the portable Kokkos kernel otherwise), and each Linear's saved input "
             "and output gradient kept in bfloat16; fp16: the same in IEEE float16 with loss scaling "
             "(train.loss_scale), on the vendor or portable path; weights, optimizer state, gradients, the "
             "activations between layers, normalisation, attention and losses stay float32 (docs/model.md, "
             "Precision)"),
      // simulator
      real("sim.cost_forward", d.sim.cost_forward, 0.0, limits::sim_cost, true,
           "Simulated time of one F per stage (arbitrary units); zb-v also plans with these costs"),
      real("sim.cost_backward_input", d.sim.cost_backward_input, 0.0, limits::sim_cost, true,
           "Simulated time of one B (input gradient)"),
      real("sim.cost_backward_weight", d.sim.cost_backward_weight, 0.0, limits::sim_cost, true,
           "Simulated time of one W (weight gradient); BW = B + W"),
      real("sim.overlap", d.sim.overlap, 0.0, 1.0, false,
           "Share of the shorter half of an F&B (dualpipe-v) hidden behind the longer: 0 when the halves run one "
           "after the other (host backends), 1 when two device streams overlap them fully"),
      real("sim.comm_latency", d.sim.comm_latency, 0.0, limits::sim_cost, false,
           "Simulated latency of one transfer; zb-v also plans with it"),
      real("sim.comm_bandwidth", d.sim.comm_bandwidth, 0.0, std::nullopt, false,
           "Simulated bytes per time unit; 0 means transfers cost only latency"),
      integer("sim.max_in_flight", d.sim.max_in_flight, 0, int_max,
              "Limit on stashed microbatches per rank in the simulator; 0 is unlimited"),
      // inference (kpipe serve)
      choice("inference.batching", name(d.inference.batching), choice_names<Batching>(),
             "How kpipe serve forms microbatches: request, whole prefills first and then the decodes (unequal "
             "microbatches, the baseline), or uniform, decodes first and prefills chunked to fill "
             "inference.token_budget (Sarathi-Serve: equal microbatches, smaller bubbles)"),
      integer("inference.token_budget", d.inference.token_budget, 1, 1 << 20,
              "uniform batching: tokens per microbatch (decodes plus prefill chunks); at least "
              "inference.max_sequences"),
      integer("inference.max_sequences", d.inference.max_sequences, 1, 1 << 20,
              "Requests being served at once; later arrivals wait in arrival order"),
      real("inference.kv_cache_mib", d.inference.kv_cache_mib, 0.0, std::nullopt, true,
           "KV cache of each stage's layers in MiB, per tensor rank (which caches its heads/t heads), K and V in "
           "bfloat16/float16 under compute.precision = bf16/fp16; a request is admitted only when blocks for its "
           "whole prompt and output are free"),
      integer("inference.block_tokens", d.inference.block_tokens, 1, 1 << 16,
              "Tokens per KV cache block: the unit the cache allocates to a request"),
      real("inference.temperature", d.inference.temperature, 0.0, 100.0, false,
           "Sampling temperature of kpipe serve; 0: greedy (the most likely token)"),
      integer("inference.seed", d.inference.seed, 0, int_max, "Seed of the sampled tokens (temperature > 0)"),
      // runtime
      real("runtime.watchdog_seconds", d.runtime.watchdog_seconds, 0.0, std::nullopt, true,
           "Abort the job when any wait takes longer than this, naming the rank and the message"),
      real("runtime.memory_limit_mib", d.runtime.memory_limit_mib, 0.0, std::nullopt, false,
           "Memory one rank may use; a run whose estimate exceeds it stops before allocating. 0: the node's "
           "available memory or its cgroup's memory limit (memory.max, v1's memory.limit_in_bytes), shared by its "
           "ranks, or ulimit -v, whichever is least"),
      real("runtime.peak_gflops", d.runtime.peak_gflops, 0.0, 1e9, false,
           "One rank's reference rate in GFLOP/s (a GPU's or a site's figure): kpipe run and kpipe plan --costs "
           "report the model FLOP/s as a share of it (utilisation); 0: this machine's one-thread 1024^3 sgemm rate "
           "through compute.gemm, measured at start-up"),
      text("runtime.preempt_signals", signal_names(d.runtime.preempt_signals),
           "Signals (comma-separated: TERM, USR1, USR2, INT, HUP) on which kpipe run writes a checkpoint at the "
           "next step boundary and exits with code 3, to continue with checkpoint.restart = \"latest\"; empty: "
           "none"),
      // debug
      integers("debug.dump_steps", d.debug.dump_steps, 0,
               "Steps (from 0) whose stage-boundary activations and gradients are dumped to debug.dump_path"),
      integers("debug.dump_microbatches", d.debug.dump_microbatches, 0,
               "Microbatches (per replica, from 0) to dump; empty: all of them"),
      text("debug.dump_path", d.debug.dump_path,
           "Existing writable directory of the activation dumps activations-rank<R>.h5 (docs/formats.md)"),
      // checkpoint
      integer("checkpoint.every", d.checkpoint.every, 0, int_max,
              "Write a checkpoint every this many steps (after the step completes); 0 never writes one"),
      text("checkpoint.path", d.checkpoint.path,
           "Directory of the checkpoint files step-<N>.h5 (N: steps done; docs/formats.md), created when missing"),
      integer("checkpoint.keep", d.checkpoint.keep, 1, int_max,
              "Keep the last this many of kpipe's checkpoints in checkpoint.path; older ones kpipe wrote are removed"),
      text("checkpoint.restart", d.checkpoint.restart,
           "Checkpoint file to continue from (its step + 1 onwards, up to train.steps), or \"latest\": the newest "
           "of kpipe's in checkpoint.path that verifies, step 0 when there is none; kpipe infer evaluates its "
           "weights"),
  };
}

}  // namespace

// Rebuilt when a family registers (at start-up, before any deck is read), so
// a project's family keys are keys like kpipe's own.
const std::vector<KeySpec>& schema() {
  static std::vector<KeySpec> keys;
  static std::size_t families = 0;
  if (const std::size_t now = model_family_names().size(); now != families) {
    keys = model_keys();
    std::vector<KeySpec> rest = run_keys();
    keys.insert(keys.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
    families = now;
  }
  return keys;
}

const KeySpec* find_key(std::string_view name) {
  const auto& keys = schema();
  const auto it = std::find_if(keys.begin(), keys.end(), [&](const KeySpec& k) { return k.name == name; });
  return it == keys.end() ? nullptr : &*it;
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const auto& key : schema()) names.push_back(key.name);
  return names;
}

std::string allowed_values(const KeySpec& spec) {
  if (!spec.choices.empty()) {
    std::vector<std::string> quoted;
    for (const auto& c : spec.choices) quoted.push_back(fmt::format("\"{}\"", c));
    if (spec.type != ValueType::string) {
      return fmt::format("{} {} and <= {}, or {}", spec.min_exclusive ? ">" : ">=", *spec.min, *spec.max,
                         join_choices(quoted));
    }
    return "one of " + join_choices(quoted);
  }
  const char* what = spec.type == ValueType::integer_list ? "each entry " : "";
  if (spec.min && spec.max) {
    return fmt::format("{}{} {} and <= {}", what, spec.min_exclusive ? ">" : ">=", *spec.min, *spec.max);
  }
  if (spec.min) return fmt::format("{}{} {}", what, spec.min_exclusive ? ">" : ">=", *spec.min);
  return "any " + describe(spec.type).substr(describe(spec.type).find(' ') + 1);
}

std::string schema_markdown() {
  std::string out =
      "# kpipe deck reference\n\n"
      "Generated from the schema registry by `kpipe deck --doc`; do not edit by hand.\n"
      "Keys are dotted TOML keys; the same `key=value` form overrides them on the command line.\n";
  std::string section;
  for (const auto& key : schema()) {
    const std::string prefix = key.name.substr(0, key.name.find('.'));
    if (prefix != section) {
      section = prefix;
      out +=
          fmt::format("\n## {}\n\n| key | type | default | allowed | description |\n|---|---|---|---|---|\n", section);
    }
    out += fmt::format("| `{}` | {} | `{}` | {} | {} |\n", key.name, describe(key.type), to_toml(key.default_value),
                       allowed_values(key), key.doc);
  }
  return out;
}

}  // namespace kpipe::config
