#pragma once
// The request trace `kpipe serve` replays: JSON lines, one request each,
//   {"arrival": 0.25, "prompt": "In the beginning", "max_new_tokens": 32}
//   {"arrival": 0.5, "prompt_tokens": [5, 17, 2], "max_new_tokens": 8}
// with arrival in seconds from the start (non-decreasing), the prompt as text
// (encoded with the model's character vocabulary) or as token ids, and
// max_new_tokens >= 1. Blank lines are skipped. A request whose prompt and
// output do not fit the model's context gets max_new_tokens cut to fit.
//
// A bad line does not discard the lines before it: the requests before the
// first bad line come back with the error, so a server can serve them and
// report them before it exits with the input error (exit code 2).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/model/data/tokenizer.hpp"

namespace kpipe::runtime {

struct Request {
  int id = 0;            // its index in the trace
  double arrival = 0.0;  // seconds from the start of the replay
  std::vector<int> prompt;
  int max_new_tokens = 1;
};

// A request whose max_new_tokens was cut to context - prompt length.
struct Clipped {
  int request = 0;
  int requested = 0;  // max_new_tokens as the trace asked
};

struct Trace {
  std::vector<Request> requests;     // every good line before the first bad one
  std::vector<Clipped> clipped;      // in request order
  std::optional<std::string> error;  // the first bad line: "<file>:<line>: <what>; <fix>"
};

// The requests of `text`, named `name` in errors, for a model with this
// vocabulary and context (tokens per sequence).
Trace parse_request_trace(std::string_view text, std::string_view name, const model::Tokenizer& vocabulary,
                          int context);
// The text of the trace file `path` (an input error when it cannot be read
// as text), for a caller that reads on one rank and broadcasts.
std::string read_request_trace_text(const std::string& path);
// The requests of the file `path`. A file that cannot be read as text is
// an input error (thrown: there is no request to serve).
Trace read_request_trace(const std::string& path, const model::Tokenizer& vocabulary, int context);

}  // namespace kpipe::runtime
