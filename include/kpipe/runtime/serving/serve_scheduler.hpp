#pragma once
// The batching scheduler of `kpipe serve` (DESIGN.md §5b): which tokens of
// which requests go into the next microbatch. It runs on the host of the
// first pipeline rank and knows no model, only token counts and KV blocks, so
// it is tested, and simulated (schedule/serve_simulate.hpp), without one.
//
// Policies (inference.batching):
//   request  prefill first: while an admitted request waits for its prefill,
//            a microbatch holds whole prompts of every such request; else it
//            holds decodes of ready requests. Microbatches of very unequal
//            work: the baseline.
//   uniform  Sarathi-Serve: decodes of ready requests, then prefill
//            chunks of admitted requests in arrival order up to token_budget
//            tokens, a prompt split over microbatches where it does not fit.
// A request is in at most one microbatch in flight: its next tokens depend
// on the previous ones. Either policy puts at most ceil(running /
// pipeline_depth) decodes in a microbatch, so the running requests spread
// over the microbatches in flight (as vLLM's virtual engines do) instead of
// travelling as one group with the other stages idle.
//
// KV admission: a request reserves, when admitted, the blocks of every token
// the cache will ever hold for it, ceil((prompt + max_new_tokens - 1) /
// block_tokens) (its last sampled token is never fed back), so admitted
// requests always fit and nothing deadlocks; the next request in arrival
// order waits until that many blocks are free. The stages replay each
// microbatch on their own block tables: release every `released` request,
// then extend each segment's request to start + length tokens. Only block
// counts matter here, so any allocator the stages share agrees with it.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/serving/request_trace.hpp"

namespace kpipe::runtime {

// `length` tokens of request `request` at positions start .. start+length-1.
struct Segment {
  int request = 0;
  int start = 0;
  int length = 0;
  bool sample = false;  // the last stage samples a token after the last position (a final prefill chunk or a decode)
};

struct Microbatch {
  int id = 0;  // 0, 1, 2, ... in the order next() formed them
  std::vector<Segment> segments;
  std::vector<int> tokens;    // every segment's token ids in order: prompt tokens, or the last sampled one
  std::vector<int> released;  // requests finished before this microbatch: free their blocks before running it
};

// Σ over a microbatch's positions of the positions each attends to (itself
// and every earlier one of its request): its attention work.
std::int64_t attended_positions(const Microbatch& microbatch);

// A token the last stage sampled, in the order complete() was given them.
struct TokenEvent {
  int request = 0;
  int token = 0;
  bool finished = false;  // the request's max_new_tokens-th token: it is done
};

struct BatchLimits {
  config::Batching policy = config::Batching::uniform;
  int token_budget = 64;   // uniform: tokens per microbatch
  int max_sequences = 16;  // admitted requests at once
  int kv_blocks = 0;       // blocks of the KV cache (of the smallest stage)
  int block_tokens = 16;
  int context = 64;  // the model's positions: prompt + max_new_tokens must fit
  // Microbatches in flight at once (p): decodes spread over that many, so a
  // pipeline full of decoding requests keeps every stage busy.
  int pipeline_depth = 1;
};

class BatchScheduler {
 public:
  // Throws a runtime error when a limit is < 1 (kv_blocks may be 0: every request is then refused).
  explicit BatchScheduler(const BatchLimits& limits);

  // Queues a request (ids unique), or refuses one that can never be served,
  // saying why: its KV blocks exceed the whole cache, or it does not fit the
  // context. nullopt: queued.
  std::optional<std::string> arrive(const Request& request);
  // The next microbatch of work not in flight, or nullopt when nothing can run now.
  std::optional<Microbatch> next();
  // The tokens sampled after microbatch `id`, one per `sample` segment in order.
  std::vector<TokenEvent> complete(int id, const std::vector<int>& sampled);

  bool idle() const { return waiting_.empty() && running_.empty(); }  // nothing waiting or admitted
  int in_flight() const { return static_cast<int>(flight_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int running() const { return static_cast<int>(running_.size()); }
  int free_blocks() const { return free_blocks_; }
  // Blocks a request reserves at admission.
  int blocks_needed(const Request& request) const;

 private:
  struct Sequence {
    Request request;
    int sent = 0;       // positions handed to microbatches so far
    int generated = 0;  // tokens sampled
    int last_token = 0;
    int blocks = 0;  // reserved at admission
    bool in_flight = false;
    bool prefilling() const { return sent < static_cast<int>(request.prompt.size()); }
  };

  void admit();
  int decode_cap() const;
  void add(Microbatch& microbatch, Sequence& sequence, int length) const;
  void request_batch(Microbatch& microbatch);
  void uniform_batch(Microbatch& microbatch);
  Sequence& sequence(int request);

  BatchLimits limits_;
  std::deque<Request> waiting_;
  std::vector<Sequence> running_;    // in admission (= arrival) order
  std::unordered_set<int> present_;  // the ids waiting or running: a request arrives once
  std::map<int, std::vector<Segment>> flight_;
  std::vector<int> released_;  // finished since the last microbatch
  int free_blocks_ = 0;
  int next_id_ = 0;
};

}  // namespace kpipe::runtime
