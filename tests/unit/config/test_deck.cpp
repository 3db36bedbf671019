#include <string>

#include "catch.hpp"
#include "kpipe/config/deck.hpp"
#include "kpipe/core/error.hpp"

using namespace kpipe;
using config::parse_deck;

namespace {
// The message of the input error that parsing `text` raises, or "" if none.
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_deck(text, "deck.toml", overrides);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("dotted keys and tables give the same deck", "[config]") {
  const auto dotted = parse_deck("pipeline.stages = 4\npipeline.schedule = \"gpipe\"\n", "a.toml");
  const auto table = parse_deck("[pipeline]\nstages = 4\nschedule = \"gpipe\"\n", "b.toml");
  CHECK(dotted.integer("pipeline.stages") == 4);
  CHECK(table.integer("pipeline.stages") == 4);
  CHECK(dotted.string("pipeline.schedule") == table.string("pipeline.schedule"));
}

TEST_CASE("unset keys take the schema default and say so", "[config]") {
  const auto deck = parse_deck("pipeline.stages = 4\n", "deck.toml");
  CHECK(deck.integer("train.global_batch") == 256);
  CHECK(deck.integers("model.hidden") == config::IntegerList{256, 256, 256, 256});
  CHECK(deck.origin("train.global_batch") == "default");
  CHECK(deck.origin("pipeline.stages") == "deck.toml:1");
}

TEST_CASE("integers are accepted where reals are expected", "[config]") {
  const auto deck = parse_deck("train.lr = 1\n", "deck.toml");
  CHECK(deck.real("train.lr") == 1.0);
}

TEST_CASE("command-line overrides win over the deck and keep their types", "[config]") {
  const auto deck = parse_deck("pipeline.stages = 4\n", "deck.toml",
                               {"pipeline.stages=2", "pipeline.schedule=gpipe", "model.hidden=[8, 8]",
                                "train.lr=0.5", "pipeline.recompute=\"full\""});
  CHECK(deck.integer("pipeline.stages") == 2);
  CHECK(deck.string("pipeline.schedule") == "gpipe");
  CHECK(deck.integers("model.hidden") == config::IntegerList{8, 8});
  CHECK(deck.real("train.lr") == 0.5);
  CHECK(deck.string("pipeline.recompute") == "full");
  CHECK(deck.origin("pipeline.stages") == "command line 'pipeline.stages=2'");
}

TEST_CASE("errors name the key, the line and what is allowed", "[config]") {
  CHECK(error_of("\n\npipeline.stage = 2\n") ==
        "deck.toml:3: unknown key 'pipeline.stage' (did you mean 'pipeline.stages'?); "
        "`kpipe deck --doc` lists every key");
  CHECK(error_of("pipeline.stages = \"two\"\n") == "deck.toml:1: pipeline.stages must be an integer, got a string (\"two\")");
  CHECK(error_of("pipeline.stages = 0\n") == "deck.toml:1: pipeline.stages = 0 is out of range: must be >= 1 and <= 4096");
  CHECK(error_of("train.lr = 0\n") == "deck.toml:1: train.lr = 0.0 is out of range: must be > 0 and <= 10");
  CHECK(error_of("pipeline.schedule = \"gpipee\"\n").find("(did you mean \"gpipe\"?)") != std::string::npos);
  CHECK(error_of("pipeline.stages = 2\n", {"pipeline.stages"}).find("an override must be key=value") !=
        std::string::npos);
  CHECK(error_of("pipeline.stages = 2\n", {"train.steps=1.5"}) ==
        "command line 'train.steps=1.5': train.steps must be an integer, got a number (1.5)");
}

TEST_CASE("the first problem in file order is reported", "[config]") {
  // TOML tables are unordered; the report must still follow the file.
  CHECK(error_of("zzz.first = 1\naaa.second = 2\n").rfind("deck.toml:1: unknown key 'zzz.first'", 0) == 0);
}

TEST_CASE("syntax errors are one line with the line number", "[config]") {
  const std::string message = error_of("pipeline.stages = 2\npipeline.schedule = \"1f1b\n");
  CHECK(message.rfind("deck.toml:2: TOML syntax error: ", 0) == 0);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("an empty deck is rejected", "[config]") {
  CHECK(error_of("").find("the deck sets no keys") != std::string::npos);
  CHECK(error_of("# only a comment\n\n").find("the deck sets no keys") != std::string::npos);
}

TEST_CASE("the resolved deck parses back to the same values", "[config]") {
  const auto deck = parse_deck("pipeline.stages = 4\ntrain.lr = 0.25\nmodel.hidden = [3, 5]\n", "deck.toml");
  const auto again = parse_deck(deck.resolved_toml(), "resolved.toml");
  CHECK(again.resolved_toml() == deck.resolved_toml());
  CHECK(again.real("train.lr") == 0.25);
}
