#include "kpipe/runtime/tuning/memory_estimate.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <vector>

#include "kpipe/comm/transport.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/model/kv_cache.hpp"
#include "kpipe/model/memory.hpp"
#include "kpipe/model/training/optimizer.hpp"
#include "kpipe/runtime/data/token_source.hpp"
#include "kpipe/schedule/lanes.hpp"

namespace kpipe::runtime {

namespace {

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// A "Key:   123 kB" line of a /proc file, in bytes; 0 when absent.
std::int64_t proc_kib(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    std::int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

// Peak bytes held along a rank's action list (the activations of its
// chunks): F adds the stash; B swaps it for what W needs, W releases that, BW
// releases the stash. With recomputation B and BW first rebuild the layers'
// saved tensors, for a moment. BW is B then W (Stage::backward): between the
// two it holds what B keeps for W, every layer's output gradient among it.
// Each chunk keeps the buffers of its own peak, so the chunks' peaks add up
// even where they come at different times (measured: V-Half's two chunks on
// the middle rank of p = 2 peak apart, and the rank holds both; performance.md).
std::int64_t peak_activations(const std::vector<schedule::Action>& actions,
                              const std::vector<model::ActivationBytes>& chunks, bool recompute) {
  using schedule::ActionKind;
  std::vector<std::int64_t> held(chunks.size(), 0), peaks(chunks.size(), 0);
  const auto account = [&](const schedule::Action& a) {
    const model::ActivationBytes& c = chunks[a.chunk];
    std::int64_t& chunk_held = held[a.chunk];
    std::int64_t& peak = peaks[a.chunk];
    if (recompute && schedule::releases_stash(a.kind)) peak = std::max(peak, chunk_held + c.saved);
    switch (a.kind) {
      case ActionKind::forward:
        chunk_held += c.stash;
        break;
      case ActionKind::backward_input:
        chunk_held += c.kept - c.stash;
        break;
      case ActionKind::backward_weight:
        chunk_held -= c.kept;
        break;
      default:
        peak = std::max(peak, chunk_held - c.stash + c.kept);
        chunk_held -= c.stash;
    }
    peak = std::max(peak, chunk_held);
  };
  // An F&B holds its F's stash before its BW releases another (the executor runs F first).
  for (const auto& a : actions) {
    if (schedule::is_compute(a.kind)) schedule::for_each_part(a, account);
  }
  return std::accumulate(peaks.begin(), peaks.end(), std::int64_t{0});
}

}  // namespace

std::string MemoryEstimate::describe() const {
  return fmt::format(
      "{:.1f} MiB (parameters {:.1f}, gradients {:.1f}, optimizer {:.1f}, activations {:.1f}, "
      "buffers {:.1f}, workspace {:.1f}, {}{}{}process {:.1f})",
      mib(total()), mib(parameters), mib(gradients), mib(optimizer_state), mib(activations), mib(buffers),
      mib(workspace), packed_weights > 0 ? fmt::format("packed weights {:.1f}, ", mib(packed_weights)) : std::string(),
      previous_update > 0 ? fmt::format("previous update {:.1f}, ", mib(previous_update)) : std::string(),
      data > 0 ? fmt::format("text corpus {:.1f}, ", mib(data)) : std::string(), mib(baseline));
}

MemoryEstimate estimate_memory(const model::TrainerSpec& spec, const schedule::Schedule& schedule, int rank,
                               int tensor_ranks, bool staged, std::int64_t baseline_bytes) {
  constexpr std::int64_t scalar = sizeof(float);
  // bf16 and fp16 keep what the layers save, and send the boundaries, in 2 bytes.
  const auto stored =
      static_cast<std::int64_t>(tensor::size_of(kernels::stored_dtype<float>(spec.stage.kernels.precision)));
  const bool training = schedule.training();
  const bool recompute = spec.stage.recompute;
  // As the rank runs its list: lanes hold a group's microbatches at once (the
  // larger group of either split; an upper bound where its layers turn out
  // unable to run them). Only a rank holding the whole model reorders; any
  // other reads its list in place. A model with attention never runs lanes:
  // attention is not row-wise (model::Sequential::runs_lanes).
  const bool lanes = schedule.p == 1 && schedule.v == 1 && !recompute &&
                     model::decoder_blocks(spec.model, {0, spec.model.layer_count()}).empty();
  const std::vector<schedule::Action> lane_order =
      lanes ? schedule::in_lane_order(schedule.ranks.at(rank), spec.most_lanes(schedule.m))
            : std::vector<schedule::Action>();
  const std::vector<schedule::Action>& actions = lane_order.empty() ? schedule.ranks.at(rank) : lane_order;
  MemoryEstimate estimate;
  estimate.baseline = baseline_bytes;
  std::vector<model::StageFootprint> chunks;  // elements
  std::int64_t widest_boundary = 0;           // elements of a tensor between stages
  std::int64_t loss_input = 0;                // elements of the last stage's output, which the loss takes
  model::FootprintQuery query;
  query.rows = spec.microbatch_size;
  query.tensor_ranks = tensor_ranks;
  query.sequence_parallel = spec.stage.sequence_parallel;
  query.attention = spec.stage.kernels.attention;
  query.selective_recompute = spec.stage.selective_recompute;
  for (int chunk = 0; chunk < schedule.v; ++chunk) {
    const int stage = schedule.placement.stage(rank, chunk);
    const model::StageFootprint footprint = model::stage_footprint(spec.model, spec.stages.at(stage), query, recompute);
    estimate.parameters += footprint.parameters * scalar;
    estimate.packed_weights += footprint.linear_weights * scalar;
    // The pool keeps what one F passes between a layer's parts, and in training B's gradients as well.
    const std::int64_t between = footprint.intermediates * (training ? 2 : 1);
    estimate.workspace = std::max(estimate.workspace, (footprint.workspace + between) * scalar);
    chunks.push_back(footprint);
    widest_boundary = std::max(widest_boundary, footprint.input_per_microbatch);
    if (stage + 1 == schedule.placement.stage_count()) {
      loss_input = footprint.output_per_microbatch;
    } else {
      widest_boundary = std::max(widest_boundary, footprint.output_per_microbatch);
    }
  }
  // Packed copies exist only where the packed path has a backend: W, and in training Wᵀ.
  const bool packed = spec.stage.kernels.gemm == kernels::GemmPath::packed && kernels::packed_gemm_available<float>();
  estimate.packed_weights = packed ? estimate.packed_weights * (training ? 2 : 1) : 0;
  // Gradients exist in inference too (every layer owns its buffer), and are never touched there.
  estimate.gradients = estimate.parameters;
  if (training) {
    // train.distributed_optimizer: each replica keeps the state of, and
    // updates, 1/d of the rows (to a row), and keeps only those for a roll-back.
    const std::int64_t shards = spec.optimizer.distributed ? spec.data_parallel : 1;
    estimate.optimizer_state =
        estimate.parameters * (spec.optimizer.kind == config::OptimizerKind::adamw ? 2 : 1) / shards;
    if (spec.optimizer.post_validation && model::needs_gradient_norm(spec.optimizer)) {
      estimate.previous_update = estimate.parameters / shards + estimate.optimizer_state;
    }
    std::vector<model::ActivationBytes> activations;
    for (const auto& chunk : chunks) {
      activations.push_back(model::activation_bytes(chunk, static_cast<int>(scalar), static_cast<int>(stored)));
    }
    estimate.activations = peak_activations(actions, activations, recompute);
  }
  // Boundary tensors alive at once: per stashed microbatch its input and output
  // gradient slots, the receive window (peak stash + 1), and the same again
  // for host staging when MPI cannot reach device memory. The last stage's
  // output never travels: the output the loss reads, a gradient waiting for
  // each stashed microbatch's B, and with recomputation the output B
  // recomputes (the logits of a language model, its largest tensors).
  // The window's messages travel in the boundary type (2 bytes in bf16 and
  // fp16, which also keep a rounded copy of each send in flight).
  const std::int64_t peak = schedule::peak_stash(actions).peak;
  const std::int64_t slots = 2 * (peak + 1) * scalar;
  const std::int64_t window = (peak + 1) * stored + (stored < scalar ? (peak + 1) * stored : 0);
  const std::int64_t loss_buffers = training ? 1 + peak + (recompute ? 1 : 0) : 1;
  estimate.buffers = (slots + window) * widest_boundary * (staged ? 2 : 1) + loss_buffers * loss_input * scalar;
  // d > 1: the replicas' gradient sums. A step's may all be in flight at
  // once, each all-reduce holding a temporary of its message's size inside
  // MPI (measured: Open MPI's nonblocking collectives; performance.md), the
  // small gradients a copy in their buckets besides.
  if (training && spec.data_parallel > 1) estimate.buffers += estimate.gradients;
  return estimate;
}

std::int64_t resident_bytes() { return proc_kib("/proc/self/status", "VmRSS"); }
std::int64_t peak_resident_bytes() { return proc_kib("/proc/self/status", "VmHWM"); }

void release_free_memory() { ::malloc_trim(0); }

bool reset_peak_resident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}
namespace {
// The smallest positive limit in `file` from `group` (a path in the
// hierarchy mounted at `root`) up to the root. cgroup v2 writes "max" for
// none, v1 a page-rounded 2^63 - 1: neither counts.
std::int64_t smallest_limit_up(const std::filesystem::path& root, const std::string& group_path, const char* file) {
  constexpr std::int64_t unlimited = std::int64_t{1} << 62;
  std::int64_t smallest = 0;
  for (std::filesystem::path group = root / std::filesystem::path(group_path).relative_path();;
       group = group.parent_path()) {
    std::ifstream limit(group / file);
    std::int64_t bytes = 0;
    if (limit >> bytes && bytes > 0 && bytes < unlimited) smallest = smallest == 0 ? bytes : std::min(smallest, bytes);
    if (group == root || !group.has_relative_path() || group.parent_path() == group) break;
  }
  return smallest;
}
}  // namespace

std::int64_t cgroup_memory_limit(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  std::ifstream groups(proc_self_cgroup);
  const std::filesystem::path root(cgroup_root);
  std::int64_t smallest = 0;
  // Lines are "ID:CONTROLLERS:PATH": "0::PATH" for v2, "N:...,memory,...:PATH" for v1's memory hierarchy.
  for (std::string line; std::getline(groups, line);) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    const std::string path = line.substr(second + 1);
    std::int64_t limit = 0;
    if (line.rfind("0::", 0) == 0) {
      limit = smallest_limit_up(root, path, "memory.max");
    } else if (controllers.find(",memory,") != std::string::npos) {
      limit = smallest_limit_up(root / "memory", path, "memory.limit_in_bytes");
    }
    if (limit > 0) smallest = smallest == 0 ? limit : std::min(smallest, limit);
  }
  return smallest;
}

