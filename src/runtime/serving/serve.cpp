#include "kpipe/runtime/serving/serve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <thread>

#include "kpipe/comm/agreement.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/mailbox.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/kernels/precision.hpp"
#include "kpipe/kernels/random.hpp"
#include "kpipe/model/kv_cache.hpp"
#include "kpipe/model/tensor_parallel.hpp"
#include "kpipe/runtime/execution/grid_collectives.hpp"
#include "kpipe/runtime/serving/generation.hpp"
#include "kpipe/runtime/serving/serve_scheduler.hpp"

namespace kpipe::runtime {

namespace {

// How often the scheduler reports its progress through a trace.
constexpr double progress_seconds = 30.0;

// The header of a mailbox message: its kind, then what the kind needs.
enum Kind : std::int32_t {
  stage_input = 1,  // stage, microbatch, segments (request, start, length, sample)..., released...
  sampled = 2,      // microbatch, then one token per sampling segment
  stop = 3,
};

std::vector<std::int32_t> encode(int stage, const Microbatch& microbatch) {
  std::vector<std::int32_t> header = {stage_input, stage, microbatch.id,
                                      static_cast<std::int32_t>(microbatch.segments.size())};
  for (const Segment& s : microbatch.segments) header.insert(header.end(), {s.request, s.start, s.length, s.sample});
  header.push_back(static_cast<std::int32_t>(microbatch.released.size()));
  header.insert(header.end(), microbatch.released.begin(), microbatch.released.end());
  return header;
}

// The microbatch of a stage_input header (without its token ids, which only
// the first stage reads, on the scheduler's rank).
Microbatch decode(const std::vector<std::int32_t>& header) {
  Microbatch microbatch;
  microbatch.id = header.at(2);
  std::size_t at = 4;
  for (int s = 0; s < header.at(3); ++s, at += 4) {
    microbatch.segments.push_back({header.at(at), header.at(at + 1), header.at(at + 2), header.at(at + 3) != 0});
  }
  const int released = header.at(at++);
  microbatch.released.assign(header.begin() + static_cast<std::ptrdiff_t>(at),
                             header.begin() + static_cast<std::ptrdiff_t>(at + released));
  return microbatch;
}

}  // namespace

template <class Scalar>
int kv_cache_blocks(const model::TrainerSpec& spec, const config::InferenceConfig& inference, int tensor_ranks) {
  int most = 0;
  for (const model::LayerRange& stage : spec.stages) {
    most = std::max(most, static_cast<int>(model::decoder_blocks(spec.model, stage).size()));
  }
  if (most == 0) return 1 << 30;
  // A tensor rank caches the K and V of its 1/t of the heads: inference.kv_cache_mib is per tensor rank.
  const std::size_t per_block =
      model::kv_block_bytes(most, model::kv_width(spec.model, tensor_ranks), inference.block_tokens,
                            kernels::stored_dtype<Scalar>(spec.stage.kernels.precision));
  const double budget = inference.kv_cache_mib * 1024.0 * 1024.0;
  const int blocks = static_cast<int>(budget / static_cast<double>(per_block));
  if (blocks < 1) {
    throw input_error(fmt::format(
        "inference.kv_cache_mib = {} holds no KV block ({} bytes for {} tokens on {} attention layers); raise it to "
        "at least {:.3f}",
        inference.kv_cache_mib, per_block, inference.block_tokens, most, per_block / (1024.0 * 1024.0)));
  }
  return blocks;
}

template int kv_cache_blocks<float>(const model::TrainerSpec&, const config::InferenceConfig&, int);
template int kv_cache_blocks<double>(const model::TrainerSpec&, const config::InferenceConfig&, int);

BatchLimits batch_limits(const config::InferenceConfig& inference, int kv_blocks, int context, int p) {
  BatchLimits limits;
  limits.policy = inference.batching;
  limits.token_budget = inference.token_budget;
  limits.max_sequences = inference.max_sequences;
  limits.kv_blocks = kv_blocks;
  limits.block_tokens = inference.block_tokens;
  limits.context = context;
  limits.pipeline_depth = p;
  return limits;
}

namespace {

// The most tokens one microbatch holds: a uniform one up to the token
// budget, a request-batched one every running request's whole context (no
// more requests run than the trace has).
std::int64_t largest_microbatch(const config::InferenceConfig& inference, int context, std::size_t requests) {
  const std::int64_t running = std::min<std::int64_t>(inference.max_sequences, static_cast<std::int64_t>(requests));
  return std::max<std::int64_t>(inference.token_budget, running * context);
}

// A message's header: a few fields, four per token of the microbatch, one
// per request of the trace.
std::size_t header_entries(std::int64_t tokens, std::size_t requests) {
  return 8 + 4 * static_cast<std::size_t>(tokens) + requests;
}

// With t > 1 tensor ranks a stage's rank leads its tensor group: the
// scheduler and the mailbox run between the leads (tensor rank 0) as they do
// without tensor parallelism, and a lead shares each microbatch it runs with
// its group (a broadcast of the header and the input), whose ranks compute
// the stage with it (their heads' KV cache, their vocabulary shard); at the
// last stage the group gathers the logits for the lead to sample.
template <class Scalar>
class Server {
 public:
  Server(Pipeline<Scalar>& pipeline, const std::vector<Request>& requests, const config::InferenceConfig& inference)
      : pipeline_(pipeline),
        requests_(requests),
        inference_(inference),
        model_(pipeline.spec().model),
        placement_(pipeline.schedule().placement),
        group_(pipeline.grid().pipeline()),
        tensor_(pipeline.grid().tensor()),
        lead_(pipeline.grid().tensor_rank() == 0),
        collectives_(pipeline.grid(), exec_),
        me_(pipeline.grid().pipeline_rank()),
        root_(placement_.place(0).rank),
        blocks_(kv_cache_blocks<Scalar>(pipeline.spec(), inference, pipeline.grid().tensor_size())),
        most_tokens_(largest_microbatch(inference, model_.context, requests.size())),
        mailbox_(group_, pipeline.watchdog(), header_entries(most_tokens_, requests.size()),
                 static_cast<std::size_t>(most_tokens_) * static_cast<std::size_t>(model_.dim)) {
    for (int stage = 0; stage < placement_.stage_count(); ++stage) {
      if (placement_.place(stage).rank != me_) continue;
      chunk(stage).enable_kv_cache(blocks_, inference.block_tokens);
      tables_.emplace(stage, model::KvBlockTable(blocks_, inference.block_tokens));
    }
  }

