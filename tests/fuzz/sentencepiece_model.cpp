// Fuzzes SentencePiece model loading (data.tokenizer_model): kpipe's checks
// of the file and its rehearsal in a child, then the library in this process
// encoding and decoding a text other than the rehearsal's, as training and
// kpipe generate do. A file the checks and the rehearsal pass must not crash
// the library on any text: this text holds every byte value.

#include <string>

#include "fuzz_target.hpp"
#include "kpipe/model/data/tokenizer.hpp"

namespace {

std::string every_byte_and_words() {
  std::string text = "In the beginning God created the heaven and the earth. \xc3\xa9\xe2\x82\xac\n";
  for (int byte = 1; byte < 256; ++byte) text += static_cast<char>(byte);
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string text = every_byte_and_words();
  const std::string path = kpipe::fuzz::scratch_file(data, size, "fuzz.model");
  kpipe::fuzz::expect_accepted_or_refused([&] {
    const auto tokenizer = kpipe::model::load_sentencepiece(path);
    const std::vector<std::int32_t> ids = tokenizer->encode(text, "the fuzzed text");
    (void)tokenizer->decode(ids.data(), ids.size());
  });
  return 0;
}
