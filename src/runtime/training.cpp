// Pieces `kpipe run`, `infer`, `sweep` and `generate` share: building a rank's
// pipeline (set-up agreed by every rank), loading its checkpoint and what its
// stages keep stashed.

#include "kpipe/runtime/training.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/broadcast.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/eager_limit.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/kernels/gemm.hpp"
#include "kpipe/kernels/packed_gemm.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/kernels/vector_isa.hpp"
#include "kpipe/runtime/execution/detail/thread_check.hpp"
#include "kpipe/runtime/measurement/run_report.hpp"
#include "kpipe/runtime/persistence/checkpoint.hpp"
#include "kpipe/tensor/compat.hpp"
#include "kpipe/tensor/float_environment.hpp"

namespace kpipe::runtime {

namespace {

int restore_from(Pipeline<float>& pipeline, const std::string& file, RunReport* report) {
  const double start = comm::wall_time();
  const auto step = runtime::load_checkpoint(pipeline, file);
  const double seconds = comm::wall_time() - start;
  log::info("weights: {} after {} steps (read and verified in {:.3f} s)", file, step, seconds);
  if (report) report->restarted_from(file, step, seconds);
  return static_cast<int>(step);
}

// checkpoint.restart = "latest": the newest step-<N>.h5 file in
// checkpoint.path that reads and verifies as kpipe's (a torn or damaged one,
// or another program's, is skipped with a warning, the first few by name and
// the rest counted; every rank judges alike),
// or step 0 when there is none. Unfinished writes
// of an earlier job are named, for the user to remove.
int restore_latest(Pipeline<float>& pipeline, const config::CheckpointConfig& checkpoint, RunReport* report) {
  constexpr int shown_skips = 3;  // files skipped with a warning each; the rest are counted
  const std::string listing = comm::broadcast_from_root(comm::world(), [&] {
    const auto files = io::step_checkpoints(checkpoint.path);  // oldest first
    if (const auto unfinished = io::unfinished_checkpoints(checkpoint.path); !unfinished.empty()) {
      log::warning(
          "checkpoint.path = \"{}\" holds {} unfinished checkpoint write{} of a job that ended inside it "
          "({}); kpipe leaves them: remove them once no job writes there",
          checkpoint.path, unfinished.size(), unfinished.size() == 1 ? "" : "s", fmt::join(unfinished, ", "));
    }
    // Files that are not HDF5 at all are sorted out here, in 8 bytes each.
    std::string newest_first;
    int foreign = 0;
    for (auto file = files.rbegin(); file != files.rend(); ++file) {
      if (io::starts_as_checkpoint(file->path)) {
        newest_first += file->path + "\n";
      } else if (++foreign <= shown_skips) {
        log::warning("checkpoint.restart = \"latest\": skipping {}: not an HDF5 file, so not a checkpoint of kpipe's",
                     file->path);
      }
    }
    if (foreign > shown_skips) {
      log::warning("checkpoint.restart = \"latest\": skipping {} more step-<N>.h5 files that are not HDF5 files",
                   foreign - shown_skips);
    }
    return newest_first;
  });
  int damaged = 0;
  const auto count_the_rest = [&] {
    if (damaged <= shown_skips) return;
    log::warning("checkpoint.restart = \"latest\": skipped {} more step-<N>.h5 files that do not read as kpipe's",
                 damaged - shown_skips);
  };
  for (std::size_t start = 0, end; (end = listing.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string file = listing.substr(start, end - start);
    try {
      const int step = restore_from(pipeline, file, report);
      count_the_rest();
      return step;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::input) throw;
      if (++damaged <= shown_skips) log::warning("checkpoint.restart = \"latest\": skipping {}: {}", file, e.what());
    }
  }
  count_the_rest();
  log::info(
      "weights: no checkpoint of kpipe's in checkpoint.path = \"{}\" yet (checkpoint.restart = \"latest\"); "
      "starting from step 0",
      checkpoint.path);
  return 0;
}

// How a threaded rank's F and B use its threads, for the run log: several
// microbatches at once (lanes), rows in parts through the whole stage, or
// each kernel over all the threads.
void log_row_parts(const Pipeline<float>& pipeline, int microbatch_size) {
  const int threads = tensor::compat::concurrency(Kokkos::DefaultHostExecutionSpace());
  if (pipeline.layer_lanes() > 0) {
    const std::string otherwise = pipeline.lanes() > 1
                                      ? fmt::format("{} microbatches at once, each whole on a thread", pipeline.lanes())
                                      : std::string("one microbatch at a time");
    log::info(
        "F, B and W: {} microbatches at once (pipeline.lane_split), each of the rank's {} host threads a run of "
        "consecutive layers they pass through in turn, each layer's W on its run's thread{}",
        pipeline.layer_lanes(), threads,
        pipeline.times_lane_split()
            ? fmt::format("; or {}, whichever steps run faster (timed every 64 steps)", otherwise)
            : std::string());
    return;
  }
  if (pipeline.lanes() > 1) {
    log::info(
        "F, B and W: {} microbatches at once (pipeline.lanes), each whole on one of the rank's {} host threads, each "
        "layer's weight gradients added in the schedule's order",
        pipeline.lanes(), threads);
    return;
  }
  if (threads < 2 || pipeline.chunk_count() == 0) return;
  const model::Stage<float>& stage = pipeline.chunk(0);
  const int rows = stage.input_rows(microbatch_size);
  if (const int parts = stage.row_parts(rows); parts > 1) {
    log::info("F and B: a microbatch's {} rows in {} parts, each host thread carrying its part through every layer",
              rows, parts);
  } else {
    log::info(
        "F and B: layer after layer, each kernel over the rank's {} host threads (no row parts: a layer is not "
        "row-wise, a weight is over a quarter MiB, the microbatch too short, or a Kokkos tool attached; "
        "docs/model.md)",
        threads);
  }
}

}  // namespace

std::unique_ptr<Pipeline<float>> build_pipeline(const config::RunConfig& config, runtime::Mode mode) {
  log::info("floating point: {}", tensor::subnormal_mode());
  log::info("host loops: {}", kernels::host_loop_isa());
  log::info("MPI shared-memory eager limit: {}", comm::shared_memory_eager_limit());
  // Say which library runs the GEMMs: it depends on the build and the CPU.
  if (config.compute.gemm == config::GemmKind::vendor) {
    log::info("compute.gemm = vendor: {}", kernels::vendor_gemm_library());
  }
  // "packed" is valid in every build; say what it means in this one.
  if (config.compute.gemm == config::GemmKind::packed) {
    log::info("compute.gemm = packed: {}", kernels::packed_gemm_library());
  }
  if (config.compute.precision != config::Precision::fp32) {
    const tensor::DType operands = kernels::operand_dtype(model::kernel_choice(config.compute).precision);
    const auto library = [&]() -> std::string {
      switch (config.compute.gemm) {
        case config::GemmKind::portable:
          return "the portable kernel";
        case config::GemmKind::packed:
          return fmt::format(
              "the packed path for the products by W and Wᵀ ({}; oneDNN packs W in bfloat16) and {} "
              "for the weight gradient",
              kernels::packed_gemm_library(), kernels::mixed_gemm_library(operands));
        case config::GemmKind::vendor:
          break;
      }
      return kernels::mixed_gemm_library(operands);
    };
    log::info("compute.precision = {}: Linear and attention GEMMs in {} with float32 sums: {}",
              config::name_of(config.compute.precision), tensor::name_of(operands), library());
  }
  const comm::Watchdog watchdog(config.runtime.watchdog_seconds, comm::rank_of(comm::world()));
  auto pipeline = comm::collectively(comm::world(), watchdog, "set-up",
                                     [&] { return std::make_unique<Pipeline<float>>(config, comm::world(), mode); });
  warn_if_oversubscribed(pipeline->grid());
  log_row_parts(*pipeline, config.train.microbatch_size);
  return pipeline;
}

int restore(Pipeline<float>& pipeline, const config::CheckpointConfig& checkpoint, RunReport* report) {
  if (checkpoint.restart.empty()) return 0;
  if (checkpoint.restart == "latest") return restore_latest(pipeline, checkpoint, report);
  return restore_from(pipeline, checkpoint.restart, report);
}

std::size_t peak_stashed_bytes(const Pipeline<float>& pipeline) {
  std::size_t peak = 0;
  for (int c = 0; c < pipeline.chunk_count(); ++c) peak += pipeline.chunk(c).peak_stashed_bytes();
  return peak;
}

}  // namespace kpipe::runtime