  ServeResult run() {
    comm::barrier(group_);
    start_ = comm::wall_time();
    if (!lead_) {
      follow();
    } else if (me_ == root_) {
      schedule_requests();
    } else {
      for (;;) {
        const comm::Packet<Scalar> packet =
            mailbox_.receive("the next microbatch of kpipe serve", until_next_arrival());
        if (packet.header.at(0) == stop) break;
        handle(packet);
      }
    }
    if (lead_) share({stop}, {});
    mailbox_.complete_sends("kpipe serve's last messages");
    result_.work = gather_work();
    result_.kv_blocks = blocks_;
    result_.kv_dtype = tensor::name_of(kernels::stored_dtype<Scalar>(pipeline_.spec().stage.kernels.precision));
    result_.peak_kv_blocks = static_cast<int>(comm::max(group_, peak_blocks_));
    return std::move(result_);
  }

 private:
  model::Stage<Scalar>& chunk(int stage) { return pipeline_.chunk(placement_.place(stage).chunk); }
  double now() const { return comm::wall_time() - start_; }
  // How long the scheduler may rightly be idle: until the trace's next request arrives.
  double until_next_arrival() const {
    const double t = now();
    const auto next = std::upper_bound(requests_.begin(), requests_.end(), t,
                                       [](double at, const Request& request) { return at < request.arrival; });
    return next == requests_.end() ? 0.0 : next->arrival - t;
  }

