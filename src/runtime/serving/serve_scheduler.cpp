#include "kpipe/runtime/serving/serve_scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "kpipe/core/error.hpp"

namespace kpipe::runtime {

std::int64_t attended_positions(const Microbatch& microbatch) {
  std::int64_t sum = 0;
  for (const Segment& s : microbatch.segments) {
    // Position i attends to i + 1 positions: Σ_{i=start}^{start+length-1} (i + 1).
    sum += static_cast<std::int64_t>(s.length) * s.start + static_cast<std::int64_t>(s.length) * (s.length + 1) / 2;
  }
  return sum;
}

BatchScheduler::BatchScheduler(const BatchLimits& limits) : limits_(limits), free_blocks_(limits.kv_blocks) {
  if (limits.token_budget < 1 || limits.max_sequences < 1 || limits.block_tokens < 1 || limits.context < 1 ||
      limits.kv_blocks < 0) {
    throw runtime_error(fmt::format(
        "BatchScheduler: token_budget {}, max_sequences {}, block_tokens {} and context {} must be >= 1, kv_blocks {} "
        ">= 0",
        limits.token_budget, limits.max_sequences, limits.block_tokens, limits.context, limits.kv_blocks));
  }
}

int BatchScheduler::blocks_needed(const Request& request) const {
  const std::int64_t tokens = static_cast<std::int64_t>(request.prompt.size()) + request.max_new_tokens - 1;
  return static_cast<int>((tokens + limits_.block_tokens - 1) / limits_.block_tokens);
}

std::optional<std::string> BatchScheduler::arrive(const Request& request) {
  const auto length = static_cast<std::int64_t>(request.prompt.size());
  if (length < 1 || request.max_new_tokens < 1 || length + request.max_new_tokens > limits_.context) {
    return fmt::format(
        "request {} refused: {} prompt tokens and {} new tokens do not fit the model's context of {} (a request "
        "needs at least one of each)",
        request.id, length, request.max_new_tokens, limits_.context);
  }
  if (blocks_needed(request) > limits_.kv_blocks) {
    return fmt::format(
        "request {} refused: its {} prompt and {} new tokens need {} KV blocks of {} tokens, but the cache holds {}; "
        "raise inference.kv_cache_mib or shorten the request",
        request.id, length, request.max_new_tokens, blocks_needed(request), limits_.block_tokens, limits_.kv_blocks);
  }
  if (!present_.insert(request.id).second) {
    throw runtime_error(fmt::format("BatchScheduler: request {} arrived twice", request.id));
  }
  waiting_.push_back(request);
  return std::nullopt;
}

// First come, first served: a request that does not fit yet holds back the later ones.
void BatchScheduler::admit() {
  while (!waiting_.empty() && running() < limits_.max_sequences && blocks_needed(waiting_.front()) <= free_blocks_) {
    Sequence s;
    s.request = std::move(waiting_.front());
    waiting_.pop_front();
    s.blocks = blocks_needed(s.request);
    free_blocks_ -= s.blocks;
    running_.push_back(std::move(s));
  }
}

// The next `length` positions of `sequence`: prompt tokens while it prefills, else its last sampled token.
void BatchScheduler::add(Microbatch& microbatch, Sequence& sequence, int length) const {
  const Request& r = sequence.request;
  const int prompt = static_cast<int>(r.prompt.size());
  const int start = sequence.sent;
  microbatch.segments.push_back({r.id, start, length, start + length >= prompt});
  if (start < prompt) {
    microbatch.tokens.insert(microbatch.tokens.end(), r.prompt.begin() + start, r.prompt.begin() + start + length);
  } else {
    microbatch.tokens.push_back(sequence.last_token);
  }
  sequence.sent += length;
  sequence.in_flight = true;
}

int BatchScheduler::decode_cap() const {
  const int depth = std::max(limits_.pipeline_depth, 1);
  return (static_cast<int>(running_.size()) + depth - 1) / depth;
}

void BatchScheduler::request_batch(Microbatch& microbatch) {
  const bool prefill =
      std::any_of(running_.begin(), running_.end(), [](const Sequence& s) { return !s.in_flight && s.prefilling(); });
  int decodes = decode_cap();
  for (Sequence& s : running_) {
    if (s.in_flight || s.prefilling() != prefill) continue;
    if (!prefill && decodes-- == 0) return;
    add(microbatch, s, prefill ? static_cast<int>(s.request.prompt.size()) : 1);
  }
}

void BatchScheduler::uniform_batch(Microbatch& microbatch) {
  int budget = limits_.token_budget;
  int decodes = decode_cap();
  for (Sequence& s : running_) {
    if (budget == 0 || decodes == 0) break;
    if (s.in_flight || s.prefilling()) continue;
    add(microbatch, s, 1);
    --budget;
    --decodes;
  }
  for (Sequence& s : running_) {
    if (budget == 0) return;
    if (s.in_flight || !s.prefilling()) continue;
    const int chunk = std::min(budget, static_cast<int>(s.request.prompt.size()) - s.sent);
    add(microbatch, s, chunk);
    budget -= chunk;
  }
}

std::optional<Microbatch> BatchScheduler::next() {
  admit();
  Microbatch microbatch;
  if (limits_.policy == config::Batching::request) {
    request_batch(microbatch);
  } else {
    uniform_batch(microbatch);
  }
  if (microbatch.segments.empty()) return std::nullopt;
  microbatch.id = next_id_++;
  microbatch.released = std::exchange(released_, {});
  flight_.emplace(microbatch.id, microbatch.segments);
  return microbatch;
}

BatchScheduler::Sequence& BatchScheduler::sequence(int request) {
  const auto it =
      std::find_if(running_.begin(), running_.end(), [&](const Sequence& s) { return s.request.id == request; });
  if (it == running_.end()) throw runtime_error(fmt::format("BatchScheduler: request {} is not running", request));
  return *it;
}

std::vector<TokenEvent> BatchScheduler::complete(int id, const std::vector<int>& sampled) {
  const auto flight = flight_.find(id);
  if (flight == flight_.end()) throw runtime_error(fmt::format("BatchScheduler: microbatch {} is not in flight", id));
  const std::vector<Segment>& segments = flight->second;
  const auto samples = std::count_if(segments.begin(), segments.end(), [](const Segment& s) { return s.sample; });
  if (static_cast<std::size_t>(samples) != sampled.size()) {
    throw runtime_error(
        fmt::format("BatchScheduler: microbatch {} samples {} tokens, but {} came back", id, samples, sampled.size()));
  }
  std::vector<TokenEvent> events;
  for (const Segment& segment : segments) {
    Sequence& s = sequence(segment.request);
    s.in_flight = false;
    if (!segment.sample) continue;
    s.last_token = sampled[events.size()];
    ++s.generated;
    const bool finished = s.generated == s.request.max_new_tokens;
    events.push_back({segment.request, s.last_token, finished});
    if (!finished) continue;
    free_blocks_ += s.blocks;
    present_.erase(segment.request);
    released_.push_back(segment.request);
    running_.erase(running_.begin() + (&s - running_.data()));
  }
  flight_.erase(flight);
  return events;
}

}  // namespace kpipe::runtime