MemoryBudget memory_budget(int ranks_on_node) {
  const std::string shared = fmt::format("shared by its {} rank{}", ranks_on_node, ranks_on_node == 1 ? "" : "s");
  MemoryBudget budget{proc_kib("/proc/meminfo", "MemAvailable") / ranks_on_node,
                      fmt::format("the node's available memory {}", shared)};
  const auto consider = [&](std::int64_t bytes, std::string source) {
    if (bytes > 0 && (budget.bytes <= 0 || bytes < budget.bytes)) budget = {bytes, std::move(source)};
  };
  const std::int64_t cgroup = cgroup_memory_limit("/proc/self/cgroup", "/sys/fs/cgroup");
  consider(cgroup / ranks_on_node, fmt::format("the cgroup's memory limit of {:.0f} MiB {}", mib(cgroup), shared));
  rlimit address_space{};
  if (::getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    const auto limit = static_cast<std::int64_t>(address_space.rlim_cur);
    const std::int64_t untouched = proc_kib("/proc/self/status", "VmSize") - resident_bytes();
    consider(std::max<std::int64_t>(limit - untouched, 1),
             fmt::format("ulimit -v of {:.0f} MiB, less the {:.0f} MiB this process has mapped but not touched",
                         mib(limit), mib(untouched)));
  }
  return budget;
}