  // The scheduler's loop: admit what has arrived, keep up to p microbatches
  // in flight, take back sampled tokens; stop every rank when all is served.
  void schedule_requests() {
    BatchScheduler scheduler(batch_limits(inference_, blocks_, model_.context, placement_.p()));
    scheduler_ = &scheduler;
    for (const Request& request : requests_) {
      ServedRequest& served = result_.requests.emplace_back();
      served.id = request.id;
      served.arrival = request.arrival;
      served.prompt = request.prompt;
      index_[request.id] = result_.requests.size() - 1;
    }
    std::size_t arrived = 0;
    double reported = 0.0;
    for (;;) {
      // A long trace replays in real time: say how far it is, so a long run is never a silent one.
      if (now() - reported >= progress_seconds) {
        reported = now();
        log::info("serve: {:.0f} s into the trace, {} of {} requests arrived, {} microbatches run", reported, arrived,
                  requests_.size(), result_.microbatches);
      }
      for (; arrived < requests_.size() && requests_[arrived].arrival <= now(); ++arrived) {
        if (auto reason = scheduler.arrive(requests_[arrived])) served(requests_[arrived].id).rejected = *reason;
      }
      while (scheduler.in_flight() < placement_.p()) {
        const std::optional<Microbatch> next = scheduler.next();
        if (!next) break;
        ++result_.microbatches;
        launch(*next);
      }
      if (arrived == requests_.size() && scheduler.idle()) break;
      if (scheduler.in_flight() > 0) {
        // Wait for the next sampled tokens: a request arriving meanwhile is
        // admitted one microbatch round trip late (milliseconds), a cheaper
        // price than keeping this rank's core busy polling.
        handle(mailbox_.receive("sampled tokens of kpipe serve"));
      } else if (arrived < requests_.size()) {
        // Nothing to do before the next request arrives.
        const double wait = requests_[arrived].arrival - now();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.01)));
      }
    }
    result_.seconds = now();
    for (int rank = 0; rank < placement_.p(); ++rank) {
      if (rank != me_) mailbox_.send(rank, {stop}, {});
    }
    scheduler_ = nullptr;
  }

  ServedRequest& served(int request) { return result_.requests.at(index_.at(request)); }

  void launch(const Microbatch& microbatch) {
    std::vector<Scalar> ids(microbatch.tokens.begin(), microbatch.tokens.end());
    run_stage(0, microbatch, ids);
  }

  void handle(const comm::Packet<Scalar>& packet) {
    if (packet.header.at(0) == sampled) {
      deliver(packet.header.at(1), std::vector<int>(packet.header.begin() + 2, packet.header.end()));
    } else {
      run_stage(packet.header.at(1), decode(packet.header), packet.values);
    }
  }

  // A lead's message to its tensor group: the header (stop, or a stage's
  // microbatch) and the stage input. Without tensor parallelism, nothing.
  void share(std::vector<std::int32_t> header, std::vector<Scalar> input) {
    if (comm::size_of(tensor_) == 1) return;
    std::vector<int> sizes = {static_cast<int>(header.size()), static_cast<int>(input.size())};
    comm::broadcast(tensor_, 0, sizes);
    comm::broadcast(tensor_, 0, header);
    comm::broadcast(tensor_, 0, input);
  }

  // A tensor rank other than the lead: runs each stage its lead shares, until
  // stop. Its lead may rightly be idle until the trace's next arrival.
  void follow() {
    for (;;) {
      std::vector<int> sizes(2);
      comm::broadcast(tensor_, 0, sizes, pipeline_.watchdog(), until_next_arrival());
      std::vector<std::int32_t> header(static_cast<std::size_t>(sizes[0]));
      std::vector<Scalar> input(static_cast<std::size_t>(sizes[1]));
      comm::broadcast(tensor_, 0, header);
      comm::broadcast(tensor_, 0, input);
      if (header.at(0) == stop) return;
      compute_stage(header.at(1), decode(header), input);
    }
  }

  // Runs model stage `stage` on the microbatch's tokens and passes the
  // result on: to the next stage's rank, or sampled back to the scheduler.
  void run_stage(int stage, const Microbatch& microbatch, const std::vector<Scalar>& input) {
    share(encode(stage, microbatch), input);
    const std::vector<Scalar> output = compute_stage(stage, microbatch, input);
    if (stage + 1 < placement_.stage_count()) {
      const int next = placement_.place(stage + 1).rank;
      if (next == me_) return run_stage(stage + 1, microbatch, output);
      return mailbox_.send(next, encode(stage + 1, microbatch), output);
    }
    std::vector<std::int32_t> header = {sampled, microbatch.id};
    const auto chosen = sample(microbatch, output);
    header.insert(header.end(), chosen.begin(), chosen.end());
    if (root_ == me_) return deliver(microbatch.id, chosen);
    mailbox_.send(root_, header, {});
  }

  // Stage `stage` on the microbatch, on every rank of the tensor group: its
  // output, the last stage's logits gathered whole.
  std::vector<Scalar> compute_stage(int stage, const Microbatch& microbatch, const std::vector<Scalar>& input) {
    model::KvBlockTable& table = tables_.at(stage);
    for (int request : microbatch.released) table.release(request);
    model::TokenBatch tokens;
    for (const Segment& segment : microbatch.segments) {
      table.extend(segment.request, segment.start + segment.length);
      for (int t = segment.start; t < segment.start + segment.length; ++t) {
        tokens.sequence.push_back(segment.request);
        tokens.position.push_back(t);
      }
    }
    peak_blocks_ = std::max(peak_blocks_, table.blocks() - table.free_blocks());
    const int n = static_cast<int>(tokens.position.size());
    model::Stage<Scalar>& compute = chunk(stage);
    const double begin = now();
    const auto X = tensor::uninitialized_matrix<Scalar>("kpipe::runtime::serve_input", n, compute.token_input_width());
    tensor::from_host<Scalar>(input, X);
    const auto Y =
        tensor::uninitialized_matrix<Scalar>("kpipe::runtime::serve_output", n, compute.token_output_width());
    compute.infer(table, tokens, X, Y);
    const bool logits = stage + 1 == placement_.stage_count();
    const std::vector<Scalar> output =
        tensor::to_host<Scalar>(logits ? model::gather_shards<Scalar>(exec_, collectives_, vocabulary_shard(), Y) : Y);
    if (lead_) work_.push_back({me_, stage, microbatch.id, n, attended_positions(microbatch), begin, now()});
    return output;
  }

  // This rank's columns of the logits: its tensor rank's share of the padded vocabulary.
  model::Shard vocabulary_shard() const {
    return model::Shard::along(1, pipeline_.grid().tensor_rank(), pipeline_.grid().tensor_size());
  }

  // One token per sampling segment, from the logits of its last token. The
  // draw depends on (seed, request, position) only, never on the batching.
  std::vector<int> sample(const Microbatch& microbatch, const std::vector<Scalar>& logits) const {
    std::vector<int> chosen;
    std::size_t row = 0;
    for (const Segment& segment : microbatch.segments) {
      row += static_cast<std::size_t>(segment.length);
      if (!segment.sample) continue;
      // A row holds the padded vocabulary's logits; the padding is never a candidate.
      const auto stride = static_cast<std::size_t>(model_.padded_vocab(pipeline_.grid().tensor_size()));
      const auto first = logits.begin() + static_cast<std::ptrdiff_t>((row - 1) * stride);
      const std::vector<double> scores(first, first + model_.vocab);
      const std::uint64_t stream = kernels::stream_key(inference_.seed, 0x73657276, segment.request);  // "serv"
      const double u = kernels::uniform01(stream, static_cast<std::uint64_t>(segment.start + segment.length));
      chosen.push_back(sample_token(scores, inference_.temperature, u));
    }
    return chosen;
  }

  void deliver(int microbatch, const std::vector<int>& tokens) {
    const double at = now();
    for (const TokenEvent& event : scheduler_->complete(microbatch, tokens)) {
      ServedRequest& request = served(event.request);
      request.generated.push_back(event.token);
      request.token_times.push_back(at);
    }
  }

  // Every rank's compute records, on the scheduler's rank.
  std::vector<StageWork> gather_work() const {
    std::vector<double> mine;
    for (const StageWork& w : work_) {
      mine.insert(mine.end(),
                  {static_cast<double>(w.rank), static_cast<double>(w.stage), static_cast<double>(w.microbatch),
                   static_cast<double>(w.tokens), static_cast<double>(w.attended), w.start, w.end});
    }
    const std::vector<double> all = comm::gather_varying_to_root(group_, mine);
    std::vector<StageWork> work;
    for (std::size_t i = 0; i + 7 <= all.size(); i += 7) {
      work.push_back({static_cast<int>(all[i]), static_cast<int>(all[i + 1]), static_cast<int>(all[i + 2]),
                      static_cast<int>(all[i + 3]), static_cast<std::int64_t>(all[i + 4]), all[i + 5], all[i + 6]});
    }
    return work;
  }

  Pipeline<Scalar>& pipeline_;
  const std::vector<Request>& requests_;
  const config::InferenceConfig& inference_;
  const model::ModelSpec& model_;
  const schedule::Placement& placement_;
  comm::Communicator group_;
  comm::Communicator tensor_;
  bool lead_;  // tensor rank 0: runs the stage's part in the pipeline
  tensor::ExecContext exec_;
  GridCollectives collectives_;
  int me_;
  int root_;
  int blocks_;
  std::int64_t most_tokens_;
  comm::Mailbox<Scalar> mailbox_;
  std::map<int, model::KvBlockTable> tables_;  // per model stage this rank holds
  BatchScheduler* scheduler_ = nullptr;        // on the scheduler's rank while it serves
  std::map<int, std::size_t> index_;           // request id -> its place in result_.requests
  std::vector<StageWork> work_;
  int peak_blocks_ = 0;
  ServeResult result_;
  double start_ = 0;
};

}  // namespace

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(values.size())));
  return values.at(std::max<std::size_t>(rank, 1) - 1);
}

