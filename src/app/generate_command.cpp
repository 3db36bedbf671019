// `kpipe generate DECK prompt=... tokens=N temperature=T seed=S`: samples text
// from a transformer deck's weights (model.seed's, or checkpoint.restart's)
// with the model stages on the ranks that hold them.

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <type_traits>

#include "commands.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/runtime/data/token_source.hpp"
#include "kpipe/runtime/serving/generation.hpp"
#include "kpipe/runtime/serving/serve.hpp"
#include "kpipe/runtime/training.hpp"

namespace kpipe::app {

namespace {

using Pipeline = runtime::Pipeline<float>;

// `key=value` of the generate command as a number in [low, high].
template <class Number>
Number parse_number(const std::string& key, const std::string& value, Number low, Number high) {
  Number number{};
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc() || end != value.data() + value.size() || !(number >= low && number <= high)) {
    throw input_error(fmt::format("{}={} is not a number from {} to {}; e.g. {}={}", key, printable(value), low, high,
                                  key, std::is_integral_v<Number> ? "200" : "0.8"));
  }
  return number;
}

}  // namespace

GenerateOptions split_generate_arguments(DeckArguments arguments) {
  GenerateOptions options;
  std::vector<std::string> overrides;
  for (const std::string& argument : arguments.overrides) {
    const auto equals = argument.find('=');
    const std::string key = argument.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : argument.substr(equals + 1);
    if (key == "prompt") {
      options.prompt = value;
    } else if (key == "tokens") {
      options.sampling.tokens = parse_number<int>(key, value, 0, 1 << 20);
    } else if (key == "temperature") {
      options.sampling.temperature = parse_number<double>(key, value, 0.0, 100.0);
    } else if (key == "seed") {
      options.sampling.seed = static_cast<std::uint64_t>(parse_number<std::int64_t>(key, value, 0, 2147483647));
    } else {
      overrides.push_back(argument);
    }
  }
  arguments.overrides = overrides;
  options.deck = arguments;
  return options;
}

int generate_command(const runtime::Environment&, const GenerateOptions& options) {
  const LoadedDeck loaded = load_deck(options.deck);
  const config::RunConfig& config = loaded.config;
  if (!config.model.token_sequences()) {
    throw input_error(
        fmt::format("{} has model.kind = \"{}\"; kpipe generate samples text from a language model: model.kind = {}",
                    options.deck.path, config.model.kind, config::token_family_choices()));
  }
  runtime::require_servable(config.pipeline);
  const auto tokenizer = runtime::load_tokenizer(config.data, config.model.vocab);
  const std::vector<std::int32_t> prompt = tokenizer->encode(options.prompt, "the prompt");
  const auto owned = runtime::build_pipeline(config, runtime::Mode::infer);
  Pipeline& pipeline = *owned;
  if (config.checkpoint.restart.empty()) {
    log::info("weights: initialised from model.seed = {} (set checkpoint.restart to sample from a checkpoint)",
              config.model.seed);
  }
  restore(*owned, config.checkpoint);
  log::info("generate: {} tokens at temperature {} (seed {}) after a prompt of {} tokens", options.sampling.tokens,
            options.sampling.temperature, options.sampling.seed, prompt.size());
  const bool root = log::is_root();
  if (root) std::fputs(options.prompt.c_str(), stdout);
  const double start = comm::wall_time();
  // Subwords are decoded in context (a piece alone loses the space before
  // it): each new token prints what it adds to the decoded text so far.
  std::vector<std::int32_t> text_tokens = prompt;
  std::size_t printed = tokenizer->decode(prompt).size();
  runtime::abort_on_error([&] {
    return runtime::generate_tokens(pipeline, prompt, options.sampling, config.inference,
                                    [&](const std::vector<int>& tokens) {
                                      if (!root) return;
                                      text_tokens.insert(text_tokens.end(), tokens.begin(), tokens.end());
                                      const std::string text = tokenizer->decode(text_tokens);
                                      if (text.size() > printed) std::fputs(text.c_str() + printed, stdout);
                                      printed = std::max(printed, text.size());
                                      std::fflush(stdout);
                                    });
  });
  if (root) std::fputs("\n", stdout);
  const double seconds = comm::wall_time() - start;
  log::info("generate: {} tokens in {:.2f} s ({:.1f} tokens/s)", options.sampling.tokens, seconds,
            options.sampling.tokens / std::max(seconds, 1e-12));
  return 0;
}

}  // namespace kpipe::app