MemoryBudget run_memory_limit(const config::RunConfig& config, int ranks_on_node) {
  if (config.runtime.memory_limit_mib > 0) {
    return {static_cast<std::int64_t>(config.runtime.memory_limit_mib * (1 << 20)),
            fmt::format("runtime.memory_limit_mib = {}", config.runtime.memory_limit_mib)};
  }
  MemoryBudget budget = memory_budget(ranks_on_node);
  budget.source += "; set runtime.memory_limit_mib to override";
  return budget;
}

void require_fits(const MemoryEstimate& estimate, std::int64_t limit_bytes, const std::string& limit_source) {
  if (limit_bytes <= 0 || estimate.total() <= limit_bytes) return;
  throw input_error(
      fmt::format("the model does not fit: this rank needs about {}, but {:.1f} MiB are available to "
                  "it ({}); use more pipeline stages, a smaller train.microbatch_size, "
                  "pipeline.recompute = \"full\" or a smaller model",
                  estimate.describe(), mib(limit_bytes), limit_source));
}

std::vector<MemoryEstimate> memory_estimates(const config::RunConfig& config, const model::TrainerSpec& spec,
                                             const schedule::Schedule& schedule, std::int64_t baseline_bytes) {
  std::vector<MemoryEstimate> estimates;
  const std::int64_t corpus = text_corpus_peak_bytes(config.data, schedule.training() && config.train.eval_every > 0);
  for (int rank = 0; rank < schedule.p; ++rank) {
    estimates.push_back(estimate_memory(spec, schedule, rank, config.pipeline.tensor_parallel,
                                        !comm::mpi_reaches_device_memory(), baseline_bytes));
    estimates.back().data = corpus;
  }
  return estimates;
}

void log_memory_estimates(const std::vector<MemoryEstimate>& estimates) {
  const int ranks = static_cast<int>(estimates.size());
  int largest = 0;
  for (int rank = 1; rank < ranks; ++rank) {
    if (estimates[rank].total() > estimates[largest].total()) largest = rank;
  }
  if (ranks <= limits::listed_ranks) {
    for (int rank = 0; rank < ranks; ++rank) log::info("memory, rank {}: {}", rank, estimates[rank].describe());
  } else {
    log::info("memory, largest (rank {}): {}", largest, estimates[largest].describe());
  }
}

}  // namespace kpipe::runtime
