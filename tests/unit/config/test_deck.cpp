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
                               {"pipeline.stages=2", "pipeline.schedule=gpipe", "model.hidden=[8, 8]", "train.lr=0.5",
                                "pipeline.recompute=\"full\""});
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
  CHECK(error_of("pipeline.stages = \"two\"\n") ==
        "deck.toml:1: pipeline.stages must be an integer, got a string (\"two\")");
  CHECK(error_of("pipeline.stages = 0\n") ==
        "deck.toml:1: pipeline.stages = 0 is out of range: must be >= 1 and <= 4096");
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

TEST_CASE("deep nesting, long dotted keys, long lists and many keys are refused before parsing", "[config]") {
  CHECK(error_of("model.hidden = " + std::string(10000, '[') + std::string(10000, ']') + "\n") ==
        "deck.toml:1: lists and tables nest more than 64 levels deep; a deck needs one level, e.g. model.hidden = "
        "[256, 256]");
  std::string tables = "model.kind = \"mlp\"\nmodel.x = ";
  for (int i = 0; i < 100; ++i) tables += "{a = ";
  CHECK(error_of(tables + "1" + std::string(100, '}') + "\n").rfind("deck.toml:2: lists and tables nest", 0) == 0);
  std::string dotted = "model";
  for (int i = 0; i < 100; ++i) dotted += ".a";
  CHECK(error_of(dotted + " = 1\n") ==
        "deck.toml:1: a dotted key of more than 64 parts; deck keys have two, e.g. pipeline.stages");
  std::string list = "model.kind = \"mlp\"\nmodel.hidden = [1";
  for (int i = 0; i < 20000; ++i) list += ", 1";
  CHECK(error_of(list + "]\n").rfind("deck.toml:2: a list with more than 16384 entries", 0) == 0);
  std::string keys;
  for (int i = 0; i < 1001; ++i) keys += "k" + std::to_string(i) + " = 1\n";
  CHECK(error_of(keys).rfind("deck.toml:1001: more than 1000 keys", 0) == 0);
  CHECK(
      error_of("model.kind = \"mlp\"", {"model.hidden=" + std::string(70, '[') + std::string(70, ']')}) ==
      "command line 'model.hidden=" + std::string(70, '[') + std::string(70, ']') +
          "': lists and tables nest more than 64 levels deep; a deck needs one level, e.g. model.hidden = [256, 256]");
}

TEST_CASE("brackets, dots and commas in strings and comments are not structure", "[config]") {
  const std::string brackets(200, '[');
  CHECK(error_of("model.kind = \"" + brackets + "\"\n").find("model.kind = \"" + brackets + "\" is not valid") !=
        std::string::npos);
  CHECK(error_of("model.kind = '''\n" + brackets + "\n'''\n").find("is not valid") != std::string::npos);
  const auto deck = parse_deck("# " + brackets + " a.b.c.d.e\nmodel.hidden = [8, 8] # ]]]\n", "deck.toml");
  CHECK(deck.integers("model.hidden") == config::IntegerList{8, 8});
  CHECK(deck.origin("model.hidden") == "deck.toml:2");
  CHECK(parse_deck("\"model\".\"kind\" = \"mlp\"\n", "deck.toml").string("model.kind") == "mlp");
}

TEST_CASE("line numbers are right in a deck of many keys and tables", "[config]") {
  std::string text = "[model]\nkind = \"mlp\"\n\n[train]\n";
  for (int i = 0; i < 20; ++i) text += "# filler\n";
  text += "stepz = 3\n";
  CHECK(error_of(text).rfind("deck.toml:25: unknown key 'train.stepz'", 0) == 0);
}

TEST_CASE("an override may not hold control characters, nor be longer than a deck line needs", "[config]") {
  CHECK(error_of("model.kind = \"mlp\"", {"model.hidden=[" + std::string(70000, '1') + "]"})
            .find("an override of 70015 bytes; overrides are at most 65536 bytes") != std::string::npos);
  CHECK(error_of("model.kind = \"mlp\"", {"model.kind=mlp\nmodel.bogus=1"}) ==
        "command line 'model.kind=mlp\\nmodel.bogus=1': an override cannot hold control characters (\\n at offset "
        "14); write it on one line without tabs or escapes");
  CHECK(error_of("model.kind = \"mlp\"", {"pipeline.schedule=gpipe\x1b"}).find("(\\x1b at offset 23)") !=
        std::string::npos);
}

TEST_CASE("an out-of-range value is shown as written, and overflow is out of range", "[config]") {
  CHECK(error_of("train.lr = 1e400\n") == "deck.toml:1: train.lr = 1e400 is out of range: must be > 0 and <= 10");
  CHECK(error_of("sim.cost_forward = 1e308\n").rfind("deck.toml:1: sim.cost_forward = 1e308 is out of range", 0) == 0);
  CHECK(error_of("sim.cost_forward = 1_000.5e400\n").find("= 1_000.5e400 is out of range") != std::string::npos);
  CHECK(error_of("model.kind = \"mlp\"", {"train.lr=1e400"}).find("train.lr = 1e400 is out of range") !=
        std::string::npos);
  CHECK(parse_deck("sim.cost_forward = 1e9\n", "deck.toml").real("sim.cost_forward") == 1e9);
}

TEST_CASE("a string written as TOML reads back as itself, whatever it holds", "[config]") {
  const std::string text = "a\"b\\c\nd\te\x01 f";
  const std::string written = config::to_toml(config::Value{text});
  CHECK(written == "\"a\\\"b\\\\c\\nd\\te\\u0001 f\"");
  const config::Deck deck = config::parse_deck("data.path = " + written + "\n", "deck.toml");
  CHECK(deck.string("data.path") == text);
}
