// The request traces of kpipe serve: text and token prompts, clipping to the
// context, and each kind of bad line, which keeps the requests before it and
// names the file, the line and the fix.
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/model/data/vocabulary.hpp"
#include "kpipe/runtime/serving/request_trace.hpp"

using namespace kpipe;
using runtime::parse_request_trace;
using runtime::Trace;

namespace {

const model::Vocabulary vocabulary = model::Vocabulary::of_text(" abcdefgh");  // ' ' = 0, a = 1
constexpr int context = 16;

Trace parse(const std::string& text) { return parse_request_trace(text, "t.jsonl", vocabulary, context); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("trace: text and token prompts, ids in order, blank lines skipped", "[runtime][trace]") {
  const Trace trace = parse(
      "{\"arrival\": 0, \"prompt\": \"ab c\", \"max_new_tokens\": 3}\n"
      "\n"
      "{\"arrival\": 0.5, \"prompt_tokens\": [8, 0, 1], \"max_new_tokens\": 2}\r\n"
      "{\"arrival\": 0.5, \"prompt\": \"h\", \"max_new_tokens\": 1}");
  REQUIRE_FALSE(trace.error);
  REQUIRE(trace.requests.size() == 3);
  CHECK(trace.requests[0].prompt == std::vector<int>{1, 2, 0, 3});
  CHECK(trace.requests[0].max_new_tokens == 3);
  CHECK(trace.requests[1].id == 1);
  CHECK(trace.requests[1].arrival == 0.5);
  CHECK(trace.requests[1].prompt == std::vector<int>{8, 0, 1});
  CHECK(trace.requests[2].prompt == std::vector<int>{8});
  CHECK(trace.clipped.empty());
}

TEST_CASE("trace: max_new_tokens beyond the context is clipped and recorded", "[runtime][trace]") {
  const Trace trace = parse(
      "{\"arrival\": 0, \"prompt\": \"abcdef\", \"max_new_tokens\": 10}\n"
      "{\"arrival\": 1, \"prompt\": \"abcdef\", \"max_new_tokens\": 11}\n"
      "{\"arrival\": 2, \"prompt\": \"a\", \"max_new_tokens\": 99999999999}\n");
  REQUIRE_FALSE(trace.error);
  CHECK(trace.requests[0].max_new_tokens == 10);
  CHECK(trace.requests[1].max_new_tokens == 10);
  CHECK(trace.requests[2].max_new_tokens == 15);
  REQUIRE(trace.clipped.size() == 2);
  CHECK(trace.clipped[0].request == 1);
  CHECK(trace.clipped[0].requested == 11);
  CHECK(trace.clipped[1].request == 2);
}

TEST_CASE("trace: a bad line keeps the requests before it and names the line and the fix", "[runtime][trace]") {
  const std::string good = "{\"arrival\": 1, \"prompt\": \"ab\", \"max_new_tokens\": 2}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"arrival\": 1, \"prompt\": \"ab\"", "t.jsonl:3: is not valid JSON; write one request per line"},
      {"[1, 2]", "t.jsonl:3: is not a JSON object"},
      {"{\"prompt\": \"ab\", \"max_new_tokens\": 2}", "t.jsonl:3: has no \"arrival\""},
      {"{\"arrival\": -1, \"prompt\": \"ab\", \"max_new_tokens\": 2}", "\"arrival\" must be a number of seconds >= 0"},
      {"{\"arrival\": 0.5, \"prompt\": \"ab\", \"max_new_tokens\": 2}",
       "t.jsonl:3: \"arrival\" 0.5 is earlier than the previous request's 1; sort the trace by arrival"},
      {"{\"arrival\": 1, \"prompt\": \"ab\"}", "has no \"max_new_tokens\""},
      {"{\"arrival\": 1, \"prompt\": \"ab\", \"max_new_tokens\": -3}", "\"max_new_tokens\" must be an integer >= 1"},
      {"{\"arrival\": 1, \"prompt\": \"ab\", \"max_new_tokens\": 0}", "\"max_new_tokens\" must be an integer >= 1"},
      {"{\"arrival\": 1, \"max_new_tokens\": 2}", "has no prompt; give \"prompt\" (text) or \"prompt_tokens\""},
      {"{\"arrival\": 1, \"prompt\": \"ab\", \"prompt_tokens\": [1], \"max_new_tokens\": 2}",
       "has both \"prompt\" and \"prompt_tokens\""},
      {"{\"arrival\": 1, \"prompt\": \"abz\", \"max_new_tokens\": 2}",
       "t.jsonl:3: \"prompt\" has 'z' (U+007A) at character 2, which is not in the vocabulary of 9 symbols"},
      {"{\"arrival\": 1, \"prompt_tokens\": [1, 9], \"max_new_tokens\": 2}",
       "\"prompt_tokens\"[1] = 9 is not a token id; use ids from 0 to 8"},
      {"{\"arrival\": 1, \"prompt\": \"\", \"max_new_tokens\": 2}", "the prompt is empty"},
      {"{\"arrival\": 1, \"prompt\": \"abcdefghabcdefgh\", \"max_new_tokens\": 2}",
       "the prompt has 16 tokens, but the model's context of 16 leaves room to generate only after at most 15"},
      {"{\"arrival\": 1, \"prompt\": \"ab\", \"max_new_tokens\": 2, \"id\": 7}", "unknown field \"id\""},
      {"{\"arrival\": 1, \"prompt\": \"" + std::string(9000, 'a') + "\", \"max_new_tokens\": 2}",
       "t.jsonl:3: is 9049 bytes long, more than a request of at most 15 prompt tokens takes (8192 bytes)"},
  };
  for (const auto& [line, expected] : cases) {
    CAPTURE(line);
    const Trace trace = parse(good + good + line + "\n" + good);
    REQUIRE(trace.error);
    CHECK(contains(*trace.error, expected));
    CHECK(trace.error->find('\n') == std::string::npos);
    CHECK(trace.requests.size() == 2);
  }
}
