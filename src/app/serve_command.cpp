// `kpipe serve DECK requests=FILE [key=value ...] [--json FILE] [--svg FILE]`:
// replays a request trace through the pipelined transformer (runtime/serve)
// and reports throughput, latencies and the pipeline bubble, measured and as
// the serving simulator predicts it from the measured stage costs.

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "kpipe/comm/broadcast.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/runtime/data/token_source.hpp"
#include "kpipe/runtime/serving/request_trace.hpp"
#include "kpipe/runtime/serving/serve.hpp"
#include "kpipe/runtime/serving/serve_prediction.hpp"
#include "kpipe/runtime/training.hpp"
#include "kpipe/schedule/render.hpp"

namespace kpipe::app {

namespace {

struct Latencies {
  std::vector<double> first_token;     // arrival to first token
  std::vector<double> between_tokens;  // consecutive tokens of one request
  std::int64_t tokens = 0;
};

Latencies latencies(const runtime::ServeResult& result) {
  Latencies l;
  for (const runtime::ServedRequest& r : result.requests) {
    l.tokens += static_cast<std::int64_t>(r.generated.size());
    if (r.token_times.empty()) continue;
    l.first_token.push_back(r.token_times.front() - r.arrival);
    for (std::size_t t = 1; t < r.token_times.size(); ++t) {
      l.between_tokens.push_back(r.token_times[t] - r.token_times[t - 1]);
    }
  }
  return l;
}

nlohmann::json percentiles(const std::vector<double>& values) {
  return {{"p50", runtime::percentile(values, 0.5)},
          {"p90", runtime::percentile(values, 0.9)},
          {"p99", runtime::percentile(values, 0.99)}};
}

}  // namespace

std::string take_requests_argument(DeckArguments& arguments) {
  std::string path;
  std::vector<std::string> overrides;
  for (const std::string& argument : arguments.overrides) {
    if (argument.rfind("requests=", 0) == 0) {
      path = argument.substr(9);
    } else {
      overrides.push_back(argument);
    }
  }
  arguments.overrides = overrides;
  return path;
}

ServeOptions split_serve_arguments(DeckArguments arguments) {
  ServeOptions options;
  options.requests_path = take_requests_argument(arguments);
  if (options.requests_path.empty()) {
    throw input_error(
        "kpipe serve needs a request trace: requests=FILE (JSON lines, see examples/inference/README.md)");
  }
  options.deck = arguments;
  return options;
}

int serve_command(const runtime::Environment&, const ServeOptions& options) {
  protect_input(options.requests_path);
  require_writable(options.json_path, "--json");
  require_writable(options.svg_path, "--svg");
  const LoadedDeck loaded = load_deck(options.deck);
  const config::RunConfig& config = loaded.config;
  if (!config.model.token_sequences()) {
    throw input_error(
        fmt::format("{} has model.kind = \"{}\"; kpipe serve generates text with a language model: model.kind = {}",
                    options.deck.path, config.model.kind, config::token_family_choices()));
  }
  runtime::require_servable(config.pipeline);
  const auto tokenizer = runtime::load_tokenizer(config.data, config.model.vocab);
  const std::string text =
      comm::broadcast_from_root(comm::world(), [&] { return runtime::read_request_trace_text(options.requests_path); });
  const runtime::Trace trace =
      runtime::parse_request_trace(text, options.requests_path, *tokenizer, config.model.context);
  for (const runtime::Clipped& clipped : trace.clipped) {
    log::info("serve: request {} asks for {} new tokens; {} fit the context of {}", clipped.request, clipped.requested,
              trace.requests.at(static_cast<std::size_t>(clipped.request)).max_new_tokens, config.model.context);
  }
  const auto owned = runtime::build_pipeline(config, runtime::Mode::infer);
  restore(*owned, config.checkpoint);
  const std::string batching = loaded.deck.string("inference.batching");
  const int t = config.pipeline.tensor_parallel;
  log::info("serve: {} requests from {}, batching \"{}\", token budget {}, KV cache {} MiB per stage{}",
            trace.requests.size(), options.requests_path, batching, config.inference.token_budget,
            config.inference.kv_cache_mib,
            t > 1 ? fmt::format(" and tensor rank (each of the {} holds its {} heads' keys and values)", t,
                                config.model.heads / t)
                  : "");
  const runtime::ServeResult result =
      runtime::abort_on_error([&] { return runtime::serve(*owned, trace.requests, config.inference); });
  if (log::is_root()) {
    const Latencies l = latencies(result);
    const double measured = runtime::measured_bubble(result.work);
    const int stages = owned->schedule().placement.stage_count();
    const runtime::ServePrediction predicted =
        runtime::predict_serving(trace.requests,
                                 runtime::batch_limits(config.inference, result.kv_blocks, config.model.context,
                                                       owned->schedule().placement.p()),
                                 result, stages);
    std::size_t rejected = 0;
    for (const auto& r : result.requests) rejected += !r.rejected.empty();
    for (const auto& r : result.requests) {
      if (!r.rejected.empty()) log::warning("request {} rejected: {}", r.id, r.rejected);
    }
    const double rate = l.tokens / std::max(result.seconds, 1e-12);
    log::info("serve: {} requests ({} rejected), {} tokens in {:.2f} s: {:.1f} tokens/s in {} microbatches",
              result.requests.size(), rejected, l.tokens, result.seconds, rate, result.microbatches);
    log::info("serve: KV cache {} blocks of {} tokens per stage{} in {}, at most {} in use", result.kv_blocks,
              config.inference.block_tokens, t > 1 ? " and tensor rank" : "", result.kv_dtype, result.peak_kv_blocks);
    log::info(
        "serve: time to first token p50 {:.4f} p90 {:.4f} p99 {:.4f} s; between tokens p50 {:.4f} p90 {:.4f} "
        "p99 {:.4f} s",
        runtime::percentile(l.first_token, 0.5), runtime::percentile(l.first_token, 0.9),
        runtime::percentile(l.first_token, 0.99), runtime::percentile(l.between_tokens, 0.5),
        runtime::percentile(l.between_tokens, 0.9), runtime::percentile(l.between_tokens, 0.99));
    log::info("serve: pipeline bubble (idle/busy) measured {:.3f}, simulated {:.3f}; tokens/s simulated {:.1f}",
              measured, predicted.simulation.bubble(), predicted.tokens_per_second);
    write_output(options.svg_path, "--svg", [&](std::ostream& out) {
      schedule::Timeline run = schedule::serve_timeline(runtime::as_simulation(result, stages), batching, "s");
      run.label = fmt::format("measured, {} batching", batching);
      schedule::Timeline model = schedule::serve_timeline(predicted.simulation, batching, "s");
      model.label = "simulated with the fitted costs";
      schedule::write_svg_timelines(out, {run, model});
    });
    write_output(options.json_path, "--json", [&](std::ostream& out) {
      nlohmann::json requests = nlohmann::json::array();
      for (const auto& r : result.requests) {
        requests.push_back({{"id", r.id},
                            {"arrival", r.arrival},
                            {"prompt_tokens", r.prompt.size()},
                            {"generated", r.generated},
                            {"text", tokenizer->decode(r.generated)},
                            {"token_times", r.token_times},
                            {"rejected", r.rejected}});
      }
      nlohmann::json stage_costs = nlohmann::json::array();
      for (const schedule::ServeCosts& c : predicted.costs) {
        stage_costs.push_back({{"fixed", c.fixed}, {"per_token", c.per_token}, {"per_context", c.per_context}});
      }
      const nlohmann::json json = {{"command", "serve"},
                                   {"deck", options.deck.path},
                                   {"requests_file", options.requests_path},
                                   {"batching", batching},
                                   {"token_budget", config.inference.token_budget},
                                   {"stages", owned->schedule().placement.stage_count()},
                                   {"ranks", owned->schedule().placement.p()},
                                   {"seconds", result.seconds},
                                   {"tokens", l.tokens},
                                   {"tokens_per_second", rate},
                                   {"microbatches", result.microbatches},
                                   {"kv_cache",
                                    {{"blocks", result.kv_blocks},
                                     {"block_tokens", config.inference.block_tokens},
                                     {"peak_blocks", result.peak_kv_blocks},
                                     {"dtype", result.kv_dtype}}},
                                   {"time_to_first_token", percentiles(l.first_token)},
                                   {"time_between_tokens", percentiles(l.between_tokens)},
                                   {"bubble", {{"measured", measured}, {"simulated", predicted.simulation.bubble()}}},
                                   {"simulated_tokens_per_second", predicted.tokens_per_second},
                                   {"stage_costs", stage_costs},
                                   {"transfer_seconds", predicted.transfer},
                                   {"requests", requests}};
      out << json.dump(2) << '\n';
    });
  }
  if (trace.error) throw input_error(*trace.error);
  return 0;
}

}  // namespace kpipe::app
