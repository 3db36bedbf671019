// Fuzzes the request-trace reader of `kpipe serve` and `plan requests=`: JSON
// lines with arrivals, prompts and token counts, for a character model with
// the vocabulary and context of tests/data/lm/genesis.toml's scale.

#include <cmath>
#include <string>

#include "fuzz_target.hpp"
#include "kpipe/model/data/vocabulary.hpp"
#include "kpipe/runtime/serving/request_trace.hpp"

namespace {

const kpipe::model::Vocabulary& vocabulary() {
  static const auto* v =
      new kpipe::model::Vocabulary(kpipe::model::Vocabulary::of_text("abcdefghijklmnopqrstuvwxyz ,.:;!?'ABCDEFGHIJ\n"));
  return *v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr int context = 64;
  kpipe::fuzz::expect_accepted_or_refused([&] {
    const kpipe::runtime::Trace trace =
        kpipe::runtime::parse_request_trace(kpipe::fuzz::text_of(data, size), "fuzz.jsonl", vocabulary(), context);
    if (trace.error) kpipe::fuzz::check_one_line(*trace.error);
    // What the serving scheduler relies on for every request it is given.
    for (const auto& request : trace.requests) {
      const bool fits = !request.prompt.empty() && request.max_new_tokens >= 1 &&
                        static_cast<int>(request.prompt.size()) + request.max_new_tokens <= context;
      if (!fits || !std::isfinite(request.arrival) || request.arrival < 0.0)
        kpipe::fuzz::fail("a request the reader should have refused or clipped", std::to_string(request.id));
      for (const int token : request.prompt)
        if (token < 0 || token >= vocabulary().size()) kpipe::fuzz::fail("a token outside the vocabulary", "");
    }
  });
  return 0;
}