double measured_bubble(const std::vector<StageWork>& work) {
  struct Span {
    double first = 1e300, last = -1e300, busy = 0;
  };
  std::map<int, Span> ranks;
  for (const StageWork& w : work) {
    Span& span = ranks[w.rank];
    span.first = std::min(span.first, w.start);
    span.last = std::max(span.last, w.end);
    span.busy += w.end - w.start;
  }
  double idle = 0, busy = 0;
  for (const auto& [rank, span] : ranks) {
    idle += span.last - span.first - span.busy;
    busy += span.busy;
  }
  return busy > 0 ? idle / busy : 0.0;
}

void require_servable(const config::PipelineConfig& pipeline) {
  if (pipeline.tensor_parallel == 1 || !pipeline.sequence_parallel) return;
  throw input_error(
      "kpipe serve and generate run whole token rows on every tensor rank; set pipeline.sequence_parallel = false");
}

template <class Scalar>
ServeResult serve(Pipeline<Scalar>& pipeline, const std::vector<Request>& requests,
                  const config::InferenceConfig& inference) {
  // Set-up may fail alike on every rank (the deck) or on one (an allocation):
  // every rank agrees, and the job ends with one line.
  const auto server = comm::collectively(pipeline.grid().world(), pipeline.watchdog(), "kpipe serve's set-up", [&] {
    fault::inject(fault::Phase::serve_setup, pipeline.grid().world_rank());
    const model::ModelSpec& model = pipeline.spec().model;
    if (!model.token_sequences()) {
      throw input_error(fmt::format("kpipe serve generates text with a language model; set model.kind = {}",
                                    config::token_family_choices()));
    }
    if (pipeline.grid().replicas() != 1) {
      throw input_error(fmt::format("kpipe serve runs one pipeline; set pipeline.data_parallel = 1 (it is {})",
                                    pipeline.grid().replicas()));
    }
    const std::int64_t tokens = largest_microbatch(inference, model.context, requests.size());
    const std::size_t bytes = comm::Mailbox<Scalar>::capacity(header_entries(tokens, requests.size()),
                                                              static_cast<std::size_t>(tokens * model.dim));
    if (bytes > static_cast<std::size_t>(limits::message_bytes)) {
      throw input_error(fmt::format(
          "the largest microbatch, {} tokens (inference.token_budget = {}, or inference.max_sequences = {} requests "
          "of model.context = {}) of model.dim = {} values, is {} bytes, more than one message between stages "
          "carries ({}); lower inference.token_budget or inference.max_sequences",
          tokens, inference.token_budget, inference.max_sequences, model.context, model.dim, bytes,
          limits::message_bytes));
    }
    return std::make_unique<Server<Scalar>>(pipeline, requests, inference);
  });
  return server->run();
}

template ServeResult serve<float>(Pipeline<float>&, const std::vector<Request>&, const config::InferenceConfig&);
template ServeResult serve<double>(Pipeline<double>&, const std::vector<Request>&, const config::InferenceConfig&);

}  // namespace kpipe::runtime
