#include "kpipe/runtime/serving/request_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::runtime {

namespace {

using json = nlohmann::json;

constexpr const char* example = R"({"arrival": 0.5, "prompt": "In the beginning", "max_new_tokens": 32})";
constexpr std::size_t shown_value_bytes = 40;  // a value quoted in an error

// A value from the file as a message may quote it: short and printable.
std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > shown_value_bytes) text = text.substr(0, shown_value_bytes) + "...";
  return printable(text);
}

std::vector<int> prompt_tokens(const json& ids, int vocab) {
  if (!ids.is_array()) {
    throw input_error(fmt::format("\"prompt_tokens\" must be a list of token ids, got {}", shown(ids)));
  }
  std::vector<int> prompt;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const json& id = ids[i];
    if (!id.is_number_integer() || id.get<double>() < 0 || id.get<double>() >= vocab) {
      throw input_error(
          fmt::format("\"prompt_tokens\"[{}] = {} is not a token id; use ids from 0 to {} (the "
                      "model's vocabulary has {} symbols)",
                      i, shown(id), vocab - 1, vocab));
    }
    prompt.push_back(id.get<int>());
  }
  return prompt;
}

std::vector<int> prompt_of(const json& line, const model::Tokenizer& vocabulary) {
  const bool text = line.contains("prompt"), ids = line.contains("prompt_tokens");
  if (text && ids) throw input_error("has both \"prompt\" and \"prompt_tokens\"; give one of them");
  if (ids) return prompt_tokens(line["prompt_tokens"], vocabulary.size());
  if (!text) throw input_error("has no prompt; give \"prompt\" (text) or \"prompt_tokens\" (token ids)");
  if (!line["prompt"].is_string()) {
    throw input_error(
        fmt::format("\"prompt\" must be a string, got {}; give token ids as \"prompt_tokens\"", shown(line["prompt"])));
  }
  const std::vector<std::int32_t> ids32 = vocabulary.encode(line["prompt"].get<std::string>(), "\"prompt\"");
  return {ids32.begin(), ids32.end()};
}

double arrival_of(const json& line, double previous) {
  if (!line.contains("arrival")) {
    throw input_error("has no \"arrival\"; give its arrival time in seconds from the start, e.g. \"arrival\": 0.5");
  }
  const json& value = line["arrival"];
  if (!value.is_number() || !(value.get<double>() >= 0.0) || !std::isfinite(value.get<double>())) {
    throw input_error(fmt::format("\"arrival\" must be a number of seconds >= 0, got {}", shown(value)));
  }
  const double arrival = value.get<double>();
  if (arrival > limits::arrival_seconds) {
    throw input_error(
        fmt::format("\"arrival\" {} s is later than a trace may run ({} s); kpipe serve waits for "
                    "every arrival in real time",
                    arrival, limits::arrival_seconds));
  }
  if (arrival < previous) {
    throw input_error(fmt::format("\"arrival\" {} is earlier than the previous request's {}; sort the trace by arrival",
                                  arrival, previous));
  }
  return arrival;
}

// max_new_tokens as the trace asks, at least 1 (it is cut to the context later).
int max_new_tokens_of(const json& line) {
  if (!line.contains("max_new_tokens")) {
    throw input_error("has no \"max_new_tokens\"; say how many tokens to generate, e.g. \"max_new_tokens\": 32");
  }
  const json& value = line["max_new_tokens"];
  if (!value.is_number_integer() || value.get<double>() < 1.0) {
    throw input_error(fmt::format("\"max_new_tokens\" must be an integer >= 1, got {}", shown(value)));
  }
  return static_cast<int>(std::min(value.get<double>(), 2147483647.0));
}

void check_fields(const json& line) {
  if (!line.is_object())
    throw input_error(fmt::format("is not a JSON object; write one request per line: {}", example));
  for (const auto& field : line.items()) {
    const std::string& key = field.key();
    if (key == "arrival" || key == "prompt" || key == "prompt_tokens" || key == "max_new_tokens") continue;
    throw input_error(
        fmt::format("unknown field \"{}\"; a request has \"arrival\", \"prompt\" or "
                    "\"prompt_tokens\", and \"max_new_tokens\"",
                    printable(key)));
  }
}

// One line as a request, or an input error saying what is wrong with it.
Request request_of(std::string_view text, const model::Tokenizer& vocabulary, int context, double previous) {
  if (json_depth(text) > limits::json_depth) {
    throw input_error(
        fmt::format("nests JSON more than {} deep; write one flat request per line: {}", limits::json_depth, example));
  }
  const std::size_t longest =
      limits::request_line_bytes_per_token * static_cast<std::size_t>(context) + limits::request_line_slack_bytes;
  if (text.size() > longest) {
    throw input_error(fmt::format(
        "is {} bytes long, more than a request of at most {} prompt tokens takes ({} bytes); write one request "
        "per line: {}",
        text.size(), context - 1, longest, example));
  }
  const json line = json::parse(text.begin(), text.end(), nullptr, false);
  if (line.is_discarded()) {
    throw input_error(fmt::format("is not valid JSON; write one request per line: {}", example));
  }
  check_fields(line);
  Request request;
  request.arrival = arrival_of(line, previous);
  request.prompt = prompt_of(line, vocabulary);
  request.max_new_tokens = max_new_tokens_of(line);
  const int length = static_cast<int>(request.prompt.size());
  if (length == 0) throw input_error("the prompt is empty; a request needs at least one prompt token");
  if (length >= context) {
    throw input_error(
        fmt::format("the prompt has {} tokens, but the model's context of {} leaves room to "
                    "generate only after at most {}; shorten the prompt",
                    length, context, context - 1));
  }
  return request;
}

}  // namespace

Trace parse_request_trace(std::string_view text, std::string_view name, const model::Tokenizer& vocabulary,
                          int context) {
  Trace trace;
  double previous = 0.0;
  int number = 0;
  for (std::size_t begin = 0; begin < text.size() && !trace.error;) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    try {
      Request request = request_of(line, vocabulary, context, previous);
      request.id = static_cast<int>(trace.requests.size());
      const int room = context - static_cast<int>(request.prompt.size());
      if (request.max_new_tokens > room) {
        trace.clipped.push_back({request.id, request.max_new_tokens});
        request.max_new_tokens = room;
      }
      previous = request.arrival;
      trace.requests.push_back(std::move(request));
    } catch (const Error& e) {
      trace.error = fmt::format("{}:{}: {}", printable(name), number, e.what());
    }
  }
  return trace;
}

std::string read_request_trace_text(const std::string& path) {
  return read_input_file(
      path, {"request trace", limits::request_trace_bytes, "; examples/inference/make_trace.py writes traces"});
}

Trace read_request_trace(const std::string& path, const model::Tokenizer& vocabulary, int context) {
  return parse_request_trace(read_request_trace_text(path), path, vocabulary, context);
}

}  // namespace kpipe::runtime
