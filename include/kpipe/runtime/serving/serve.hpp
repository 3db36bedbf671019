#pragma once
// Pipelined autoregressive serving (kpipe serve, DESIGN.md §5b): a request
// trace replayed in real time through the model stages on the ranks that
// hold them. The rank of the first stage owns the BatchScheduler: it admits
// arrivals, forms a microbatch whenever fewer than p are in flight, runs the
// first stage and sends the hidden states of the microbatch's tokens on; each
// later stage runs its layers with its own KV cache and passes them on; the
// last stage samples one token per finished prefill or decode and sends the
// tokens back to the scheduler. Every stage replays the same KV block
// allocations from the microbatch itself, so cache slots never travel.

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
#include "kpipe/runtime/serving/request_trace.hpp"
#include "kpipe/runtime/serving/serve_scheduler.hpp"

namespace kpipe::runtime {

// What happened to one request; times in seconds since serving began.
struct ServedRequest {
  int id = 0;
  double arrival = 0;
  std::vector<int> prompt;
  std::vector<int> generated;
  std::vector<double> token_times;  // when each generated token reached the scheduler
  std::string rejected;             // why it was never served (it can never fit the KV cache)
};

// One stage's compute of one microbatch, on the rank that ran it.
struct StageWork {
  int rank = 0;
  int stage = 0;
  int microbatch = 0;
  int tokens = 0;
  std::int64_t attended = 0;  // positions the microbatch's queries attend to, summed
  double start = 0;
  double end = 0;
};

struct ServeResult {
  std::vector<ServedRequest> requests;  // in trace order
  std::vector<StageWork> work;          // every rank's compute, in the order it ran
  double seconds = 0;                   // from the start to the last token
  int microbatches = 0;
  int kv_blocks = 0;       // KV cache blocks of each stage (inference.kv_cache_mib)
  int peak_kv_blocks = 0;  // the most any stage held at once
  std::string kv_dtype;    // the element K and V are cached in: "float32", "bfloat16", ...
};

// The KV blocks of inference.kv_cache_mib every stage holds: the stage with
// the most decoder blocks decides, since all stages follow one block table.
// The budget is per rank: a tensor rank of `tensor_ranks` caches its
// heads' share, so a block costs it 1/t. Under compute.precision = bf16 and
// fp16 a float model caches K and V in that type: twice the blocks. An
// input error when the budget holds no block.
template <class Scalar>
int kv_cache_blocks(const model::TrainerSpec& spec, const config::InferenceConfig& inference, int tensor_ranks = 1);

// The scheduler's limits for a deck's inference keys on p ranks.
BatchLimits batch_limits(const config::InferenceConfig& inference, int kv_blocks, int context, int p);

// The latency below which `fraction` of `values` lie (nearest rank: p50 of
// an even count is the lower middle); 0 when empty. kpipe serve's and the
// serving plan's percentiles.
double percentile(std::vector<double> values, double fraction);

// Idle over busy time, summed over ranks, each rank counted from its first
// compute to its last: the bubble that unequal microbatches leave.
double measured_bubble(const std::vector<StageWork>& work);

// Serving runs whole token rows on every tensor rank (each caches the K and
// V of its heads): an input error naming pipeline.sequence_parallel when it
// is set with t > 1. kpipe serve and generate check it before building the
// pipeline.
void require_servable(const config::PipelineConfig& pipeline);

// Serves `requests` on the pipeline (built in inference mode); every rank of
// the pipeline calls it with the same requests. The result is complete on
// the scheduler's rank (the first stage's tensor rank 0), empty elsewhere.
// With t > 1 each tensor rank caches the K and V of its heads/t heads.
template <class Scalar>
ServeResult serve(Pipeline<Scalar>& pipeline, const std::vector<Request>& requests,
                  const config::InferenceConfig& inference);

}  // namespace kpipe::runtime
