#include "catch.hpp"
#include "kpipe/core/strings.hpp"

using namespace kpipe;

TEST_CASE("edit_distance counts insertions, deletions and substitutions", "[core]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("pipeline.stage", "pipeline.stages") == 1);
  CHECK(edit_distance("1f1c", "1f1b") == 1);
}

TEST_CASE("nearest_match suggests close names and nothing for far ones", "[core]") {
  const std::vector<std::string> keys = {"pipeline.stages", "pipeline.schedule", "model.kind"};
  CHECK(nearest_match("pipeline.stage", keys) == "pipeline.stages");
  CHECK(nearest_match("modle.kind", keys) == "model.kind");
  CHECK(nearest_match("completely.unrelated.thing", keys).empty());
}

TEST_CASE("join_choices reads as a sentence", "[core]") {
  CHECK(join_choices({}) == "");
  CHECK(join_choices({"a"}) == "a");
  CHECK(join_choices({"a", "b"}) == "a or b");
  CHECK(join_choices({"a", "b", "c"}, " and ") == "a, b and c");
}

TEST_CASE("printable escapes control characters and broken UTF-8, and keeps the rest", "[core]") {
  CHECK(printable("plain text, ünïcode ✓") == "plain text, ünïcode ✓");
  CHECK(printable("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(printable("\x1b[31mred") == "\\x1b[31mred");
  CHECK(printable(std::string("nul\0del\x7f", 8)) == "nul\\x00del\\x7f");
  CHECK(printable("\xff\xc3") == "\\xff\\xc3");
}

TEST_CASE("json_depth counts nesting outside strings", "[core]") {
  CHECK(kpipe::json_depth("") == 0);
  CHECK(kpipe::json_depth(R"({"a": 1})") == 1);
  CHECK(kpipe::json_depth(R"({"a": [1, {"b": [[]]}]})") == 5);
  CHECK(kpipe::json_depth(R"({"a": "[[[{{{", "b": "\"[["})") == 1);  // brackets inside strings, escaped quotes
  CHECK(kpipe::json_depth(std::string(100000, '[')) == 100000);      // unbalanced: counted, never parsed
}

TEST_CASE("invalid_utf8_offset accepts strict UTF-8 only (RFC 3629)", "[core]") {
  constexpr auto valid = std::string_view::npos;
  CHECK(kpipe::invalid_utf8_offset("") == valid);
  CHECK(kpipe::invalid_utf8_offset("plain, ünïcode ✓ 𝄞") == valid);
  CHECK(kpipe::invalid_utf8_offset("\xf4\x8f\xbf\xbf") == valid);  // U+10FFFF, the last code point
  CHECK(kpipe::invalid_utf8_offset("'\xff'") == 1);                // never a UTF-8 byte
  CHECK(kpipe::invalid_utf8_offset("ab\xc0\x80") == 2);            // overlong NUL
  CHECK(kpipe::invalid_utf8_offset("\xe0\x80\xaf") == 0);          // overlong '/'
  CHECK(kpipe::invalid_utf8_offset("x\xed\xa0\x80") == 1);         // surrogate U+D800
  CHECK(kpipe::invalid_utf8_offset("\xf4\x90\x80\x80") == 0);      // U+110000
  CHECK(kpipe::invalid_utf8_offset("ok\xe2\x9c") == 2);            // cut short
  CHECK(kpipe::invalid_utf8_offset("\xe2\x9c\x93\x80") == 3);      // a stray continuation byte
}

TEST_CASE("bounded_line cuts long quoted values and long lines, stating their lengths", "[core]") {
  // Short lines and values, and apostrophes inside words, pass as they are.
  const std::string short_line = "model.kind = \"mlq\" is not valid: the deck's 'model.kind' must be \"mlp\"";
  CHECK(bounded_line(short_line) == short_line);
  const std::string prose = "kpipe's own checkpoints" + std::string(2000, 's') + " and the deck's keys";
  CHECK(bounded_line(prose).size() <= 1000);

  const std::string value(1000000, 'x');
  const std::string cut = bounded_line("model.kind = \"" + value + "\" is not valid: must be one of \"mlp\"");
  CHECK(cut == "model.kind = \"" + std::string(64, 'x') + "…\" (1000000 bytes) is not valid: must be one of \"mlp\"");
  CHECK(bounded_line("unknown key '" + value + "': did you mean") ==
        "unknown key '" + std::string(64, 'x') + "…' (1000000 bytes): did you mean");

  // A value of multi-byte characters is cut between characters.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "é";
  const std::string accented = bounded_line("path '" + accents + "'");
  CHECK(accented == "path '" + accents.substr(0, 64) + "…' (400 bytes)");

  // An unquoted run past the bound: the line is cut and says how long it was.
  const std::string long_line = bounded_line(std::string(5000, 'y'));
  CHECK(long_line.size() <= 1000);
  CHECK(long_line.find("(5000 bytes in all)") != std::string::npos);
  // Many unclosed quotes: linear, and bounded.
  std::string quotes;
  for (int i = 0; i < 100000; ++i) quotes += " '";
  CHECK(bounded_line(quotes).size() <= 1000);
}
