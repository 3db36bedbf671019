// Character vocabularies: strict UTF-8 both ways, encode and decode, and
// errors that name the character or byte at fault.
#include <functional>
#include <string>
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/data/vocabulary.hpp"

using namespace kpipe;
using kpipe::test::input_error_of;
using namespace kpipe::model;

TEST_CASE("utf-8: multi-byte characters decode to code points and back", "[model][vocabulary]") {
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n";  // a é € 😀 newline
  const auto code_points = decode_utf8(text);
  CHECK(code_points == std::vector<char32_t>{U'a', U'\u00e9', U'\u20ac', U'\U0001f600', U'\n'});
  std::string back;
  for (const char32_t c : code_points) append_utf8(back, c);
  CHECK(back == text);
}

TEST_CASE("utf-8: invalid sequences are input errors naming the byte offset", "[model][vocabulary]") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {std::string("ab\xff"), "byte 2 (0xff)"},           // no lead byte is 0xff
      {std::string("a\x80"), "byte 1 (0x80)"},            // a continuation byte alone
      {std::string("ab\xc3"), "byte 2 (0xc3)"},           // cut off by the end
      {std::string("\xc3(x"), "byte 1 (0x28)"},           // broken continuation
      {std::string("a\xc0\xaf"), "byte 1 (0xc0)"},        // overlong '/'
      {std::string("xyz\xed\xa0\x80"), "byte 3 (0xed)"},  // an encoded surrogate
  };
  for (const auto& [bytes, where] : cases) {
    // Every reader of UTF-8 decodes alike: the code points, a vocabulary, the ids.
    const Vocabulary latin = Vocabulary::of_text("abcxyz/(");
    for (const auto& read : std::vector<std::function<void()>>{[&] { decode_utf8(bytes, "data.path 'x.txt'"); },
                                                               [&] { Vocabulary::of_text(bytes, "data.path 'x.txt'"); },
                                                               [&] { latin.encode(bytes, "data.path 'x.txt'"); }}) {
      const auto message = input_error_of(read);
      INFO(message);
      CHECK(message.find("data.path 'x.txt' is not valid UTF-8") != std::string::npos);
      CHECK(message.find(where) != std::string::npos);
      CHECK(message.find("convert it to UTF-8") != std::string::npos);
    }
  }
}

TEST_CASE("vocabulary: the sorted distinct symbols of a text; encode and decode round trip", "[model][vocabulary]") {
  const std::string text = "b\xc3\xa9 a\nab\xc3\xa9";
  const auto vocabulary = Vocabulary::of_text(text);
  CHECK(vocabulary.symbols() == std::vector<char32_t>{U'\n', U' ', U'a', U'b', U'\u00e9'});
  CHECK(vocabulary.size() == 5);
  CHECK(vocabulary.utf8() == "\n ab\xc3\xa9");
  const auto ids = vocabulary.encode(text);
  CHECK(ids == std::vector<std::int32_t>{3, 4, 1, 2, 0, 2, 3, 4});
  CHECK(vocabulary.decode(ids) == text);
  CHECK(vocabulary.id_of(U'z') == -1);
}

TEST_CASE("vocabulary: errors name the symbol, its position and the vocabulary's size", "[model][vocabulary]") {
  const Vocabulary vocabulary(std::vector<char32_t>{U'a', U'b', U'c'});
  auto message = input_error_of([&] { vocabulary.encode("abZc", "the prompt"); });
  INFO(message);
  CHECK(message.find("the prompt has 'Z' (U+005A) at character 2") != std::string::npos);
  CHECK(message.find("vocabulary of 3 symbols") != std::string::npos);
  message = input_error_of([&] { vocabulary.encode("ab\xe2\x82\xac"); });
  CHECK(message.find("U+20AC") != std::string::npos);
  message = input_error_of([&] { vocabulary.decode(std::vector<std::int32_t>{0, 3}); });
  CHECK(message.find("id 3, outside the vocabulary's [0, 3)") != std::string::npos);
  message = input_error_of([] { Vocabulary(std::vector<char32_t>{U'a', U'b', U'a'}); });
  CHECK(message.find("holds 'a' (U+0061) twice") != std::string::npos);
}
