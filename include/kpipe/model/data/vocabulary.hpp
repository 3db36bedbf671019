#pragma once
// A character vocabulary (data.tokenizer = "char"): token id i is the i-th
// symbol, a Unicode code point. A language model trains on ids; `kpipe generate` encodes its prompt
// and decodes its samples with the vocabulary of the training data
// (runtime::load_tokenizer).
//
// UTF-8 is decoded strictly (no overlong forms, surrogates or code points past
// U+10FFFF), so a file in another encoding is an input error at the byte that
// gives it away instead of a vocabulary of mojibake.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kpipe/core/function_ref.hpp"
#include "kpipe/model/data/tokenizer.hpp"

namespace kpipe::model {

// visit(c) for each code point c of `utf8`, in order, allocating nothing (a
// corpus decodes without a copy in code points). `what` names the text in
// the error ("data.path 'kjv.txt'", "the prompt"): an invalid sequence is an
// input error naming its byte offset.
void for_each_code_point(std::string_view utf8, std::string_view what, FunctionRef<void(char32_t)> visit);
// The code points of `utf8`, decoded as for_each_code_point does.
std::vector<char32_t> decode_utf8(std::string_view utf8, std::string_view what = "the text");
// Appends the UTF-8 form of `code_point` (a valid scalar value) to `out`.
void append_utf8(std::string& out, char32_t code_point);

class Vocabulary final : public Tokenizer {
 public:
  Vocabulary() = default;
  // Symbols in token order; a repeated symbol is an input error.
  explicit Vocabulary(std::vector<char32_t> symbols);
  // The sorted distinct code points of `utf8`.
  static Vocabulary of_text(std::string_view utf8, std::string_view what = "the text");

  int size() const override { return static_cast<int>(symbols_.size()); }
  const std::vector<char32_t>& symbols() const { return symbols_; }
  // Token id of `symbol`, or -1 when it is not in the vocabulary.
  int id_of(char32_t symbol) const;

  // Token ids of `utf8`; a character outside the vocabulary is an input error
  // naming it, its position and the vocabulary's size.
  std::vector<std::int32_t> encode(std::string_view utf8, std::string_view what = "the text") const override;
  // UTF-8 of token ids; an id outside [0, size()) is an input error.
  std::string decode(const std::int32_t* ids, std::size_t count) const override;
  using Tokenizer::decode;
  // "65 distinct characters".
  std::string description() const override;
  // Every symbol in token order, as one UTF-8 string (the HDF5 attribute `vocabulary`).
  std::string utf8() const;

 private:
  std::vector<char32_t> symbols_;
  std::vector<std::int32_t> ascii_;                  // id of each code point below 128, or -1
  std::unordered_map<char32_t, std::int32_t> rest_;  // ids of the others
};

}  // namespace kpipe::model
