#pragma once
// What turns a language model's text into token ids and back: a character
// vocabulary (model::Vocabulary, data.tokenizer = "char"), or the subwords of
// a SentencePiece model (data.tokenizer = "sentencepiece"). Training data,
// `kpipe generate` and `kpipe serve` use the tokenizer of the data
// (runtime::load_tokenizer).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kpipe::model {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids are [0, size()).
  virtual int size() const = 0;
  // Token ids of `utf8`; text this tokenizer cannot encode is an input error
  // naming `what` ("the prompt", "data.path 'kjv.txt'").
  virtual std::vector<std::int32_t> encode(std::string_view utf8, std::string_view what = "the text") const = 0;
  // UTF-8 of token ids; an id outside [0, size()) is an input error.
  virtual std::string decode(const std::int32_t* ids, std::size_t count) const = 0;
  std::string decode(const std::vector<std::int32_t>& ids) const { return decode(ids.data(), ids.size()); }
  // What it is, for messages: "65 distinct characters", "SentencePiece model 'kjv.model' of 4096 pieces".
  virtual std::string description() const = 0;
};

// The SentencePiece model in file `path` (data.tokenizer_model). A missing,
// unreadable or corrupt file is an input error naming it; so is a kpipe
// built without SentencePiece (libsentencepiece-dev).
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);

}  // namespace kpipe::model
